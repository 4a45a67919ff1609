"""Checks on the attention backend the DFlash draft worker runs with."""

from __future__ import annotations

from dflash_doctor.checks.base import Evidence, Finding, Fix, Severity, Skip, check
from dflash_doctor.checks.views import (
    flag_evidence,
    log_evidence,
    require_dflash,
    version_facts,
)
from dflash_doctor.facts.models import HostFacts
from dflash_doctor.sglang_versions import DFLASH_DRAFT_BACKENDS


@check(
    "DFD107",
    "draft-attention-backend-fallback",
    Severity.WARNING,
    needs_any=("launch", "log"),
)
def draft_backend_fallback(facts: HostFacts) -> list[Finding]:
    """The draft attention backend is one DFlash does not support, so SGLang falls back.

    **What it finds.** The DFlash draft worker accepts `flashinfer`, `fa3`, `fa4` and
    `triton` (plus `ascend` from 0.5.13, `trtllm_mha` from 0.5.17, `intel_xpu` from 0.5.20).
    It takes `--speculative-draft-attention-backend`, else the server's
    `--attention-backend`; any other value (e.g. `trtllm_mha` before 0.5.17, which could not
    run the drafter's non-causal attention) is replaced, with the warning `DFLASH draft
    worker ... Falling back to 'flashinfer'.`

    **Why it hurts.** The server runs, but not as configured: the backend you tuned or
    benchmarked is not the one drafting, and CUDA-graph and memory settings sized for it
    may not fit the fallback.

    **How to fix.** Set `--speculative-draft-attention-backend` to a supported backend
    (`fa3` or `flashinfer` on NVIDIA GPUs) so the choice is explicit.
    """
    require_dflash(facts)
    evidence: list[Evidence] = []
    configured: str | None = None
    launch = facts.launch.value
    if launch is not None:
        if launch.draft_attention_backend:
            configured = launch.draft_attention_backend
            evidence.append(
                flag_evidence(
                    launch,
                    "--speculative-draft-attention-backend",
                    f"--speculative-draft-attention-backend {configured}",
                )
            )
        elif launch.attention_backend:
            configured = launch.attention_backend
            evidence.append(
                flag_evidence(
                    launch,
                    "--attention-backend",
                    f"--attention-backend {configured} (no draft "
                    "backend set: the draft worker inherits it)",
                )
            )
    log = facts.log.value
    if log is not None:
        evidence.extend(log_evidence(log, ln.line, ln.text) for ln in log.backend_fallbacks)
    vf = version_facts(facts)
    supported = vf.draft_backends if vf is not None else DFLASH_DRAFT_BACKENDS
    unsupported = configured is not None and configured not in supported
    if not unsupported and not (log is not None and log.backend_fallbacks):
        if configured is None and (log is None or log.dflash_init is None):
            raise Skip("no attention backend configured and no DFlash init line to confirm")
        return []
    fallback = (log.dflash_attention_backend if log is not None else None) or "flashinfer"
    return [
        Finding(
            check_id="DFD107",
            severity=Severity.WARNING,
            title=f"Draft attention backend {configured!r} is not supported by DFlash",
            message=(
                f"The DFlash draft worker supports {', '.join(supported)}; "
                f"{configured!r} is replaced by {fallback!r}."
            ),
            evidence=evidence,
            fixes=[
                Fix(
                    action="set_flag",
                    flag="--speculative-draft-attention-backend",
                    value=fallback if fallback in supported else "flashinfer",
                )
            ],
        )
    ]
