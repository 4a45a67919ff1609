"""Where speculation stops paying (pure): each cell with and without speculation.

`bench --baseline-port PORT` measures the same cells (same prompts, sizes, repeats) on a
server of the same model started without `--speculative-algorithm`. Repeat r sends the
same excerpts to both servers, so the repeats are paired: per cell the speedup is the mean
of the repeats' throughput ratios (output tokens per second with over without) with its
95 % t interval; an interval that holds 1.0 is "no change", one wholly below 1.0 is
"slower". The break-even accept length follows: a verify step that yields `a` tokens pays
when `a` exceeds the ratio of a verify step's time to a plain decode step's, which the pair
measures as `a / speedup`. The slower cells form the region where DFLASH loses.

The flag that bounds it: no SGLang release 0.5.11-0.5.23 turns speculation off per batch
size or context. `--speculative-adaptive` only tunes the draft steps, and only for EAGLE and
EAGLE3 (`srt/speculative/adaptive_spec_params.py` 0.5.11:20-24); DFLASH runs every batch
speculatively. The flag that bounds the batch is `--max-running-requests` (DFLASH resets it
to 48 when unset: `srt/server_args.py` 0.5.11:3430-3431,
`srt/arg_groups/speculative_hook.py` 0.5.23:438-443); beyond it requests queue.
"""

from __future__ import annotations

from dataclasses import dataclass

from dflash_doctor.facts.bench_stats import (
    Interval,
    cell_interval,
    interval,
    latency_interval,
    repeat_throughputs,
    throughput_interval,
)
from dflash_doctor.facts.models import BenchCell, BenchResult

BOUND_FLAG = "--max-running-requests"
# vLLM's: `--max-num-seqs` bounds the batch (vllm/engine/arg_utils.py 0.34.0:622); the draft
# length can follow the batch size (`num_speculative_tokens_per_batch_size` in
# --speculative-config, vllm/config/speculative.py 0.34.0:570-575).
VLLM_BOUND_FLAG = "--max-num-seqs"


@dataclass(frozen=True)
class Pair:
    """One cell measured with and without speculation."""

    spec: BenchCell
    base: BenchCell | None
    accept: Interval | None
    tps: Interval | None
    tps_base: Interval | None
    latency: Interval | None
    latency_base: Interval | None

    speedup: Interval | None  # paired by repeat: throughput with over without

    @property
    def break_even(self) -> float | None:
        """The accept length at which speculation matches the plain server's throughput."""
        if self.accept is None or self.speedup is None or self.speedup.mean <= 0:
            return None
        return self.accept.mean / self.speedup.mean

    @property
    def verdict(self) -> str:
        """One of slower, faster, no change (the interval holds 1.0) or unmeasured."""
        if self.speedup is None:
            return "unmeasured"
        if self.speedup.hi < 1.0:
            return "slower"
        return "faster" if self.speedup.lo > 1.0 else "no change"


def paired_speedup(spec: BenchCell, base: BenchCell | None) -> Interval | None:
    """The mean throughput ratio over the repeats measured on both servers, with its
    95 % interval."""
    if base is None:
        return None
    with_spec, without = repeat_throughputs(spec), repeat_throughputs(base)
    return interval([with_spec[r] / without[r] for r in sorted(with_spec) if r in without])


def _key(c: BenchCell) -> tuple[str, int, int, float]:
    return (c.prompts, c.context, c.concurrency, c.temperature)


def pairs(result: BenchResult) -> list[Pair]:
    """Every speculative cell with its baseline twin (None when not measured)."""
    base = {_key(c): c for c in (result.baseline.cells if result.baseline else [])}
    out = []
    for c in result.cells:
        b = base.get(_key(c))
        out.append(
            Pair(
                spec=c,
                base=b,
                accept=cell_interval(c),
                tps=throughput_interval(c),
                tps_base=throughput_interval(b) if b is not None else None,
                latency=latency_interval(c),
                latency_base=latency_interval(b) if b is not None else None,
                speedup=paired_speedup(c, b),
            )
        )
    return out


def _where(p: Pair) -> str:
    size = f"{p.spec.context}" if p.spec.context else "given"
    return f"{size}x{p.spec.concurrency}"


def _vllm_bound(paying: list[int], lowest: int) -> str:
    """The advice on vLLM's flags that bound the region."""
    schedule = (
        "num_speculative_tokens_per_batch_size in --speculative-config sets the draft "
        "length per batch size"
    )
    if paying:
        return (
            f"bound it: {VLLM_BOUND_FLAG} {paying[-1]} keeps batches where speculation paid "
            f"(requests beyond it wait); {schedule}"
        )
    return (
        f"slower already at concurrency {lowest}, so {VLLM_BOUND_FLAG} cannot bound it: raise "
        "the acceptance (see the findings) or serve these contexts without --speculative-config"
    )


def _bound(all_pairs: list[Pair], slower: list[Pair], engine: str = "sglang") -> str:
    """The advice on the flag that bounds the region."""
    lowest = min(p.spec.concurrency for p in slower)
    paying = sorted(
        {
            p.spec.concurrency
            for p in all_pairs
            if p.spec.concurrency < lowest and p.verdict != "unmeasured"
        }
    )
    if engine == "vllm":
        return _vllm_bound(paying, lowest)
    no_switch = (
        "no SGLang release turns DFLASH off per batch size or context "
        "(--speculative-adaptive is EAGLE/EAGLE3 only)"
    )
    if paying:
        return (
            f"bound it: {BOUND_FLAG} {paying[-1]} keeps batches where speculation paid "
            f"(requests beyond it queue); {no_switch}, so a load above {paying[-1]} "
            "concurrent requests is better served by a replica without --speculative-algorithm"
        )
    return (
        f"slower already at concurrency {lowest}, so {BOUND_FLAG} cannot bound it; {no_switch}: "
        "raise the accept length (see the findings) or serve these contexts without "
        "--speculative-algorithm"
    )


def verdict_lines(result: BenchResult) -> list[str]:
    """The break-even summary: where DFLASH is slower than no speculation, and the bound."""
    every = [p for p in pairs(result) if p.verdict != "unmeasured"]
    if not every:
        return ["baseline: no cell was measured both with and without speculation"]
    slower = [p for p in every if p.verdict == "slower"]
    evens = [p.break_even for p in every if p.break_even is not None]
    lines = [
        f"baseline: {len(slower)} of {len(every)} cells slower with DFLASH than without "
        f"speculation, {sum(p.verdict == 'faster' for p in every)} faster, "
        f"{sum(p.verdict == 'no change' for p in every)} no change (the 95 % interval of the "
        "paired speedup holds 1.0)"
    ]
    if evens:
        lines.append(
            f"break-even accept length {min(evens):.2f}..{max(evens):.2f} across cells "
            "(speculation pays where the measured accept length is above it)"
        )
    if not slower:
        return lines
    by_kind: dict[str, list[str]] = {}
    for p in slower:
        kind = f"{p.spec.prompts.split(' ', 1)[0]} T={p.spec.temperature:g}"
        by_kind.setdefault(kind, []).append(_where(p))
    region = "; ".join(f"{k}: {', '.join(v)}" for k, v in by_kind.items())
    lines.append(f"DFLASH is slower than no speculation at context x concurrency {region}")
    lines.append(_bound(every, slower, result.engine))
    return lines
