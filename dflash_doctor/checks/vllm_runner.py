"""vLLM's model runner variable against a DFlash drafter (docs/vllm.md)."""

from __future__ import annotations

import re

from dflash_doctor.checks.base import Evidence, Finding, Fix, Severity, Unjudged, check
from dflash_doctor.checks.views import config_evidence, drafter
from dflash_doctor.checks.vllm_views import vllm_dflash, vllm_flag_evidence
from dflash_doctor.facts.models import DrafterConfig, HostFacts
from dflash_doctor.facts.vllm_models import RUNNER_ENV, VllmLaunch
from dflash_doctor.sglang_versions import parse_version


def runner_value(text: str) -> bool | None:
    """The variable as 0.27.1-0.33.0 read it, `bool(int(value))` (vllm/envs.py
    0.28.0:338-341); None where `int` refuses it (a start-up ValueError)."""
    body = text.strip()
    if len(body) > 40 or not re.fullmatch(r"[+-]?[0-9]+(?:_[0-9]+)*", body):
        return None
    return int(body) != 0


def mixed_layers(cfg: DrafterConfig) -> tuple[int, int]:
    """(sliding, all) layer counts as vLLM's test reads them: `0 < sliding < all` is a
    mixed drafter (vllm/config/vllm.py 0.28.0:679-689)."""
    if cfg.layer_types_source == "unknown":
        raise Unjudged("the drafter's layer types are not known (no layer_types, unknown model)")
    types = cfg.layer_types
    return sum(t == "sliding_attention" for t in types), len(types)


@check(
    "DFD300",
    "vllm-v1-runner-forced",
    Severity.ERROR,
    needs=("vllm_launch", "drafter"),
    engine="vllm",
)
def vllm_v1_runner_forced(facts: HostFacts) -> list[Finding]:
    """`VLLM_USE_V2_MODEL_RUNNER` forces vLLM's V1 runner on a DFlash server.

    **What it finds.** The vLLM server drafting with DFlash is started with
    `VLLM_USE_V2_MODEL_RUNNER` set to anything but `1`: `0` (or another integer that is
    zero), or text that is not an integer (`false`, `no`).

    **Why it hurts.** When set, the variable decides the runner before anything else, so
    `0` overrides vLLM moving mixed sliding/full DFlash drafters to the V2 runner. The V1
    runner cannot serve them: the drafter's load raises `NotImplementedError: DFlash
    drafters with mixed sliding/full attention require the V2 model runner; relaunch with
    VLLM_USE_V2_MODEL_RUNNER=1.` and the server never starts. Text that is not an integer
    is a `ValueError` of `int()` at start-up. vLLM 0.34.0 removed the V1 runner and
    refuses any value but `1` at start-up, whatever the drafter.

    **Example.** `export VLLM_USE_V2_MODEL_RUNNER=0` kept from an EAGLE deployment, now
    serving `z-lab/gemma-4-31B-it-DFlash` (five sliding layers, one full).

    **How to fix.** Set `VLLM_USE_V2_MODEL_RUNNER` to `1` (or unset it: vLLM picks the
    runner the drafter needs), and relaunch. `dflash-doctor fix` sets it to `1` where the
    launch script assigns it (`export`, a plain assignment, the command's own prefix) or
    in the unit's `Environment=`; set elsewhere (an `EnvironmentFile=`, a sourced file, the
    process's parent), it is a manual step.

    **Fix safety.** Safe: the V2 runner is the one vLLM itself picks for these drafters;
    it is the only runner from 0.34.0.

    **Versions.** Read in vLLM 0.27.1-0.34.0. The variable decides first
    (vllm/config/vllm.py 0.27.1:579-581, 0.28.0:616-618, 0.29.0:646-648,
    0.30.0:692-694, 0.31.0:718-720, 0.32.0:720-722, 0.33.0:748-750); unset, a mixed
    drafter moves to V2 (vllm/config/vllm.py 0.28.0:634-637). The refusal:
    vllm/model_executor/models/qwen3_dflash.py 0.27.1:118-127, 0.28.0:141-150,
    0.29.0:121-130, 0.30.0:122-131, 0.31.0:152-161, 0.32.0:152-161, 0.33.0:128-137.
    0.34.0: vllm/platforms/interface.py 0.34.0:1481-1490 (any value but `1`). The
    installed release is read from its `vllm-*.dist-info`; a drafter that is not mixed
    under `0` runs on V1 in 0.27.1-0.33.0 (no finding), and where the release is not
    known that is a warning (0.34.0 refuses it). Releases before 0.27.1 are not judged.
    """
    launch = vllm_dflash(facts)
    value = launch.environ.get(RUNNER_ENV)
    if value is None:
        return []
    version = _version(facts)
    if version is not None and version >= V1_REMOVED:
        if value == "1":
            return []
        why = f"vLLM {facts.vllm_version.value} refuses {RUNNER_ENV}={value!r} at start-up"
        said = Evidence(
            kind="version", text=f"vLLM {facts.vllm_version.value}", file=facts.vllm_version.source
        )
        return [_refused(launch, value, why + ": Model Runner V1 has been removed", [said])]
    on = runner_value(value)
    if on is True:
        return []
    cfg = drafter(facts)
    sliding, layers = mixed_layers(cfg)
    mixed = 0 < sliding < layers
    shown = f"{sliding} of {layers} draft layers are sliding_attention, the rest full"
    more = [config_evidence(cfg, "layer_types", shown)] if mixed else []
    if on is None:
        why = f"{RUNNER_ENV}={value!r} is not an integer: every vLLM release read refuses it"
        return [_refused(launch, value, why, more)]
    if mixed:
        why = (
            f"{RUNNER_ENV}=0 forces the V1 runner, which refuses this mixed sliding/full "
            "DFlash drafter at load (NotImplementedError); vLLM 0.34.0 refuses the variable"
        )
        return [_refused(launch, value, why, more)]
    if version is not None:
        return []  # 0.27.1-0.33.x: the V1 runner serves a drafter that is not mixed
    finding = _refused(
        launch,
        value,
        f"{RUNNER_ENV}=0 forces the V1 runner (0.27.1-0.33.0); vLLM 0.34.0 removed it and "
        "refuses the variable at start-up (the installed vLLM is not known)",
        [],
    )
    return [finding.model_copy(update={"severity": Severity.WARNING, "title": V1_TITLE})]


V1_REMOVED = (0, 34, 0)
FIRST_READ = (0, 27, 1)
V1_TITLE = "the V1 runner is forced"


def _version(facts: HostFacts) -> tuple[int, int, int] | None:
    """The installed vLLM release, None where unknown; Unjudged before the releases read."""
    version = parse_version(facts.vllm_version.value or "")
    if version is not None and version < FIRST_READ:
        raise Unjudged(f"vLLM {facts.vllm_version.value} predates the releases read (0.27.1+)")
    return version


def _refused(launch: VllmLaunch, value: str, why: str, more: list[Evidence]) -> Finding:
    return vllm_v1_runner_forced.finding(
        title="vLLM will not start this DFlash server",
        message=why,
        evidence=[vllm_flag_evidence(launch, RUNNER_ENV, f"{RUNNER_ENV}={value}"), *more],
        fixes=[Fix(action="set_env", flag=RUNNER_ENV, value="1")],
    )
