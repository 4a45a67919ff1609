"""DFD143: silent collapse: the bench measured an accept length at or near 1.0 in every cell.

The verdict and the ranking of causes live here, pure, so that `bench`'s own report
(bench/run.py, `BenchResult.collapse`) and this check say the same thing.
"""

from __future__ import annotations

from dflash_doctor.checks.base import Evidence, Finding, Fix, Severity, Skip, check
from dflash_doctor.checks.thinking_drafter import known_drafter, thinking_on
from dflash_doctor.checks.views import require_dflash
from dflash_doctor.facts.bench_stats import COLLAPSE_ACCEPT_LENGTH, Interval, cell_interval
from dflash_doctor.facts.models import BenchCell, BenchResult, HostFacts

SIMULATE_ENV = "SGLANG_SIMULATE_ACC_LEN"
QUANT_FLAG = "--speculative-draft-model-quantization"
# Cells named one by one in the evidence; the rest are counted.
EVIDENCE_CELLS = 6


def _measured(result: BenchResult) -> list[tuple[BenchCell, Interval]]:
    return [(c, i) for c in result.cells if (i := cell_interval(c)) is not None]


def collapsed(result: BenchResult) -> str | None:
    """The verdict line when every measured cell's accept length is at or near 1.0."""
    measured = _measured(result)
    if not measured or any(i.mean > COLLAPSE_ACCEPT_LENGTH for _, i in measured):
        return None
    top = max(i.mean for _, i in measured)
    return (
        f"error: speculation has collapsed: the accept length is at most {top:.2f} in all "
        f"{len(measured)} measured cells (1.0 = no draft token ever accepted); the drafter "
        "costs time and gives nothing"
    )


def _drafter_quantization(facts: HostFacts) -> str | None:
    runtime = facts.runtime.value
    quant = runtime.arg("speculative_draft_model_quantization") if runtime is not None else None
    return quant if isinstance(quant, str) and quant else None


def _shown(facts: HostFacts) -> list[str]:
    """Causes a fact of the host shows, most likely first."""
    found = []
    env = facts.environ.value or {}
    if env.get(SIMULATE_ENV):
        found.append(
            f"{SIMULATE_ENV}={env[SIMULATE_ENV]} in the server's environment fakes "
            "the accept length (DFD121)"
        )
    hook = facts.capture_hook.value
    if hook is not None and not hook.implements:
        found.append(
            f"the installed SGLang gives {hook.architecture} no "
            "set_dflash_layers_to_capture: the drafter gets no target hidden states (DFD129)"
        )
    drafter, target = facts.drafter.value, facts.target.value
    vocab = target.vocab_size if target is not None else None
    if drafter is not None and (
        drafter.mask_token_id is None or (vocab is not None and drafter.mask_token_id >= vocab)
    ):
        found.append(
            f"the drafter's mask token ({drafter.mask_token_id}) has no embedding "
            "in the target's vocabulary (DFD128)"
        )
    quant = _drafter_quantization(facts)
    if quant:
        # srt/server_args.py 0.5.11:1087-1088: the drafter inherits the target's quantization.
        found.append(f"the drafter runs quantized ({quant}): pass {QUANT_FLAG} unquant")
    files = facts.drafter_files.value
    packed = files is not None and files.quantized_tensors > 0
    if drafter is not None and not drafter.nemotron_35_draft and (drafter.quantization or packed):
        found.append(
            "the drafter checkpoint is quantized: SGLang's DFlash loader skips its quantized "
            "tensors (DFD160)"
        )
    return found


def _thinking(facts: HostFacts) -> str | None:
    """Thinking mode on a drafter known to be trained without it (DFD171), where shown."""
    launch = facts.launch.value
    paths = [p for p in (launch.draft_model_path if launch else None,) if p]
    if facts.drafter.value is not None:
        paths.append(facts.drafter.value.path)
    row = known_drafter(paths)
    if row is None or launch is None:
        return None
    try:
        on, why = thinking_on(facts, row)
    except Skip:
        return None
    if not on:
        return None
    return f"thinking mode on {row['repo']}, trained without thinking traces: {why} (DFD171)"


def likely_causes(facts: HostFacts) -> list[str]:
    """The causes of a collapse, ranked: those the facts show, then those they cannot."""
    thinking = _thinking(facts)
    unverified = [
        "thinking mode on a drafter not trained on it (unverified: the chat template's "
        "enable_thinking is not visible from the host)",
        "a drafter trained for another target (unverified beyond DFD106)",
    ]
    if thinking is not None:
        unverified = unverified[1:]
    shown = [*_shown(facts), *([thinking] if thinking else [])]
    return shown + unverified if shown else ["no fact of the host names a cause", *unverified]


def _cell_text(cell: BenchCell, i: Interval) -> str:
    size = f"{cell.context} tokens" if cell.context else "as given"
    kind = cell.prompts.split(" ", 1)[0]
    return (
        f"accept length {i.mean:.2f} [{i.lo:.2f}, {i.hi:.2f}] ({kind}, {size} x "
        f"{cell.concurrency}, T={cell.temperature:g}, {i.n} samples)"
    )


@check("DFD143", "silent-collapse", Severity.ERROR)
def silent_collapse(facts: HostFacts) -> list[Finding]:
    """The bench measured an accept length at or near 1.0 in every cell: the drafter gives nothing.

    **What it finds.** With `check --bench`, every measured cell (each kind of prompt,
    context, concurrency and temperature, 3 repeats each) has a mean accept length of at
    most 1.05. SGLang's per-request `spec_accept_length` is completion tokens over verify
    steps and counts the target's own bonus token, so 1.0 means no draft token was ever
    accepted. The finding ranks the likely causes by what the host's facts show:
    `SGLANG_SIMULATE_ACC_LEN` in the server's environment, a target class without the
    capture hook, a mask token without an embedding, a quantized drafter, thinking mode on
    a drafter known to be trained without it (DFD171); then the causes no fact can show
    (thinking mode on other drafters, a drafter of another target).

    **Why it hurts.** The server still answers correctly, only slower: every step drafts a
    block, verifies it and keeps one token, so it pays the drafter and the wider verify
    for nothing. No error is logged and health checks pass; only the accept length says so.

    **Example.** A drafter loaded with the target's FP8 quantization, or a benchmark's
    `SGLANG_SIMULATE_ACC_LEN=1` left in the unit: `check local --bench` reports 1.00 at
    every context from 512 to 16k tokens, code and prose alike.

    **How to fix.** Fix the first cause the finding names (unset the variable; pass
    `--speculative-draft-model-quantization unquant`; serve a target class with the hook
    or another release; correct the drafter's `mask_token_id`), then bench again. If no
    fact names a cause, try the prompts without thinking mode and check the drafter was
    trained for this target.

    **Fix safety.** Each fix only lets the drafter contribute; outputs follow the target
    either way (verification is exact at the default thresholds). Until it is fixed,
    serving without `--speculative-algorithm` is faster than a collapsed drafter.

    **Versions.** All releases: `spec_accept_length` is `completion_tokens /
    spec_verify_ct` (`srt/managers/tokenizer_manager.py` 0.5.11:2103-2106,
    0.5.23:3165-3168). `SGLANG_SIMULATE_ACC_LEN` forces it from 0.5.17
    (`srt/speculative/dflash_worker_v2.py` 0.5.17:1810, 0.5.23:2268). The drafter inherits
    the target's quantization unless told `unquant` (`srt/server_args.py`
    0.5.11:1087-1090).
    """
    result = facts.bench.value
    if result is None:
        raise Skip(
            f"needs a bench: {facts.bench.error}" if facts.bench.error else "needs check --bench"
        )
    require_dflash(facts)
    verdict = collapsed(result)
    if verdict is None:
        return []
    measured = _measured(result)
    evidence = [Evidence(kind="derived", text=_cell_text(c, i)) for c, i in measured]
    if len(evidence) > EVIDENCE_CELLS:
        rest = len(evidence) - EVIDENCE_CELLS
        evidence = [
            *evidence[:EVIDENCE_CELLS],
            Evidence(kind="derived", text=f"and {rest} more cells like these"),
        ]
    top = round(max(i.mean for _, i in measured), 3)
    causes = likely_causes(facts)
    fixes = []
    if any(SIMULATE_ENV in c for c in causes[:1]):
        fixes.append(Fix(action="manual", note=f"unset {SIMULATE_ENV} in the server's environment"))
    if _drafter_quantization(facts):
        fixes.append(Fix(action="set_flag", flag=QUANT_FLAG, value="unquant"))
    return [
        silent_collapse.finding(
            title="speculation has collapsed: no draft token is accepted",
            message=verdict.removeprefix("error: ").capitalize()
            + ". Likely causes, most likely first: "
            + "; ".join(f"({n}) {c}" for n, c in enumerate(causes, 1))
            + ".",
            evidence=evidence,
            impact={"Highest mean accept length in the bench (tokens per step)": top},
            fixes=fixes,
        )
    ]
