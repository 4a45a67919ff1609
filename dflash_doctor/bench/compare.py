"""Compare two bench sweeps (before and after a fix): keep the fix, or not (pure).

Cells pair by (prompts, context, concurrency, temperature). Each cell's accept length has a
95 % interval over its repeats (facts/bench_stats.py); a pair whose intervals overlap, or whose
means differ by no more than `noise_floor`, is "no change", never a verdict. The fix is
kept unless a cell beyond the drafter's window (or any cell, without a window) got worse
by more than `threshold` (default 5 %) with intervals apart, or a cell inside the window
changed at all beyond its interval (a window fix must not touch what the drafter was
trained on). A cell that failed after the fix but not before fails the comparison.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from dflash_doctor.facts.bench_stats import Interval, cell_interval
from dflash_doctor.facts.models import BenchCell, BenchResult

DEFAULT_THRESHOLD = 0.05
DEFAULT_NOISE_FLOOR = 0.02
Key = tuple[str, int, int, float]


class CellChange(BaseModel):
    """One paired cell: its accept length before and after, with intervals, and the call."""

    prompts: str
    context: int
    concurrency: int
    temperature: float
    inside: bool
    before: float
    before_lo: float
    before_hi: float
    after: float
    after_lo: float
    after_hi: float
    change: str  # "better", "worse", "no change"

    def name(self) -> str:
        """The cell as a reader names it."""
        size = "as given" if self.context == 0 else f"{self.context} tokens"
        return f"{self.prompts} {size} x {self.concurrency} at T={self.temperature:g}"


class Verdict(BaseModel):
    """Keep the fix or not, why, and the cells it was judged on."""

    keep: bool
    reason: str
    window: int | None = None
    beyond_before: float | None = None
    beyond_after: float | None = None
    inside_before: float | None = None
    inside_after: float | None = None
    cells: list[CellChange] = Field(default_factory=list)


def _key(c: BenchCell) -> Key:
    """The cell a measurement pairs on."""
    return (c.prompts, c.context, c.concurrency, c.temperature)


def _pct(after: float, before: float) -> str:
    """The relative change as a signed percentage."""
    return f"{(after / before - 1) * 100:+.1f} %"


def _unpaired(
    old: dict[Key, BenchCell], new: dict[Key, BenchCell], window: int | None
) -> Verdict | None:
    """The verdict when the sweeps cannot be compared: a cell lost after the fix, or none
    measured before it."""
    broken = [k for k in old if k not in new or new[k].accept_length is None]
    if broken:
        prompts, ctx, conc, temp = broken[0]
        why = new[broken[0]].error if broken[0] in new else "not run"
        return Verdict(
            keep=False,
            window=window,
            reason=f"after the fix the cell {prompts} {ctx} tokens x {conc} at T={temp:g} "
            f"gave no accept length ({why})",
        )
    if not old:
        return Verdict(
            keep=False, window=window, reason="the bench before the fix measured nothing"
        )
    return None


def _change(before: Interval, after: Interval, noise_floor: float) -> str:
    """better, worse or no change: overlapping intervals never make a verdict."""
    if before.overlaps(after) or abs(after.mean / before.mean - 1) <= noise_floor:
        return "no change"
    return "better" if after.mean > before.mean else "worse"


def _pair(b: BenchCell, a: BenchCell, window: int | None, noise_floor: float) -> CellChange | None:
    """One paired cell judged, or None where either side has no accept length."""
    ib, ia = cell_interval(b), cell_interval(a)
    if ib is None or ia is None or not ib.mean:
        return None
    return CellChange(
        prompts=b.prompts,
        context=b.context,
        concurrency=b.concurrency,
        temperature=b.temperature,
        inside=window is not None and 0 < b.context <= window,
        before=ib.mean,
        before_lo=ib.lo,
        before_hi=ib.hi,
        after=ia.mean,
        after_lo=ia.lo,
        after_hi=ia.hi,
        change=_change(ib, ia, noise_floor),
    )


def _tally(cells: list[CellChange]) -> str:
    """How many cells got better, worse, or did not change."""
    words = ("better", "worse", "no change")
    return ", ".join(f"{sum(c.change == w for c in cells)} {w}" for w in words)


def _mean(values: list[float]) -> float | None:
    """The mean, or None for no values."""
    return sum(values) / len(values) if values else None


def _judge_beyond(cells: list[CellChange], threshold: float) -> tuple[bool, str]:
    """(kept, said) beyond the window: no cell may get worse by more than `threshold`."""
    if not cells:
        return True, ""
    before, after = _mean([c.before for c in cells]) or 0.0, _mean([c.after for c in cells]) or 0.0
    text = (
        f"beyond the window accept length {before:.2f} -> {after:.2f} ({_pct(after, before)}; "
        f"{_tally(cells)})"
    )
    bad = [c for c in cells if c.change == "worse" and c.after / c.before - 1 < -threshold]
    if bad:
        c = bad[0]
        return False, (
            f"{text}: {c.name()} worse by more than {threshold * 100:g} % "
            f"({c.before_lo:.2f}-{c.before_hi:.2f} -> {c.after_lo:.2f}-{c.after_hi:.2f})"
        )
    return True, text


def _judge_inside(cells: list[CellChange]) -> tuple[bool, str]:
    """(kept, said) inside the window: every cell unchanged within its interval."""
    if not cells:
        return True, ""
    before, after = _mean([c.before for c in cells]) or 0.0, _mean([c.after for c in cells]) or 0.0
    text = f"inside the window {before:.2f} -> {after:.2f} ({_pct(after, before)})"
    moved = [c for c in cells if c.change != "no change"]
    if moved:
        c = moved[0]
        return False, (
            f"{text}: changed beyond the noise in {len(moved)} cell(s), first {c.name()} "
            f"({c.before_lo:.2f}-{c.before_hi:.2f} -> {c.after_lo:.2f}-{c.after_hi:.2f})"
        )
    return True, f"{text}: within noise (intervals overlap in all {len(cells)} cells)"


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
    pairs = [p for k in old if (p := _pair(old[k], new[k], window, noise_floor)) is not None]
    inside = [p for p in pairs if p.inside]
    beyond = [p for p in pairs if not p.inside]
    beyond_ok, beyond_text = _judge_beyond(beyond, threshold)
    inside_ok, inside_text = _judge_inside(inside)
    return Verdict(
        keep=beyond_ok and inside_ok,
        reason="; ".join(t for t in (beyond_text, inside_text) if t),
        window=window,
        beyond_before=_mean([c.before for c in beyond]),
        beyond_after=_mean([c.after for c in beyond]),
        inside_before=_mean([c.before for c in inside]),
        inside_after=_mean([c.after for c in inside]),
        cells=pairs,
    )
