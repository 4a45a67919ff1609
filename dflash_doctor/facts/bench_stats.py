"""Per-cell statistics of a bench (pure): weighted means and a 95 % interval over repeats.

The accept length of a request is `completion_tokens / spec_verify_ct` (SGLang's own
`meta_info["spec_accept_length"]`, managers/tokenizer_manager.py 0.5.11:2104, 0.5.23:3166).
A cell's token-weighted mean pools the tokens of all its requests (long answers count
more); its request-weighted mean averages the requests (each answer counts once). The
interval is Student's t over the repeats' token-weighted means (the repeats are the
independent samples: requests inside one repeat share the server's batch); with one
repeat, over the requests. Two cells whose intervals overlap are "no change".

It lives with the facts because bench, render and the silent-collapse check (DFD143) all
read a bench this way, and checks may import only facts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dflash_doctor.facts.models import BenchCell, BenchRequest

# Two-sided 95 % critical values of Student's t by degrees of freedom (1..30).
T95 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip
Z95 = 1.96
# At or below this, speculation accepts nothing but the bonus token: it has collapsed.
COLLAPSE_ACCEPT_LENGTH = 1.05


@dataclass(frozen=True)
class Interval:
    """A mean and its 95 % interval from `n` samples (lo == hi with one sample)."""

    mean: float
    lo: float
    hi: float
    n: int

    def overlaps(self, other: Interval) -> bool:
        """Whether the two intervals share a point: "no change" between them."""
        return self.lo <= other.hi and other.lo <= self.hi


def interval(values: list[float]) -> Interval | None:
    """The mean and its two-sided 95 % t interval; None for no values."""
    if not values:
        return None
    n = len(values)
    mean = sum(values) / n
    if n == 1:
        return Interval(mean, mean, mean, 1)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = (T95[n - 2] if n - 1 <= len(T95) else Z95) * sd / math.sqrt(n)
    return Interval(mean, mean - half, mean + half, n)


def _measured(rows: list[BenchRequest]) -> list[BenchRequest]:
    """The requests that finished with a verify count."""
    return [r for r in rows if r.error is None and r.completion_tokens and r.spec_verify_ct]


def token_weighted(rows: list[BenchRequest]) -> float | None:
    """Completion tokens over verify steps, pooled over the requests."""
    done = _measured(rows)
    if not done:
        return None
    return sum(r.completion_tokens or 0 for r in done) / sum(r.spec_verify_ct or 0 for r in done)


def request_weighted(rows: list[BenchRequest]) -> float | None:
    """The mean of the requests' own accept lengths."""
    values = [r.spec_accept_length for r in _measured(rows) if r.spec_accept_length is not None]
    return sum(values) / len(values) if values else None


def repeat_means(cell: BenchCell) -> list[float]:
    """The token-weighted accept length of each repeat of the cell; on vLLM each repeat's
    `1 + accepted / drafts` from its counter deltas (vllm/v1/spec_decode/metrics.py
    0.34.0:113-114), the repeats without drafts left out."""
    if cell.repeat_counters:
        return [d.mean_acceptance_length or 1.0 for d in cell.repeat_counters if d and d.drafts]
    out = []
    for rep in sorted({r.repeat for r in cell.requests}):
        value = token_weighted([r for r in cell.requests if r.repeat == rep])
        if value is not None:
            out.append(value)
    return out


def cell_interval(cell: BenchCell) -> Interval | None:
    """The cell's accept length with its 95 % interval: over repeats, else over requests."""
    means = repeat_means(cell)
    if len(means) >= 2 or cell.repeat_counters:
        return interval(means)
    return interval(cell.accept_lengths)


def histogram(cell: BenchCell) -> list[int]:
    """The cell's acceptance histogram, summed over its requests (empty where not sent)."""
    total: list[int] = []
    for r in cell.ok:
        for k, count in enumerate(r.accept_histogram or []):
            if k >= len(total):
                total.append(0)
            total[k] += count
    return total


def finish_share(cell: BenchCell, reason: str) -> float | None:
    """The share of the cell's requests that finished for `reason` ("stop", "length")."""
    told = [r.finish for r in cell.ok if r.finish]
    return sum(1 for f in told if f == reason) / len(told) if told else None


def repeat_throughputs(cell: BenchCell) -> dict[int, float]:
    """Output tokens per second of each measured repeat of the cell (all its requests
    together), by repeat."""
    out = {}
    for rep, wall in enumerate(cell.repeat_wall_s):
        done = sum(r.completion_tokens or 0 for r in cell.ok if r.repeat == rep)
        if wall > 0 and done:
            out[rep] = done / wall
    return out


def throughput_interval(cell: BenchCell) -> Interval | None:
    """The cell's output tokens per second with its 95 % interval over the repeats."""
    return interval(list(repeat_throughputs(cell).values()))


def latency_interval(cell: BenchCell) -> Interval | None:
    """The cell's request latency (seconds) with its 95 % interval: over the repeats'
    means, else over the requests."""
    means = []
    for rep in sorted({r.repeat for r in cell.ok}):
        lat = [r.latency_s for r in cell.ok if r.repeat == rep and r.latency_s is not None]
        if lat:
            means.append(sum(lat) / len(lat))
    if len(means) >= 2:
        return interval(means)
    return interval([r.latency_s for r in cell.ok if r.latency_s is not None])
