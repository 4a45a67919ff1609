"""Checks on what the running server's log shows over time."""

from __future__ import annotations

from dflash_doctor.checks.base import Evidence, Finding, Severity, Skip, check
from dflash_doctor.checks.views import drafter, require_dflash, span_model, window_state
from dflash_doctor.facts.models import DecodePoint, HostFacts

MIN_POINTS = 8
DROP_RATIO = 0.8


def quarter_means(series: list[DecodePoint]) -> tuple[float, float]:
    """Mean accept length of the first and of the last quarter of the decode LINES.

    Each point stands for `lines` decode lines (its mean is exact in a log's first 64 MiB,
    an unbiased estimate beyond); a point that straddles a quarter boundary counts with
    the share of its lines inside the quarter."""

    def head(points: list[DecodePoint], want: float) -> float:
        total, taken = 0.0, 0.0
        for p in points:
            take = min(float(p.lines), want - taken)
            if take <= 0:
                break
            total += (p.accept_len or 0.0) * take
            taken += take
        return total / taken if taken else 0.0

    lines = sum(p.lines for p in series)
    quarter = lines / 4
    return head(series, quarter), head(series[::-1], quarter)


@check(
    "DFD109",
    "acceptance-length-falling",
    Severity.WARNING,
    needs=("log", "drafter"),
)
def acceptance_falling(facts: HostFacts) -> list[Finding]:
    """Speculative acceptance length falls over the server's run, and the drafter is unwindowed.

    **What it finds.** The `Decode batch, ... accept len: X` lines of the latest start: the
    mean accept length of the last quarter of the run is below 80% of the first quarter's,
    while the drafter's sliding layers are served beyond their trained window (the served-span
    model of DFD103: SGLang 0.5.11-0.5.13 with no draft window or a larger one; where the
    SGLang behaviour is unknown, no draft window at all).

    **Why it hurts.** It is the symptom of DFD103: as conversations grow past the
    window, the sliding layers attend over context they were not trained on and their
    proposals are accepted less; every lost accepted token is target compute spent for
    nothing. (Workload shifts also move acceptance: the finding gives the numbers.)

    The quarters are taken over decode lines, not points: in a log's first 64 MiB every
    decode line is read; beyond, an unbiased sample (one 256 KiB block in 8, each line
    weighing 8, placed by a hash so that no periodic pattern of the log lines up with it).

    **Example.** Accept length 4.0 for the first 80% of a day's decode lines, 2.4 after:
    the last quarter's mean (2.7) is 32% below the first's (4.0).

    **How to fix.** Apply DFD103's fix (upgrade to 0.5.14+, or the draft window at the
    trained size); then watch the same lines again. On 0.5.14+ without a window the drafter
    is served as trained and this check does not fire: look at the workload instead.

    **Fix safety.** Nothing is changed by this finding; DFD103's fix is the change.

    **Versions.** `Decode batch, ... accept len: {:.2f}, ...` in every release
    (srt/observability/scheduler_metrics_mixin.py 0.5.11:522-565,
    srt/managers/scheduler_components/metrics_reporter.py 0.5.23:963-1042); the served
    spans are DFD103's (`srt/models/dflash.py` 0.5.13:116-122, 0.5.14:44-66).
    """
    require_dflash(facts)
    cfg = drafter(facts)
    log = facts.log.value
    assert log is not None
    if cfg.effective_sliding_window is None:
        raise Skip("drafter has no sliding window")
    series = [p for p in log.decode.series if p.accept_len is not None]
    if len(series) < MIN_POINTS:
        raise Skip(f"only {len(series)} accept-length samples in the log (need {MIN_POINTS})")
    try:
        wider: list[object] | None = list(span_model(facts, cfg).with_verdict("wider"))
    except Skip:
        wider = None  # behaviour unknown: fall back to "no draft window at all"
    if wider == [] or (wider is None and window_state(facts).window is not None):
        return []  # served as trained: a falling trend has another cause
    first, last = quarter_means(series)
    if first <= 0 or last >= DROP_RATIO * first:
        return []
    return [
        acceptance_falling.finding(
            title=f"Accept length fell from {first:.2f} to {last:.2f} over the run",
            message=(
                f"Mean accept length of the last quarter of decode samples is {last:.2f}, "
                f"{100 * (1 - last / first):.0f}% below the first quarter's {first:.2f}, while "
                "the drafter's sliding layers attend beyond their trained window (DFD103)."
            ),
            evidence=[
                Evidence(
                    kind="log",
                    text=f"accept len {first:.2f} (first quarter, from "
                    f"{log.decode.first_timestamp or series[0].timestamp}) to {last:.2f} "
                    f"(last quarter, until {log.decode.last_timestamp or series[-1].timestamp}); "
                    f"{log.decode.count} decode lines, {log.decode.parsed_lines} read",
                    file=log.path,
                ),
            ],
            impact={
                "accept_len_first_quarter": round(first, 3),
                "accept_len_last_quarter": round(last, 3),
                "decode_lines": sum(p.lines for p in series),
            },
            fixes=[],
        )
    ]
