"""Checks on the DFlash verify block size."""

from __future__ import annotations

from dflash_doctor.checks.base import Evidence, Finding, Fix, Severity, Skip, check
from dflash_doctor.checks.startup_refusals import require_starts
from dflash_doctor.checks.views import (
    config_evidence,
    drafter,
    flag_evidence,
    log_evidence,
    require_dflash,
)
from dflash_doctor.facts.models import HostFacts, LaunchArgs, LogFacts


@check(
    "DFD105",
    "block-size-mismatch",
    Severity.WARNING,
    needs=("drafter",),
    needs_any=("launch", "log"),
)
def block_size_mismatch(facts: HostFacts) -> list[Finding]:
    """The server's DFlash block size differs from the block size the drafter was trained with.

    **What it finds.** `--speculative-num-draft-tokens` (or its DFlash alias
    `--speculative-dflash-block-size`) differs from the drafter's `block_size`
    (`dflash_config.block_size`, else the top-level `block_size`). The two flags given with
    different values, and a block size of zero or less, are start-up refusals (DFD111),
    not judged here. SGLang logs `DFLASH block size mismatch: using
    speculative_num_draft_tokens=N but draft config block_size=M.` and carries on.

    **Why it hurts.** A block diffusion drafter denoises a fixed-size block. Verifying more
    tokens than it was trained to draft wastes target compute on positions it guesses
    poorly; fewer leaves accepted length on the table.

    A value of exactly `block_size - 1` is a recipe carried over from vLLM, whose
    `num_speculative_tokens` counts the proposals; SGLang's block counts the anchor too
    (slot 0 holds the last verified token, the other `block_size - 1` slots the mask
    token that the drafter fills in), so the finding says so.

    **Example.** A `block_size: 16` drafter served with `--speculative-num-draft-tokens
    15` because a vLLM config had `num_speculative_tokens: 15`.

    **How to fix.** Remove the flag and let SGLang infer the block size from the drafter's
    config, or set it to the drafter's `block_size`.

    **Fix safety.** Safe: it is the block the drafter was trained on; CUDA-graph memory
    grows with the block by a few tokens per request.

    **Versions.** Every release 0.5.11-0.5.23: the block layout (speculative/dflash_worker.py
    0.5.11:572-573, speculative/dflash_worker_v2.py 0.5.23:2553-2554) and the mismatch
    warning (speculative/dflash_worker.py 0.5.11:176, speculative/dflash_worker_v2.py
    0.5.23:519).
    """
    require_dflash(facts)
    cfg = drafter(facts)
    launch = facts.launch.value
    log = facts.log.value
    trained = cfg.block_size
    require_starts(facts)
    findings: list[Finding] = []
    if trained is None:
        raise Skip("drafter config declares no block_size")
    used, flag, evidence = _served_block(launch, log)
    if used is None or used == trained:
        return findings
    key = cfg.block_size_key or "block_size"
    evidence.insert(0, config_evidence(cfg, key, f"{key}={trained}"))
    message = (
        f"The server verifies blocks of {used} tokens; the drafter was trained with "
        f"block_size={trained}."
    )
    impact: dict[str, float | int | str] = {
        "server_block_size": used,
        "drafter_block_size": trained,
    }
    if used == trained - 1:
        # SGLang's block holds the anchor in slot 0 and block_size - 1 mask slots
        # (speculative/dflash_worker.py 0.5.11:572-573, dflash_worker_v2.py 0.5.23:2553-2554).
        message += (
            f" {used} = block_size - 1 is the vLLM recipe: vLLM's num_speculative_tokens "
            "counts the proposals, SGLang's --speculative-num-draft-tokens counts the whole "
            f"block including the anchor token, so the SGLang value is {trained}."
        )
        impact["ported_from"] = "vllm num_speculative_tokens"
    fix = (
        Fix(action="set_flag", flag=flag, value=str(trained))
        if flag is not None
        else Fix(action="set_flag", flag="--speculative-num-draft-tokens", value=str(trained))
    )
    findings.append(
        block_size_mismatch.finding(
            title=f"Block size {used} differs from the drafter's trained block_size {trained}",
            message=message,
            evidence=evidence,
            impact=impact,
            fixes=[fix],
        )
    )
    return findings


def _served_block(
    launch: LaunchArgs | None, log: LogFacts | None
) -> tuple[int | None, str | None, list[Evidence]]:
    """The block size served, the flag that set it, and what says so (the log wins)."""
    used: int | None = None
    evidence: list[Evidence] = []
    flag: str | None = None
    if launch is not None:
        for name, value in (
            ("--speculative-num-draft-tokens", launch.num_draft_tokens),
            ("--speculative-dflash-block-size", launch.dflash_block_size),
        ):
            if value is not None:
                used, flag = value, name
                evidence.append(flag_evidence(launch, name, f"{name} {value}"))
                break
    if log is not None and log.dflash_block_size is not None:
        used = log.dflash_block_size
        line = log.block_size_mismatch or log.dflash_init
        if line is not None:
            evidence.append(log_evidence(log, line.line, line.text))
    return used, flag, evidence
