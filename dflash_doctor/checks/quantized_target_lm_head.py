"""DFD127: the target's lm_head is quantized, which DFLASH cannot draft with at this TP."""

from __future__ import annotations

from dflash_doctor.checks.base import Evidence, Finding, Fix, Severity, Unjudged, check
from dflash_doctor.checks.views import (
    flag_evidence,
    require_dflash,
    version_evidence,
    version_facts,
)
from dflash_doctor.facts.models import HostFacts
from dflash_doctor.sglang_versions import Version

# The quantized target lm_head, per version (the head has no dense fp16/bf16/fp32 weight).
# 0.5.11-0.5.13 speculative/dflash_worker.py:552-561 and 0.5.14-0.5.17
# dflash_worker_v2.py (0.5.14:1331-1333, 0.5.17:1493-1496) refuse it at any TP on the first
# speculative step; 0.5.18-0.5.23 dflash_worker_v2.py (0.5.18:840-845, 0.5.23:1578-1583)
# take it at tp=1 only.
QUANT_HEAD_ANY_TP_UNTIL: Version = (0, 5, 18)
QUANT_HEAD_V1 = (
    "DFLASH requires the target model to expose a vocab-parallel `lm_head` with `weight` and "
    "`shard_indices` attributes."
)
QUANT_HEAD_V2_SINCE: Version = (0, 5, 14)
QUANT_HEAD_OLD = "DFLASH requires the target model to expose `lm_head` with `weight`."
QUANT_HEAD_TP = (
    "DFLASH with a quantized target lm_head is only supported at tp=1, got tp_size={tp}."
)


def _quantized_head(facts: HostFacts) -> Evidence | None:
    """Evidence that the target's lm_head is quantized (a GGUF launch, or the config's
    `quantization_config.lm_head`), or None."""
    launch = facts.launch.value
    if launch is not None and (
        (launch.model_path or "").endswith(".gguf") or launch.quantization == "gguf"
    ):
        return flag_evidence(launch, "--model-path", f"GGUF target ({launch.model_path})")
    target = facts.target.value
    if target is not None and target.lm_head_quantized:
        return Evidence(
            kind="config",
            text=f"quantization_config.lm_head=true ({target.quant_method})",
            file=target.path,
            line=target.key_lines.get("lm_head"),
            key="quantization_config.lm_head",
        )
    return None


@check(
    "DFD127",
    "quantized-target-lm-head",
    Severity.ERROR,
    needs=("sglang_version",),
    needs_any=("target", "launch"),
)
def quantized_lm_head(facts: HostFacts) -> list[Finding]:
    """The target's lm_head is quantized, which DFLASH cannot draft with at this TP size.

    **What it finds.** The target's `lm_head` holds no dense fp16/bf16/fp32 weight: a
    GGUF target, or a `quantization_config` with `"lm_head": true` (GPTQ, AWQ, AutoRound,
    MoE-WNA16 read that key). DFLASH has no head of its own: it samples draft tokens with
    the target's.

    **Why it hurts.** The server starts and answers health checks, then the first
    speculative step raises: up to 0.5.17 at any TP (`DFLASH requires the target model to
    expose `lm_head` with `weight`.`); from 0.5.18 at TP above 1 (`DFLASH with a quantized
    target lm_head is only supported at tp=1, got tp_size=N.`).

    **Example.** A GPTQ target with `"lm_head": true` served at `--tp-size 2` on 0.5.20.

    **How to fix.** Use a checkpoint whose lm_head is not quantized; from 0.5.18, or
    serve at `--tp-size 1`.

    **Fix safety.** Manual: both change the model or its memory per GPU.

    **Versions.** Refused at any TP 0.5.11-0.5.17 (speculative/dflash_worker.py
    0.5.11:552-561; speculative/dflash_worker_v2.py 0.5.14:1331-1333, 0.5.17:1493-1496); at
    TP above 1 0.5.18-0.5.23 (speculative/dflash_worker_v2.py 0.5.18:840-845,
    0.5.23:1578-1583).
    """
    require_dflash(facts)
    head = _quantized_head(facts)
    if head is None:
        if facts.target.value is None:
            raise Unjudged(f"target config unavailable: {facts.target.error}")
        return []
    vf = version_facts(facts)
    if vf is None:
        raise Unjudged(f"SGLang version {facts.sglang_version.value!r} is not a version")
    launch = facts.launch.value
    tp = launch.tp_size if launch is not None else 1
    if vf.version >= QUANT_HEAD_ANY_TP_UNTIL and tp <= 1:
        return []
    if vf.version >= QUANT_HEAD_ANY_TP_UNTIL:
        refusal = QUANT_HEAD_TP.format(tp=tp)
    else:
        refusal = QUANT_HEAD_OLD if vf.version >= QUANT_HEAD_V2_SINCE else QUANT_HEAD_V1
    fixes = [Fix(action="manual", note="use a target checkpoint whose lm_head is not quantized")]
    if vf.version >= QUANT_HEAD_ANY_TP_UNTIL:
        fixes.append(Fix(action="manual", note="serve at --tp-size 1"))
    elif tp <= 1:
        fixes.append(Fix(action="upgrade_sglang", value="0.5.18"))
    else:
        fixes.append(Fix(action="manual", note="upgrade to SGLang 0.5.18+ and serve at tp 1"))
    evidence = [head, version_evidence(facts)]
    if launch is not None:
        evidence.append(flag_evidence(launch, "--tp-size", f"tp_size={tp}"))
    return [
        quantized_lm_head.finding(
            title=f"DFLASH cannot sample with a quantized target lm_head on SGLang {vf.label}",
            message=f"The first speculative step fails: `{refusal}`",
            evidence=evidence,
            fixes=fixes,
        )
    ]
