"""Compare two bench sweeps (before and after a fix): keep the fix, or not (pure).

Kept when the accept length beyond the drafter's window is not worse than before by more
than `threshold` (default 5 %), and inside the window is unchanged within noise: the larger
of `noise_floor` and twice the relative standard error of the mean, from the spread of the
per-request accept lengths inside each cell (cells differ by design). Cells are paired by
(context, concurrency, temperature); a cell that failed after the fix but not before fails
the comparison.
"""

from __future__ import annotations

import math

from pydantic import BaseModel

from dflash_doctor.facts.models import BenchCell, BenchResult

DEFAULT_THRESHOLD = 0.05
DEFAULT_NOISE_FLOOR = 0.02


class Verdict(BaseModel):
    """Keep the fix or not, why, and the means it was judged on."""

    keep: bool
    reason: str
    window: int | None = None
    beyond_before: float | None = None
    beyond_after: float | None = None
    inside_before: float | None = None
    inside_after: float | None = None
    inside_tolerance: float | None = None


def _key(c: BenchCell) -> tuple[int, int, float]:
    """The cell a measurement pairs on: (context, concurrency, temperature)."""
    return (c.context, c.concurrency, c.temperature)


def _mean(xs: list[float]) -> float | None:
    """The mean, or None for no values."""
    return sum(xs) / len(xs) if xs else None


def _rel_se(cells: list[BenchCell]) -> float:
    """Relative standard error of the mean accept length over cells, from the spread of the
    requests inside each cell (cells differ by design: their spread is not noise)."""
    means, variances = [], []
    for c in cells:
        values = c.accept_lengths
        if not values:
            continue
        mean = sum(values) / len(values)
        means.append(mean)
        if len(values) > 1:
            var = sum((v - mean) ** 2 for v in values) / (len(values) - 1)
            variances.append(var / len(values))
    if not means:
        return 0.0
    overall = sum(means) / len(means)
    return math.sqrt(sum(variances)) / len(means) / overall if overall else 0.0


def _pct(after: float, before: float) -> str:
    """The relative change as a signed percentage."""
    return f"{(after / before - 1) * 100:+.1f} %"


def _unpaired(
    old: dict[tuple[int, int, float], BenchCell],
    new: dict[tuple[int, int, float], BenchCell],
    window: int | None,
) -> Verdict | None:
    """The verdict when the sweeps cannot be compared: a cell lost after the fix, or none
    measured before it."""
    broken = [k for k in old if k not in new or new[k].accept_length is None]
    if broken:
        ctx, conc, temp = broken[0]
        return Verdict(
            keep=False,
            window=window,
            reason=f"after the fix the cell {ctx} tokens x {conc} at T={temp:g} gave no "
            f"accept length ({new[broken[0]].error if broken[0] in new else 'not run'})",
        )
    if not old:
        return Verdict(
            keep=False, window=window, reason="the bench before the fix measured nothing"
        )
    return None


def _judge_beyond(before: float | None, after: float | None, threshold: float) -> tuple[bool, str]:
    """(kept, said) for the accept length beyond the window: it may not drop by more than
    `threshold`."""
    if not before or after is None:
        return True, ""
    text = f"beyond the window accept length {before:.2f} -> {after:.2f} ({_pct(after, before)})"
    if after / before - 1 < -threshold:
        return False, f"{text}: worse by more than {threshold * 100:g} %"
    return True, text


def _judge_inside(before: float | None, after: float | None, tolerance: float) -> tuple[bool, str]:
    """(kept, said) for the accept length inside the window: unchanged within `tolerance`."""
    if not before or after is None:
        return True, ""
    text = f"inside the window {before:.2f} -> {after:.2f} ({_pct(after, before)})"
    if abs(after / before - 1) > tolerance:
        return False, f"{text}: changed beyond the noise (+-{tolerance * 100:.1f} %)"
    return True, f"{text}: within noise (+-{tolerance * 100:.1f} %)"


def compare(
    before: BenchResult,
    after: BenchResult,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    noise_floor: float = DEFAULT_NOISE_FLOOR,
) -> Verdict:
    """Judge the sweep after a fix against the one before it."""
    window = before.window
    old = {_key(c): c for c in before.cells if c.accept_length is not None}
    new = {_key(c): c for c in after.cells}
    unpaired = _unpaired(old, new, window)
    if unpaired is not None:
        return unpaired

    def side(inside: bool) -> tuple[list[BenchCell], list[BenchCell]]:
        keys = [k for k in old if (window is None or k[0] <= window) == inside]
        return [old[k] for k in keys], [new[k] for k in keys]

    def mean(cells: list[BenchCell]) -> float | None:
        return _mean([c.accept_length or 0.0 for c in cells])

    b_in, a_in = side(True)
    b_out, a_out = side(False)
    inside_before, inside_after = mean(b_in), mean(a_in)
    beyond_before, beyond_after = mean(b_out), mean(a_out)
    tolerance = None
    if inside_before and inside_after is not None:
        tolerance = max(noise_floor, 2 * math.hypot(_rel_se(b_in), _rel_se(a_in)))
    beyond_ok, beyond_text = _judge_beyond(beyond_before, beyond_after, threshold)
    inside_ok, inside_text = _judge_inside(inside_before, inside_after, tolerance or 0.0)
    return Verdict(
        keep=beyond_ok and inside_ok,
        reason="; ".join(t for t in (beyond_text, inside_text) if t),
        window=window,
        beyond_before=beyond_before,
        beyond_after=beyond_after,
        inside_before=inside_before,
        inside_after=inside_after,
        inside_tolerance=tolerance,
    )
