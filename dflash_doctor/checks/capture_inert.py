"""DFD167: the target's capture hook exists but hands the drafter nothing it captured."""

from __future__ import annotations

from dflash_doctor.checks.base import Evidence, Finding, Fix, Severity, Skip, Unjudged, check
from dflash_doctor.checks.views import require_dflash, version_evidence
from dflash_doctor.facts.capture_hooks import HOOK, inert_hook
from dflash_doctor.facts.models import HostFacts


@check("DFD167", "capture-hook-inert", Severity.ERROR)
def capture_hook_inert(facts: HostFacts) -> list[Finding]:
    """The target class has the DFLASH capture hook, but its model drops what it captures.

    **What it finds.** DFD129 asks whether the target's model class implements
    `set_dflash_layers_to_capture`. This check asks the next question for the classes that
    do: does the captured list reach the drafter? The known-inert list sits in DFD129's
    data (`dflash_doctor/data/dflash_capture.json`, key `inert`, keyed by architecture and
    release) and is generated from the wheels by `scripts/gen_dflash_capture.py`: a model
    `forward` in the registering module that fills `aux_hidden_states` from the layers the
    hook marked and returns another pair first. What reading cannot derive (a public
    report's exception text) stays in the data's `inert_notes`, said to be so. The verdict
    comes from the release's data: the host's own files answer only whether the hook exists
    (DFD129), so a patched build that hands the layers over is still named here.

    **Why it hurts.** SGLang starts (the hook exists, so the start-up test passes) and the
    drafter is conditioned on the wrong tensors: acceptance sits near 1.0 (DFD143) with no
    error in the log, or the verify step fails on the unexpected shape.

    **Example.** A `Qwen4ExpForConditionalGeneration` target on 0.5.23:
    `Qwen4ExpModel.forward` collects the marked layers, then returns `(hidden_states,
    hc_hidden_states)` on every non-idle batch; the wrapper takes the hyper-connection
    streams as the captured states (reported as sgl-project/sglang#38589).

    **How to fix.** No released SGLang (through 0.5.23) hands the captured layers over for
    this architecture: serve the target without DFLASH, or with a patched model file; the
    verdict names the return that drops them.

    **Fix safety.** Manual: the doctor changes nothing.

    **Versions.** `Qwen4ExpForConditionalGeneration`, 0.5.20-0.5.23:
    the returns `models/qwen4_exp.py` 0.5.20:1707-1712, 0.5.23:2170-2175; the list filled
    `models/qwen4_exp.py` 0.5.23:2104; the wrapper's unpacking `models/qwen3_vl.py`
    0.5.23:1662-1664; the hook `models/qwen3_5.py` 0.5.23:1889-1892.
    """
    require_dflash(facts)
    target = facts.target.value
    if target is None:
        raise Unjudged(f"target config unavailable: {facts.target.error}")
    if not target.architectures:
        raise Unjudged("the target config lists no architectures")
    version = facts.sglang_version.value
    if not version:
        raise Unjudged("SGLang version unknown")
    arch = target.architectures[0]
    host = facts.capture_hook.value
    if host is not None and host.architecture == arch and not host.implements:
        raise Skip(f"{arch} has no {HOOK} on this host at all (DFD129)")
    found = inert_hook(version, arch)
    if found is None:
        return []
    evidence = [
        Evidence(
            kind="config",
            text=f"target architectures={target.architectures}",
            file=target.path,
            line=target.key_lines.get("architectures"),
            key="architectures",
        ),
        version_evidence(facts),
        Evidence(kind="derived", text=f"SGLang {found.release} {found.site}: {found.note or ''}"),
    ]
    return [
        capture_hook_inert.finding(
            title=f"SGLang {version} captures nothing usable from {arch} for DFLASH",
            message=(
                f"{arch} has {HOOK} in SGLang {found.release}, but its model's forward "
                f"returns another pair before the captured layers ({found.site}), so the "
                "drafter is conditioned on the wrong tensors: expect an accept length near "
                "1.0 or a failed verify step."
            ),
            evidence=evidence,
            fixes=[
                Fix(
                    action="manual",
                    note=f"serve {arch} without DFLASH, or patch {found.site} to return "
                    "the captured aux_hidden_states",
                )
            ],
        )
    ]
