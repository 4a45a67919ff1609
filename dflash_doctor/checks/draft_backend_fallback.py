"""Checks on the attention backend the DFlash draft worker runs with."""

from __future__ import annotations

import re
from dataclasses import dataclass

from dflash_doctor.checks.base import Evidence, Finding, Fix, Severity, Skip, check
from dflash_doctor.checks.views import (
    flag_evidence,
    log_evidence,
    require_dflash,
    version_facts,
)
from dflash_doctor.facts.gpu_arch import capability_major
from dflash_doctor.facts.models import DrafterConfig, HostFacts, LaunchArgs
from dflash_doctor.sglang_versions import DFLASH_DRAFT_BACKENDS, VersionFacts

DRAFT_FLAG = "--speculative-draft-attention-backend"
TRTLLM = "trtllm_mha"
# The platform fallback on CUDA in every release (ROCm and XPU hosts fall back to triton).
CUDA_FALLBACK = "flashinfer"
# `... Falling back to 'X'.`: the backend the draft worker really got (data/log_patterns.json).
_LOGGED_FALLBACK = re.compile(r"Falling back to '([\w.-]+)'")


@dataclass(frozen=True)
class Replaced:
    """The draft worker does not keep the backend it was given: why, and what it runs."""

    why: str
    fallback: str
    evidence: list[Evidence]


@check(
    "DFD107",
    "draft-attention-backend-fallback",
    Severity.WARNING,
    needs_any=("launch", "log"),
)
def draft_backend_fallback(facts: HostFacts) -> list[Finding]:
    """The draft attention backend is one DFlash does not support, so SGLang falls back.

    **What it finds.** The DFlash draft worker takes `--speculative-draft-attention-backend`,
    else the prefill backend: `--prefill-attention-backend`, else `--attention-backend`
    (in every release). It accepts `flashinfer`, `fa3`, `fa4` and `triton` (plus `ascend`
    from 0.5.13, `trtllm_mha` from 0.5.17, `intel_xpu` from 0.5.20); any other value is
    replaced by `flashinfer` with the warning `DFLASH draft worker ... Falling back to
    'flashinfer'.` From 0.5.17 `trtllm_mha` is kept only when the drafter's `layer_types`
    lists every layer as `sliding_attention` or its config says `is_causal: true`; otherwise
    it falls back (`DFLASH only enables 'trtllm_mha' when all layers use sliding attention
    or the draft is explicitly causal; ...`), to `fa4` on an SM100 GPU (B200, GB200, B300)
    from 0.5.23, to `flashinfer` elsewhere.

    **Why it hurts.** The server runs, but not as configured: the backend you tuned or
    benchmarked is not the one drafting, and CUDA-graph and memory settings sized for it
    may not fit the fallback.

    **Example.** SGLang 0.5.23 on H200, `--attention-backend fa3
    --prefill-attention-backend trtllm_mha`, a drafter with five sliding layers and one full
    layer: the draft takes the prefill backend, `trtllm_mha`, and runs `flashinfer`.

    **How to fix.** Set `--speculative-draft-attention-backend` to the backend SGLang falls
    back to (`flashinfer`, or `fa4` for a refused `trtllm_mha` on SM100 from 0.5.23), so
    the choice is explicit and the warning goes.

    **Fix safety.** Safe: it names the backend that release already falls back to (with
    the version or GPU unknown, `flashinfer`, which every release accepts); the target's
    backend is unchanged. Needs a relaunch.

    **Versions.** The draft backend is picked in `speculative/dflash_worker.py`
    0.5.11:101-104, 0.5.13:103-106 (through 0.5.13.post1, with `get_attention_backends`,
    `srt/server_args.py` 0.5.11:6738-6749), `speculative/dflash_worker_v2.py` 0.5.14:107-110
    and `arg_groups/speculative_hook.py` 0.5.15:267-274, 0.5.23:930-932 (with
    `attention_backends_of`, `arg_groups/overrides.py` 0.5.15:224-238). Accepted backends:
    `speculative/dflash_worker.py` 0.5.11:102, 0.5.13:104; `arg_groups/speculative_hook.py`
    0.5.15:263, 0.5.17:443-450, 0.5.19:549-556; `arg_groups/choices.py` 0.5.20:107-115,
    0.5.23:103-111. `trtllm_mha` always falls back through 0.5.16
    (`arg_groups/speculative_hook.py` 0.5.16:455-462); from 0.5.17 only for a drafter that
    is neither all sliding nor causal (`arg_groups/speculative_hook.py` 0.5.17:464-494,
    0.5.21:847-877, 0.5.23:945-978), to fa4 on SM100 from 0.5.23
    (`arg_groups/speculative_hook.py` 0.5.23:968-970).
    """
    require_dflash(facts)
    launch = facts.launch.value
    asked, evidence = _asked_backend(launch) if launch is not None else (None, [])
    log = facts.log.value
    logged = log.backend_fallbacks if log is not None else []
    evidence.extend(log_evidence(log, ln.line, ln.text) for ln in logged if log is not None)
    replaced = _replaced(asked, version_facts(facts), facts) if asked is not None else None
    if replaced is None and not logged:
        if asked is None and (log is None or log.dflash_init is None):
            raise Skip("no attention backend configured and no DFlash init line to confirm")
        return []
    fallback = _fallback(replaced, [ln.text for ln in logged], version_facts(facts))
    why = replaced.why if replaced is not None else "SGLang logged that it replaced it"
    evidence.extend(replaced.evidence if replaced is not None else [])
    what = f"Draft attention backend {asked!r}" if asked else "The draft attention backend"
    return [
        draft_backend_fallback.finding(
            title=f"{what} is not kept by DFlash's draft worker",
            message=f"{why}; the draft worker runs {fallback!r} instead.",
            evidence=evidence,
            fixes=[Fix(action="set_flag", flag=DRAFT_FLAG, value=fallback)],
        )
    ]


def _asked_backend(launch: LaunchArgs) -> tuple[str | None, list[Evidence]]:
    """The backend the draft worker is given: its own flag, else the prefill backend
    (--prefill-attention-backend, else --attention-backend), as every release resolves it."""
    if launch.draft_attention_backend:
        own = launch.draft_attention_backend
        return own, [flag_evidence(launch, DRAFT_FLAG, f"{DRAFT_FLAG} {own}")]
    for flag, asked in (
        ("--prefill-attention-backend", launch.prefill_attention_backend),
        ("--attention-backend", launch.attention_backend),
    ):
        if asked:
            text = f"{flag} {asked} (no draft backend set: the draft worker takes the prefill one)"
            return asked, [flag_evidence(launch, flag, text)]
    return None, []


def _replaced(asked: str, vf: VersionFacts | None, facts: HostFacts) -> Replaced | None:
    """What this release does with the backend the draft is given: None when it keeps it."""
    supported = vf.draft_backends if vf is not None else DFLASH_DRAFT_BACKENDS
    where = f" ({vf.draft_backend_resolver}, SGLang {vf.label})" if vf is not None else ""
    if asked not in supported:
        why = f"The DFlash draft worker accepts {', '.join(supported)}{where}"
        return Replaced(why, CUDA_FALLBACK, [])
    cfg = facts.drafter.value
    if asked != TRTLLM or cfg is None or vf is None or not vf.trtllm_draft_conditional:
        return None
    refusal = _trtllm_refusal(cfg)
    if refusal is None:
        return None
    why = (
        "The DFlash draft worker keeps 'trtllm_mha' only for a drafter whose layers are "
        f"all sliding_attention or whose config is causal; this one is neither{where}"
    )
    return Replaced(why, _trtllm_fallback(vf, facts), [refusal])


def _trtllm_fallback(vf: VersionFacts, facts: HostFacts) -> str:
    """flashinfer, or fa4 from 0.5.23 when every GPU is SM100 (`is_sm100_supported`)."""
    names = [g.name for g in facts.gpus.value or []]
    if vf.trtllm_sm100_fa4 and names and all(capability_major(n) == 10 for n in names):
        return "fa4"
    return CUDA_FALLBACK


def _fallback(replaced: Replaced | None, logged: list[str], vf: VersionFacts | None) -> str:
    """The backend the draft worker runs: the one SGLang logged falling back to, when it is
    a backend this release accepts, else the one the release's rules give."""
    supported = vf.draft_backends if vf is not None else DFLASH_DRAFT_BACKENDS
    for text in reversed(logged):
        m = _LOGGED_FALLBACK.search(text)
        if m is not None and m.group(1) in supported:
            return m.group(1)
    return replaced.fallback if replaced is not None else CUDA_FALLBACK


def _trtllm_refusal(cfg: DrafterConfig) -> Evidence | None:
    """Evidence that 0.5.17+ refuses trtllm_mha for this drafter, or None when it keeps it."""
    # Kept only when layer_types has one entry per layer, all sliding, or the draft is
    # causal (arg_groups/speculative_hook.py 0.5.17:476-494, 0.5.23:957-978).
    types = cfg.layer_types
    all_sliding = len(types) == cfg.num_hidden_layers and set(types) == {"sliding_attention"}
    if all_sliding or cfg.is_causal:
        return None
    return Evidence(
        kind="config",
        text=f"drafter layer types {sorted(set(types))} over {cfg.num_hidden_layers} layers, "
        f"is_causal {cfg.is_causal}: trtllm_mha needs every layer sliding or a causal draft",
        file=cfg.path,
        key="layer_types",
        line=cfg.key_lines.get("layer_types"),
    )
