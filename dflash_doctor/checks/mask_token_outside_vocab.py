"""DFD128: the drafter's mask token is not a token of the target's vocabulary."""

from __future__ import annotations

from dflash_doctor.checks.base import Finding, Fix, Severity, Skip, check
from dflash_doctor.checks.views import (
    config_evidence,
    drafter,
    require_dflash,
    target_evidence,
)
from dflash_doctor.facts.models import HostFacts

# speculative/dflash_worker.py 0.5.11:451-458 (0.5.14+ dflash_worker_v2.py, 0.5.23:1402-1408),
# raised from the worker's __init__ (0.5.11:183, 0.5.23:533): compared with the target
# ModelConfig's vocab_size (the text config's `vocab_size`).
MASK_REFUSAL = (
    "DFLASH mask_token_id is outside the target vocab size. mask_token_id={mid}, "
    "vocab_size={vocab}."
)


@check("DFD128", "mask-token-outside-vocab", Severity.ERROR, needs=("drafter", "target"))
def mask_token_outside_vocab(facts: HostFacts) -> list[Finding]:
    """The drafter's `dflash_config.mask_token_id` is not a token of the target's vocabulary.

    **What it finds.** `dflash_config.mask_token_id` is at or above the target's
    `vocab_size` (the text config's, as SGLang's ModelConfig reads it).

    **Why it hurts.** SGLang stops at startup with `DFLASH mask_token_id is outside the
    target vocab size. ... SGLang does not support resizing target embeddings for DFLASH
    yet.`: the drafter was built for a target with a larger (extended) vocabulary.

    **Example.** A drafter with `mask_token_id` 151669 served on a target whose
    `vocab_size` is 151643.

    **How to fix.** Use the drafter released for this target (its mask token must be one
    of the target's tokens), or the target checkpoint the drafter was trained on.

    **Fix safety.** Manual: it changes a model.

    **Versions.** Every release 0.5.11-0.5.23 refuses it at startup
    (speculative/dflash_worker.py 0.5.11:513-518; speculative/dflash_worker_v2.py
    0.5.23:1463-1468).
    """
    require_dflash(facts)
    cfg = drafter(facts)
    target = facts.target.value
    assert target is not None
    if cfg.mask_token_id is None:
        raise Skip(
            "the drafter sets no dflash_config.mask_token_id; SGLang resolves it from the "
            "target's tokenizer, which is not read"
        )
    if target.vocab_size is None:
        raise Skip("the target config declares no vocab_size")
    if cfg.mask_token_id < target.vocab_size:
        return []
    return [
        mask_token_outside_vocab.finding(
            title="Drafter's mask_token_id is outside the target's vocabulary",
            message="SGLang refuses to start: `"
            + MASK_REFUSAL.format(mid=cfg.mask_token_id, vocab=target.vocab_size)
            + "`",
            evidence=[
                config_evidence(cfg, "mask_token_id", f"mask_token_id={cfg.mask_token_id}"),
                target_evidence(
                    target,
                    "vocab_size",
                    f"target vocab_size={target.vocab_size}",
                ),
            ],
            fixes=[Fix(action="manual", note="use the drafter trained for this target model")],
        )
    ]
