"""DFD306: prefix caching with DFlash and `disable_eagle_block_drop`, by vLLM release."""

from __future__ import annotations

from dflash_doctor.checks.base import Finding, Fix, Severity, check
from dflash_doctor.checks.vllm_views import (
    version_evidence,
    vllm_dflash,
    vllm_flag_evidence,
    vllm_release,
)
from dflash_doctor.facts.models import HostFacts
from dflash_doctor.facts.vllm_rules import rule, rule_at

RULES = ("block_drop_disabled", "block_drop_not_dflash")


@check(
    "DFD306",
    "vllm-dflash-prefix-block-drop-off",
    Severity.WARNING,
    needs=("vllm_launch",),
    engine="vllm",
)
def vllm_dflash_prefix_block_drop_off(facts: HostFacts) -> list[Finding]:
    """Prefix caching serves DFlash without its trailing-block drop.

    **What it finds.** A DFlash launch with prefix caching on (vLLM's default; not
    `--no-enable-prefix-caching`) and `"disable_eagle_block_drop": true` in
    `--speculative-config`, on a vLLM release where that reaches DFlash (0.30.0-0.32.0).

    **Why it hurts.** vLLM 0.27.1-0.34.0 never disable or refuse prefix caching for
    DFlash. In 0.30.0-0.32.0 DFlash counts as EAGLE for it: on a cache hit the trailing
    cached block is dropped and recomputed, and `disable_eagle_block_drop` keeps it, which
    vLLM itself warns at start-up `EAGLE trailing prefix-cache block dropping is disabled.
    This is experimental and may affect speculative-token acceptance rates.` From 0.33.0
    DFlash needs no drop (its draft KV depends on the target hidden state alone) and the
    key changes nothing for it: no finding.

    **Example.** vLLM 0.31.0, `--speculative-config '{"method": "dflash", ...,
    "disable_eagle_block_drop": true}'`, prefix caching on.

    **How to fix.** Remove `disable_eagle_block_drop` from `--speculative-config` (or
    launch with `--no-enable-prefix-caching`) and relaunch.

    **Fix safety.** Safe: the drop is vLLM's default and costs one block's recompute on a
    cache hit.

    **Versions.** The key from 0.30.0 (vllm/config/speculative.py 0.30.0:440); the
    warning (vllm/v1/core/sched/scheduler.py 0.30.0:287-293, 0.32.0:316-322); DFlash
    exempt from 0.33.0 (vllm/config/speculative.py 0.33.0:2122-2129, 0.34.0:1767-1774).
    Prefix caching's default: vllm/config/cache.py 0.34.0:267. Where the release is not
    known the finding names both ranges. The issue's "prefix caching collapsing
    acceptance" is not what the wheels show: nothing else in them changes DFlash under
    prefix caching.
    """
    launch = vllm_dflash(facts)
    spec = launch.speculative
    if spec is None or spec.disable_eagle_block_drop is not True:
        return []
    if launch.enable_prefix_caching is False:
        return []
    version = vllm_release(facts)
    found = rule_at("DFD306", version, RULES) if version is not None else None
    if found is not None and found.id != "block_drop_disabled":
        return []
    evidence = [
        vllm_flag_evidence(launch, "--speculative-config", "disable_eagle_block_drop: true")
    ]
    if found is not None:
        evidence.append(version_evidence(facts))
        message = f"vLLM {version} ({found.cite()}): {found.does}"
    else:
        later = rule("block_drop_not_dflash")
        found = rule("block_drop_disabled")
        message = (
            f"the vLLM release is not known: in {found.releases()} {found.does}; "
            f"in {later.releases()} {later.does}"
        )
    return [
        vllm_dflash_prefix_block_drop_off.finding(
            title="DFlash under prefix caching without the trailing-block drop",
            message=message,
            severity=Severity.WARNING if version is not None else Severity.INFO,
            evidence=evidence,
            fixes=[Fix(action="manual", note=found.fix)],
        )
    ]
