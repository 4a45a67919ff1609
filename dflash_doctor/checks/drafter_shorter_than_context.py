"""Checks that the drafter's trained positions cover the context the server serves."""

from __future__ import annotations

from dflash_doctor.checks.base import Evidence, Finding, Fix, Severity, Skip, Unjudged, check
from dflash_doctor.checks.views import (
    config_evidence,
    context_length,
    drafter,
    env_evidence,
    env_value,
    require_dflash,
)
from dflash_doctor.facts.environment import env_bool
from dflash_doctor.facts.models import HostFacts

ALLOW_ENV = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"
# srt/configs/model_config.py `_derive_context_length` (0.5.11:452-483, 0.5.23:1291-1331):
# the drafter's ModelConfig is built with the target's context_len (0.5.11-0.5.14
# speculative/dflash_worker.py:139 / dflash_worker_v2.py:145; 0.5.15 dflash_worker_v2.py:143;
# 0.5.16-0.5.23 speculative/draft_worker_common.py:90..100), and a larger one than the
# drafter's own raises unless the variable is true; then it logs this line (0.5.11:472,
# 0.5.23:1311) and overwrites the drafter's max_position_embeddings.
OVERRIDE_LOG = "Overriding the draft model's max_position_embeddings to {n}."
REFUSAL = (
    "Warning: Target model's context_length ({ctx}) is greater than the derived "
    "context_length ({drafter}). ... To allow overriding this maximum, set the env var "
    "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1"
)


@check(
    "DFD120",
    "drafter-shorter-than-context",
    Severity.ERROR,
    needs=("drafter",),
    needs_any=("launch", "log", "target"),
)
def drafter_shorter_than_context(facts: HostFacts) -> list[Finding]:
    """The drafter was trained for fewer positions than the context the server serves.

    **What it finds.** The context length the server serves (`--context-length`, the
    logged server args, else the target's `max_position_embeddings`) is larger than the
    drafter's own context length, which SGLang derives from the drafter's `config.json`
    exactly as for any model (`max_position_embeddings` or an earlier key of
    `max_sequence_length`, `seq_length`, `max_seq_len`, `model_max_length`, times the
    `rope_scaling` factor).

    **Why it hurts.** SGLang builds the draft model with the target's context length.
    Without `SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1` it refuses to start (`Warning:
    Target model's context_length (N) is greater than the derived context_length (M) ...
    set the env var SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1`). With it (the z-lab
    README sets it unconditionally) SGLang logs `Overriding the draft model's
    max_position_embeddings to N.` and the drafter proposes tokens at positions it never
    saw in training: acceptance falls on long requests while the server looks healthy.

    **Example.** Qwen3-8B served at `--context-length 131072` with a drafter whose
    `max_position_embeddings` is 40960 and the variable set: every request past 40960
    tokens is drafted out of distribution.

    **How to fix.** Serve a context the drafter covers (`--context-length M`), or use a
    drafter trained for the full context.

    **Fix safety.** Not applied by `fix`: lowering `--context-length` rejects requests
    longer than M, so it is the operator's call. The variable alone is never a fix; it
    only silences the refusal.

    **Versions.** Every release 0.5.11-0.5.23, by the same code: the draft gets the target's
    context length (speculative/dflash_worker.py 0.5.11:139-141,
    speculative/draft_worker_common.py 0.5.23:100), `_derive_context_length` refuses or,
    with the variable, overrides (`srt/configs/model_config.py` 0.5.11:452-483,
    0.5.23:1291-1331), and `get_context_length` reads the keys
    (`utils/hf_transformers/common.py` 0.5.11:365, 0.5.23:677).
    """
    require_dflash(facts)
    cfg = drafter(facts)
    served, served_evidence, overridden = _served_context(facts)
    if served is None or served_evidence is None:
        raise Unjudged("the served context length is unknown (no launch, log or target config)")
    if cfg.context_length is None:
        raise Skip(
            "the drafter's config.json sets no context length key; transformers' default "
            f"for model_type {cfg.model_type!r} applies and is not modelled"
        )
    trained = cfg.context_length
    if served <= trained:
        return []
    key = cfg.context_length_key or "max_position_embeddings"
    evidence: list[Evidence] = [
        config_evidence(
            cfg, key, f"drafter context length {trained} (SGLang derives it from {key})"
        ),
        served_evidence,
    ]
    known, value = env_value(facts, ALLOW_ENV)
    allowed = env_bool(value) is True
    if known:
        evidence.append(env_evidence(facts, ALLOW_ENV, value))
    if overridden is not None:
        known, allowed = True, True
    impact: dict[str, float | int | str] = {
        "served_context_tokens": served,
        "drafter_context_tokens": trained,
    }
    fixes = _context_fixes(trained)
    if known and not allowed:
        return [
            drafter_shorter_than_context.finding(
                title="SGLang refuses a drafter shorter than the served context",
                message=(
                    f"The server serves {served} tokens; the drafter covers {trained}. "
                    f"Without {ALLOW_ENV}=1 SGLang stops at startup: "
                    + REFUSAL.format(ctx=served, drafter=trained)
                ),
                evidence=evidence,
                impact=impact,
                fixes=fixes,
            )
        ]
    how = _how_served(overridden is not None, known, served)
    return [
        drafter_shorter_than_context.finding(
            severity=Severity.WARNING,
            title=f"Drafter trained for {trained} positions, server serves {served}",
            message=(
                f"{how}the drafter proposes tokens at positions {trained}-{served} that it "
                "never saw in training; acceptance falls on long requests."
            ),
            evidence=evidence,
            impact=impact,
            fixes=fixes,
        )
    ]


def _served_context(facts: HostFacts) -> tuple[int | None, Evidence | None, int | None]:
    """The context length served, what says so, and the drafter override the log shows."""
    served, served_evidence = context_length(facts)
    target = facts.target.value
    if (
        served_evidence is not None
        and served_evidence.kind == "config"
        and target is not None
        and target.context_length is not None
        and target.context_length != served
    ):
        # No --context-length: SGLang serves the target's derived length, rope scaling
        # included (get_context_length, as for the drafter).
        served = target.context_length
        served_evidence = served_evidence.model_copy(
            update={
                "text": f"target context length {served} as SGLang derives it "
                "(no --context-length: SGLang uses the model's maximum)"
            }
        )
    log = facts.log.value
    overridden = log.draft_max_position_override if log is not None else None
    if overridden is not None and log is not None:
        # The log proves it: SGLang overwrote the drafter's positions with the context it
        # serves, which it does only with the variable set (model_config.py 0.5.23:1303-1312).
        served = overridden
        served_evidence = Evidence(
            kind="log", text=OVERRIDE_LOG.format(n=overridden), file=log.path
        )
    return served, served_evidence, overridden


def _context_fixes(trained: int) -> list[Fix]:
    """The manual fix: serve what the drafter covers, or change drafter."""
    # Not automated: a shorter context rejects the long requests the server takes today.
    return [
        Fix(
            action="manual",
            note=f"serve --context-length {trained} (requests longer than that are rejected), "
            "or use a drafter trained for the served context length",
        )
    ]


def _how_served(overridden: bool, known: bool, served: int) -> str:
    """How SGLang gets past the refusal, as the finding's message opens."""
    if overridden:
        return f"SGLang logged `{OVERRIDE_LOG.format(n=served)}`: "
    if known:
        return f"{ALLOW_ENV} is set, so SGLang logs `{OVERRIDE_LOG.format(n=served)}` and "
    return f"Either SGLang refuses to start, or (with {ALLOW_ENV}=1) "
