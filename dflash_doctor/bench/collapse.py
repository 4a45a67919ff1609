"""Silent collapse (pure): acceptance at or near 1.0 in every cell, and its likely causes.

An accept length of 1.0 means every verify step kept only the target's own bonus token:
the drafter contributes nothing, yet the server answers correctly and only slower, so
nothing else says so. The causes are ranked by what the host's facts show (a fact that
names a cause ranks first); the ones no fact can show come last, marked unverified.
"""

from __future__ import annotations

from dflash_doctor.bench.stats import COLLAPSE_ACCEPT_LENGTH, cell_interval
from dflash_doctor.facts.models import BenchResult, HostFacts

SIMULATE_ENV = "SGLANG_SIMULATE_ACC_LEN"


def collapsed(result: BenchResult) -> str | None:
    """The verdict line when every measured cell's accept length is at or near 1.0."""
    measured = [(c, i) for c in result.cells if (i := cell_interval(c)) is not None]
    if not measured or any(i.mean > COLLAPSE_ACCEPT_LENGTH for _, i in measured):
        return None
    top = max(i.mean for _, i in measured)
    return (
        f"error: speculation has collapsed: the accept length is at most {top:.2f} in all "
        f"{len(measured)} measured cells (1.0 = no draft token ever accepted); the drafter "
        "costs time and gives nothing"
    )


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
            "set_dflash_layers_to_capture: the drafter gets no target hidden states"
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
    runtime = facts.runtime.value
    quant = runtime.arg("speculative_draft_model_quantization") if runtime is not None else None
    if isinstance(quant, str) and quant:
        # srt/server_args.py 0.5.11:1087-1088: the drafter inherits the target's quantization.
        found.append(
            f"the drafter runs quantized ({quant}): pass "
            "--speculative-draft-model-quantization unquant"
        )
    return found


def likely_causes(facts: HostFacts) -> list[str]:
    """The causes of a collapse, ranked: those the facts show, then those they cannot."""
    unverified = [
        "thinking mode on a drafter not trained on it (unverified: the chat template's "
        "enable_thinking is not visible from the host)",
        "a drafter trained for another target (unverified beyond DFD106)",
    ]
    shown = _shown(facts)
    return shown + unverified if shown else ["no fact of the host names a cause", *unverified]
