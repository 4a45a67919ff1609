"""The bench matrix (pure): which context lengths, concurrencies and temperatures to run.

Defaults: contexts 0.25x, 1x, 2x, 4x, 8x the smallest trained window of the
drafter, capped by what the server accepts; concurrency 1, 4, 16, capped by its maximum
running requests; greedy and the production temperature; a cap on output tokens.
Each cell runs for each kind of prompt (`code` and `prose` by default,
bench/prompts.py), repeated `repeats` times (3 by default) for an interval.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field

from dflash_doctor.bench.prompts import PromptSet, parse_prompts
from dflash_doctor.checks.views import context_length
from dflash_doctor.defaults import DEFAULT_MAX_NEW_TOKENS as DEFAULT_MAX_NEW_TOKENS
from dflash_doctor.defaults import DEFAULT_MAX_TOTAL_TOKENS as DEFAULT_MAX_TOTAL_TOKENS
from dflash_doctor.defaults import DEFAULT_SEED as DEFAULT_SEED
from dflash_doctor.errors import UsageError
from dflash_doctor.facts.models import HostFacts
from dflash_doctor.facts.vllm_launch import max_num_seqs

WINDOW_MULTIPLES = (0.25, 1.0, 2.0, 4.0, 8.0)
DEFAULT_CONCURRENCY = (1, 4, 16)
# Three repeats are the fewest that give a t interval of any use.
DEFAULT_REPEATS = 3
# A drafter without a sliding window has no window to straddle: centre on this length.
NO_WINDOW_BASE = 4096
# SGLang's SamplingParams default temperature when a client sends none
# (sampling/sampling_params.py:46 in 0.5.11).
SGLANG_DEFAULT_TEMPERATURE = 1.0


@dataclass(frozen=True)
class BenchOptions:
    """What the user asked of a bench: the sweep, its bounds, and whether to load a busy server."""

    contexts: list[int] | None = None
    concurrency: list[int] | None = None
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS
    temperature: float | None = None  # the production temperature (greedy always runs)
    seed: str = DEFAULT_SEED
    max_total_tokens: int = DEFAULT_MAX_TOTAL_TOKENS
    yes: bool = False  # load a server that serves traffic
    request_timeout: float = 600.0
    prompts: tuple[PromptSet, ...] = field(default_factory=lambda: tuple(parse_prompts(None)))
    repeats: int = DEFAULT_REPEATS
    # `--baseline-port`: the same cells on a server without speculation (bench/baseline.py).
    baseline_port: int | None = None


@dataclass
class Matrix:
    """The planned sweep: its axes, the vocabulary of its prompts, and the tokens it sends."""

    contexts: list[int]
    concurrency: list[int]
    temperatures: list[float]
    max_new_tokens: int
    vocab: int
    window: int | None
    tokens_sent: int
    notes: list[str] = field(default_factory=list)
    prompts: list[PromptSet] = field(default_factory=list)
    repeats: int = 1

    def cells(self) -> list[tuple[PromptSet, int, int, float]]:
        """Every (prompts, context, concurrency, temperature) cell, contexts varying fastest;
        a user's file is sent as given (context 0), once per concurrency and temperature."""
        return [
            (ps, ctx, conc, temp)
            for ps in self.prompts or [PromptSet("random", "random (content-free control)")]
            for temp in self.temperatures
            for conc in self.concurrency
            for ctx in (self.contexts if ps.sized else [0])
        ]


def _int(value: object) -> int | None:
    """A positive integer, else None (bools refused)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _prompt_cap(facts: HostFacts, max_new_tokens: int) -> int | None:
    """The longest prompt the server takes: its resolved context length and input limit."""
    runtime = facts.runtime.value
    limits = []
    if runtime is not None:
        limits += [x for x in (_int(runtime.arg("context_length")),) if x]
        limit = _int(runtime.arg("max_req_input_len"))
        if limit:
            limits.append(limit + 1)
    vllm = facts.vllm_launch.value
    if vllm is not None and vllm.max_model_len:
        limits.append(vllm.max_model_len)  # vLLM's --max-model-len: prompt plus output
    if not limits:
        ctx, _ = context_length(facts)
        if ctx:
            limits.append(ctx)
    return min(limits) - max_new_tokens - 1 if limits else None


def _contexts(
    facts: HostFacts, options: BenchOptions, window: int | None, notes: list[str]
) -> list[int]:
    """The context lengths: given, else multiples of the window; capped by the server."""
    if options.contexts:
        contexts = sorted(set(options.contexts))
    else:
        base = window or NO_WINDOW_BASE
        if window is None:
            notes.append(f"the drafter has no sliding window: contexts around {base} tokens")
        contexts = sorted({max(1, int(base * m)) for m in WINDOW_MULTIPLES})
    cap = _prompt_cap(facts, options.max_new_tokens)
    if cap is None:
        return contexts
    if cap < 1:
        raise UsageError(f"--max-new-tokens {options.max_new_tokens} leaves no room for a prompt")
    capped = sorted({min(c, cap) for c in contexts})
    if capped != contexts:
        notes.append(f"contexts capped at {cap} tokens (the server's context length)")
    return capped


def _concurrency(facts: HostFacts, options: BenchOptions, notes: list[str]) -> list[int]:
    """The concurrencies: given, else the defaults; capped by max running requests."""
    runtime = facts.runtime.value
    max_running = None
    if runtime is not None:
        states = [
            _int(s.get("effective_max_running_requests_per_dp")) for s in runtime.internal_states
        ]
        max_running = min([s for s in states if s] or [0]) or _int(
            runtime.arg("max_running_requests")
        )
    if max_running is None and facts.launch.value is not None:
        max_running = facts.launch.value.max_running_requests
    why = "the server's max running requests"
    vllm = facts.vllm_launch.value
    if max_running is None and vllm is not None:
        # vLLM runs at most max_num_seqs requests at once; more would queue, not run.
        max_running, why = max_num_seqs(vllm, facts.vllm_version.value)
    concurrency = sorted(set(options.concurrency or DEFAULT_CONCURRENCY))
    if not max_running:
        return concurrency
    capped = sorted({min(c, max_running) for c in concurrency})
    if capped != concurrency:
        notes.append(f"concurrency capped at {max_running} ({why})")
    return capped


def _temperatures(facts: HostFacts, options: BenchOptions) -> list[float]:
    """Greedy and the production temperature: given, else the server's preferred one."""
    runtime = facts.runtime.value
    production = options.temperature
    if production is None:
        production = SGLANG_DEFAULT_TEMPERATURE
        preferred = runtime.arg("preferred_sampling_params") if runtime is not None else None
        if isinstance(preferred, str) and '"temperature"' in preferred:
            with contextlib.suppress(ValueError, KeyError, TypeError):
                production = float(json.loads(preferred)["temperature"])
    return sorted({0.0, float(production)})


def _vocab(facts: HostFacts, needed: bool) -> int:
    """The vocabulary size random prompts are drawn from: the target's, else the drafter's
    (0 when unknown and no random prompts are sent)."""
    vocab = None
    if facts.target.value is not None:
        vocab = facts.target.value.vocab_size
    if vocab is None and facts.drafter.value is not None:
        vocab = facts.drafter.value.vocab_size
    if not vocab and needed:
        raise UsageError("vocabulary size unknown (no target or drafter config): give --target")
    return vocab or 0


def _tokens_sent(cells: list[tuple[PromptSet, int, int, float]], new: int, repeats: int) -> int:
    """The tokens a sweep sends at most (a user's prompt counted at 3.6 characters a token)."""
    total = 0
    for ps, ctx, conc, _ in cells:
        size = ctx or max(int(sum(map(len, ps.texts)) / max(len(ps.texts), 1) / 3.6), 1)
        total += conc * (size + new)
    return total * repeats


def plan_matrix(facts: HostFacts, options: BenchOptions) -> Matrix:
    """The sweep for a host from its facts and the options, bounded in tokens sent."""
    notes: list[str] = []
    drafter = facts.drafter.value
    window = drafter.effective_sliding_window if drafter is not None else None
    contexts = _contexts(facts, options, window, notes)
    concurrency = _concurrency(facts, options, notes)
    temperatures = _temperatures(facts, options)
    prompts = list(options.prompts)
    vocab = _vocab(facts, any(p.kind == "random" for p in prompts))
    matrix = Matrix(
        contexts=contexts,
        concurrency=concurrency,
        temperatures=temperatures,
        max_new_tokens=options.max_new_tokens,
        vocab=vocab,
        window=window,
        tokens_sent=0,
        notes=notes,
        prompts=prompts,
        repeats=max(1, options.repeats),
    )
    sent = _tokens_sent(matrix.cells(), options.max_new_tokens, matrix.repeats)
    if options.baseline_port is not None:
        sent *= 2  # the same cells again on the server without speculation
    if sent > options.max_total_tokens:
        raise UsageError(
            f"the bench would send {sent} tokens, over --max-total-tokens "
            f"{options.max_total_tokens}: give fewer --contexts, --concurrency, --prompts "
            "or --repeats"
        )
    matrix.tokens_sent = sent
    return matrix
