"""DFD129: the host's SGLang cannot tap hidden states from the target's architecture."""

from __future__ import annotations

from dflash_doctor.checks.base import Evidence, Finding, Fix, Severity, Skip, check
from dflash_doctor.checks.views import require_dflash, target_evidence, version_evidence
from dflash_doctor.facts.capture_hooks import HOOK, capture_support, release_key
from dflash_doctor.facts.models import HostFacts

# The missing-hook refusal, per version (text split over two source lines in both).
# 0.5.11-0.5.15.post1: model_executor/model_runner.py 0.5.11:825-829, 0.5.15:1056-1060.
# 0.5.16-0.5.23: model_runner_components/attention_backend_setup.py 0.5.16:58-65, 0.5.23:65-71.
HOOK_NEITHER_SINCE = (0, 5, 16)
HOOK_REFUSAL_OLD = (
    "Model {arch} does not implement set_dflash_layers_to_capture, which is required for DFLASH."
)
HOOK_REFUSAL_NEW = (
    "Model {arch} implements neither set_dspark_layers_to_capture nor "
    "set_dflash_layers_to_capture, one of which is required for DFLASH/DSPARK."
)


@check(
    "DFD129",
    "target-cannot-capture-hidden-states",
    Severity.ERROR,
    needs=("target", "sglang_version"),
)
def target_cannot_capture(facts: HostFacts) -> list[Finding]:
    """The host's SGLang cannot tap hidden states from the target's architecture.

    **What it finds.** The DFLASH target must implement `set_dflash_layers_to_capture`
    (the drafter conditions on hidden states tapped from target layers). Which model
    classes implement it changes release by release; the catalog's per-version list is
    generated from the published wheels (`scripts/gen_dflash_capture.py`). A class that
    has the hook but drops what it captures is DFD167's (the same data's `inert` list).

    **Why it hurts.** SGLang stops while loading the target (`Model X does not implement
    set_dflash_layers_to_capture, which is required for DFLASH.`; from 0.5.16 `Model X
    implements neither set_dspark_layers_to_capture nor set_dflash_layers_to_capture,
    ...`).

    **Example.** A `Gemma4ForCausalLM` target on 0.5.13: the hook arrived in 0.5.14.

    **How to fix.** Upgrade SGLang to the first release that implements the hook for the
    architecture, when there is one; otherwise DFLASH cannot serve this target.

    **Fix safety.** An upgrade changes more than this; re-run the whole check after it.

    **Versions.** Hook texts: 0.5.11-0.5.15.post1 (`model_executor/model_runner.py`
    0.5.11:825-829, 0.5.15.post1:1059) and 0.5.16-0.5.23
    (`model_runner_components/attention_backend_setup.py` 0.5.16:62-63, 0.5.23:69-70).
    Architectures: read from the host's installed `sglang/srt/models` files when they can be
    read (a patched build answers for itself), else from the per-release data
    (`dflash_doctor/data/dflash_capture.json`: e.g. `srt/models/kimi_k25.py` 0.5.13:847,
    `srt/models/gemma4_causal.py` 0.5.14:1129); the verdict says which.
    """
    require_dflash(facts)
    target = facts.target.value
    assert target is not None
    version = facts.sglang_version.value or ""
    if not target.architectures:
        raise Skip("the target config lists no architectures")
    arch = target.architectures[0]
    answer = capture_support(version, arch)
    host = facts.capture_hook.value
    if host is not None and host.architecture == arch:
        # The host's own files decide (patched builds included).
        if host.implements:
            return []
        source = f"decided from the host's installed {host.file}"
        host_evidence: list[Evidence] = [
            Evidence(
                kind="derived",
                text=f"{arch} in the host's SGLang files has no {HOOK} "
                f"({host.files_read} file(s) read)",
                file=host.file,
            )
        ]
    else:
        host_evidence = []
        if answer is None:
            raise Skip(f"no capture data for SGLang {version} (older than 0.5.11)")
        if answer.captures:
            return []
        if not answer.known:
            raise Skip(f"SGLang {answer.release} registers no model class {arch!r}")
        source = f"decided from the {answer.release} wheel's data" + (
            "" if answer.exact else f" (the newest release at or below {version})"
        )
        if facts.capture_hook.error:
            source += f"; host files not read: {facts.capture_hook.error}"
    template = (
        HOOK_REFUSAL_NEW if release_key(version)[:3] >= HOOK_NEITHER_SINCE else HOOK_REFUSAL_OLD
    )
    fixes = _capture_fixes(answer.next_capturing if answer is not None else None, arch)
    return [
        target_cannot_capture.finding(
            title=f"SGLang {version} cannot capture DFLASH hidden states from {arch}",
            message=f"SGLang refuses to start: `{template.format(arch=arch)}` ({source}).",
            evidence=[
                target_evidence(
                    target,
                    "architectures",
                    f"target architectures={target.architectures}",
                ),
                version_evidence(facts),
                *host_evidence,
            ],
            fixes=fixes,
        )
    ]


def _capture_fixes(nxt: str | None, arch: str) -> list[Fix]:
    """Upgrade to the first release that captures from arch, or say none does."""
    if nxt:
        return [Fix(action="upgrade_sglang", value=nxt)]
    return [Fix(action="manual", note=f"no SGLang release implements the hook for {arch}")]
