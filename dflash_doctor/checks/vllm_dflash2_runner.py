"""DFD307: a DFlash 2 checkpoint served by vLLM's V1 model runner (or a vLLM without it)."""

from __future__ import annotations

from dflash_doctor.checks.base import Finding, Fix, Severity, check
from dflash_doctor.checks.views import config_evidence, drafter
from dflash_doctor.checks.vllm_runner import runner_value
from dflash_doctor.checks.vllm_views import (
    version_evidence,
    vllm_dflash,
    vllm_flag_evidence,
    vllm_release,
)
from dflash_doctor.facts.models import HostFacts
from dflash_doctor.facts.vllm_models import RUNNER_ENV
from dflash_doctor.facts.vllm_rules import VllmRule, rule, rule_at

# The architecture vLLM tells a DFlash 2 draft by (vllm/config/vllm.py 0.28.0:668-677).
DFLASH2_ARCHITECTURE = "DFlash2DraftModel"
RULES = (
    "dflash2_unknown",
    "dflash2_v1_silent",
    "dflash2_v1_refused",
    "candidate_head_v1_refused",
    "v1_removed",
)


@check(
    "DFD307",
    "vllm-dflash2-on-v1-runner",
    Severity.ERROR,
    needs=("vllm_launch", "drafter"),
    engine="vllm",
)
def vllm_dflash2_on_v1_runner(facts: HostFacts) -> list[Finding]:
    """A DFlash 2 checkpoint on a vLLM runner that cannot serve it as DFlash 2.

    **What it finds.** The drafter's `architectures` names `DFlash2DraftModel` (what
    vLLM tells a DFlash 2 draft by; a speculators-format `method: dflash2` config becomes
    it) and the launch forces the V1 model runner (`VLLM_USE_V2_MODEL_RUNNER` other than
    `1`), or the installed vLLM predates DFlash 2.

    **Why it hurts.** DFlash 2's candidate selector exists only in vLLM's V2 runner. By
    release (data/vllm_rules.json, verified in the wheels): 0.27.1 has no
    `DFlash2DraftModel` at all; 0.28.0 serves it on V1 as DFlash 1 with no message (the
    "silent degrade" of the issue, and only 0.28.0 does it); 0.29.0-0.30.0 refuse it at
    start-up (`Model Runner V1 does not support: dflash2 drafts`), 0.31.0-0.33.0 too
    (`Model Runner V1 does not support: DFlash candidate-head drafts`); 0.34.0 has no V1
    runner and refuses the variable. Unset, vLLM serves DFlash 2 drafts on V2 (0.28.0
    picks it for them; 0.29.0+ use it by default and refuse where it cannot run).

    **Example.** `export VLLM_USE_V2_MODEL_RUNNER=0` kept from an EAGLE deployment on
    vLLM 0.28.0, serving a DFlash 2 drafter: acceptance of DFlash 1, no error.

    **How to fix.** Unset `VLLM_USE_V2_MODEL_RUNNER` (or set it to `1`) and relaunch; on
    0.27.1 upgrade to 0.28.0 or later.

    **Fix safety.** Safe: the V2 runner is the one vLLM picks for DFlash 2 drafts.

    **Versions.** The registry entry from 0.28.0 (vllm/model_executor/models/registry.py
    0.28.0:628, 0.34.0:688); the V2 move and silent-degrade comment (vllm/config/vllm.py
    0.28.0:639-643); the DFlash 2 feature V1 lacks (vllm/config/vllm.py 0.29.0:2635-2636),
    the candidate-head one (vllm/config/vllm.py 0.31.0:3140-3141, 0.33.0:3136-3137), the
    refusal (vllm/config/vllm.py 0.29.0:2736-2740, 0.33.0:3333-3337); 0.34.0:
    vllm/platforms/interface.py 0.34.0:1481-1490. Where the release is not known every
    range is named.
    """
    launch = vllm_dflash(facts)
    cfg = drafter(facts)
    if DFLASH2_ARCHITECTURE not in cfg.architectures:
        return []
    version = vllm_release(facts)
    found = rule_at("DFD307", version, RULES) if version is not None else None
    value = launch.environ.get(RUNNER_ENV)
    forced_v1 = value is not None and runner_value(value) is not True
    if not forced_v1 and (found is None or found.id != "dflash2_unknown"):
        return []
    evidence = [config_evidence(cfg, "architectures", f"architectures: {DFLASH2_ARCHITECTURE}")]
    if value is not None:
        evidence.insert(0, vllm_flag_evidence(launch, RUNNER_ENV, f"{RUNNER_ENV}={value}"))
    if found is not None:
        evidence.append(version_evidence(facts))
        message = f"vLLM {version} ({found.cite()}): {found.does}"
    else:
        message = "the vLLM release is not known: " + "; ".join(
            f"{r.releases()}: {r.does}" for r in map(rule, RULES[1:])
        )
    return [
        vllm_dflash2_on_v1_runner.finding(
            title="DFlash 2 drafter is not served as DFlash 2",
            message=message,
            severity=_severity(found),
            evidence=evidence,
            fixes=[Fix(action="manual", note=(found or rule(RULES[2])).fix)],
        )
    ]


def _severity(found: VllmRule | None) -> Severity:
    # 0.28.0 serves it (as DFlash 1): slower, not down.
    return (
        Severity.WARNING
        if found is not None and found.id == "dflash2_v1_silent"
        else (Severity.ERROR)
    )
