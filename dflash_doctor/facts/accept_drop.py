"""Where a log's accept length dropped, and stayed down: one change point over the series.

Quarter means missed a collapse in the last 5 % of a run (the last quarter's mean stays
high when only its tail falls). Instead, the split of the decode series that best separates
a higher "before" from a lower "after" is found: the split maximising the line-weighted
difference of the two means times sqrt(w_before * w_after / w_total) (the CUSUM / two-sample
statistic, which does not favour splits near either end), then judged:

- before holds at least MIN_BEFORE_SHARE of the lines: a high start followed by the run's
  normal level is a warm-up, not a drop;
- after is sustained: at least MIN_AFTER_POINTS points, and its last points are as low as
  the after mean says (a dip that recovered is not a drop);
- after's mean is below DROP_RATIO of before's.

Each point stands for `lines` decode lines (exact in a log's first 64 MiB, an unbiased
sample beyond), so the means are over lines, not points.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dflash_doctor.facts.models import DecodePoint

DROP_RATIO = 0.8
MIN_BEFORE_SHARE = 0.25
MIN_AFTER_POINTS = 2
TAIL_POINTS = 3


@dataclass(frozen=True)
class AcceptDrop:
    """A sustained drop: the means either side, where it began, and how much of the run
    (in decode lines) lies after it."""

    before: float
    after: float
    began_at: DecodePoint
    after_share: float
    # The point before it: the drop began after its last line. (A point's timestamp is that
    # of the last decode line of its 256 KiB block, so the drop began by began_at's.)
    previous: DecodePoint


def _best_split(series: list[DecodePoint]) -> tuple[int, float, float] | None:
    weights = [float(p.lines) for p in series]
    sums = [float(p.accept_len or 0.0) * w for p, w in zip(series, weights, strict=True)]
    total_w, total_s = sum(weights), sum(sums)
    best: tuple[float, int, float, float] | None = None
    w_b = s_b = 0.0
    for k in range(1, len(series)):
        w_b += weights[k - 1]
        s_b += sums[k - 1]
        w_a = total_w - w_b
        if w_a <= 0 or w_b <= 0:
            continue
        mean_b, mean_a = s_b / w_b, (total_s - s_b) / w_a
        score = (mean_b - mean_a) * math.sqrt(w_b * w_a / total_w)
        if best is None or score > best[0]:
            best = (score, k, mean_b, mean_a)
    return None if best is None else best[1:]


def sustained_drop(series: list[DecodePoint]) -> AcceptDrop | None:
    """The drop of accept length that the series shows, if one is sustained to its end."""
    points = [p for p in series if p.accept_len is not None and p.lines > 0]
    split = _best_split(points)
    if split is None:
        return None
    k, before, after = split
    total = sum(p.lines for p in points)
    after_lines = sum(p.lines for p in points[k:])
    tail = points[-TAIL_POINTS:]
    tail_mean = sum((p.accept_len or 0.0) * p.lines for p in tail) / sum(p.lines for p in tail)
    if (
        before <= 0
        or (total - after_lines) < MIN_BEFORE_SHARE * total
        or len(points) - k < MIN_AFTER_POINTS
        or after >= DROP_RATIO * before
        or tail_mean >= DROP_RATIO * before
    ):
        return None
    return AcceptDrop(before, after, points[k], after_lines / total, points[k - 1])
