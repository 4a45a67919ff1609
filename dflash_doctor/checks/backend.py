"""Checks on the attention backend the DFlash draft worker runs with."""

from __future__ import annotations

from dflash_doctor.checks.base import Evidence, Finding, Fix, Severity, Skip, check
from dflash_doctor.checks.views import (
    flag_evidence,
    log_evidence,
    require_dflash,
    version_facts,
)
from dflash_doctor.facts.models import DrafterConfig, HostFacts, LaunchArgs
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
    `--attention-backend`; any other value is replaced, with the warning `DFLASH draft
    worker ... Falling back to 'flashinfer'.` From 0.5.17 `trtllm_mha` is kept only when
    every draft layer is `sliding_attention` or the drafter's config says `is_causal: true`;
    a mixed or full-attention drafter falls back (`DFLASH only enables 'trtllm_mha' when
    all layers use sliding attention or the draft is explicitly causal; ...`).

    **Why it hurts.** The server runs, but not as configured: the backend you tuned or
    benchmarked is not the one drafting, and CUDA-graph and memory settings sized for it
    may not fit the fallback.

    **Example.** SGLang 0.5.23, `--attention-backend trtllm_mha`, a drafter with five
    sliding layers and one full layer: the draft worker runs `flashinfer`.

    **How to fix.** Set `--speculative-draft-attention-backend` to a supported backend
    (`fa3` or `flashinfer` on NVIDIA GPUs) so the choice is explicit.

    **Fix safety.** Safe: it names the backend SGLang already falls back to; the target's
    backend is unchanged. Needs a relaunch.

    **Versions.** Supported draft backends per release: `speculative/dflash_worker.py`
    0.5.11:102 through 0.5.16, `arg_groups/speculative_hook.py` 0.5.17:443-450 through
    0.5.19, DRAFT_ATTENTION_BACKEND_CHOICES from 0.5.20 (`arg_groups/choices.py`
    0.5.20:107-115, 0.5.23:103-111). `trtllm_mha` always falls back through 0.5.16
    (`arg_groups/speculative_hook.py` 0.5.16:455-462); from 0.5.17 only for a drafter that
    is neither all sliding nor causal (`arg_groups/speculative_hook.py` 0.5.17:464-494,
    0.5.21:847-877, 0.5.23:945-978).
    """
    require_dflash(facts)
    launch = facts.launch.value
    configured, evidence = _configured_backend(launch) if launch is not None else (None, [])
    log = facts.log.value
    if log is not None:
        evidence.extend(log_evidence(log, ln.line, ln.text) for ln in log.backend_fallbacks)
    vf = version_facts(facts)
    supported = vf.draft_backends if vf is not None else DFLASH_DRAFT_BACKENDS
    unsupported = configured is not None and configured not in supported
    cfg = facts.drafter.value
    why = f"The DFlash draft worker supports {', '.join(supported)}"
    if configured == "trtllm_mha" and not unsupported and cfg is not None:
        refusal = _trtllm_refusal(cfg)
        if refusal is not None:
            unsupported = True
            why = (
                "The DFlash draft worker keeps 'trtllm_mha' only for a drafter whose layers are "
                "all sliding_attention or whose config is causal; this one is neither"
            )
            evidence.append(refusal)
    if not unsupported and not (log is not None and log.backend_fallbacks):
        if configured is None and (log is None or log.dflash_init is None):
            raise Skip("no attention backend configured and no DFlash init line to confirm")
        return []
    fallback = (log.dflash_attention_backend if log is not None else None) or "flashinfer"
    return [
        draft_backend_fallback.finding(
            title=f"Draft attention backend {configured!r} is not supported by DFlash",
            message=f"{why}; {configured!r} is replaced by {fallback!r}.",
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


def _configured_backend(launch: LaunchArgs) -> tuple[str | None, list[Evidence]]:
    """The backend the draft worker is asked for: its own flag, else the inherited one."""
    if launch.draft_attention_backend:
        configured = launch.draft_attention_backend
        flag = "--speculative-draft-attention-backend"
        return configured, [flag_evidence(launch, flag, f"{flag} {configured}")]
    if launch.attention_backend:
        configured = launch.attention_backend
        text = (
            f"--attention-backend {configured} (no draft backend set: the draft worker inherits it)"
        )
        return configured, [flag_evidence(launch, "--attention-backend", text)]
    return None, []


def _trtllm_refusal(cfg: DrafterConfig) -> Evidence | None:
    """Evidence that 0.5.17+ refuses trtllm_mha for this drafter, or None when it keeps it."""
    # 0.5.17+ keeps trtllm_mha for the draft only when every layer is sliding or the
    # draft is causal (arg_groups/speculative_hook.py 0.5.17:476-494, 0.5.23:957-978).
    all_sliding = bool(cfg.layer_types) and set(cfg.layer_types) == {"sliding_attention"}
    if all_sliding or cfg.is_causal:
        return None
    return Evidence(
        kind="config",
        text=f"drafter layer types {sorted(set(cfg.layer_types))}, is_causal "
        f"{cfg.is_causal}: trtllm_mha needs all sliding layers or a causal draft",
        file=cfg.path,
        key="layer_types",
        line=cfg.key_lines.get("layer_types"),
    )
