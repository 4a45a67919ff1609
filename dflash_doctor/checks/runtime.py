"""Checks on what the running server's log shows over time."""

from __future__ import annotations

from dflash_doctor.checks.base import Evidence, Finding, Severity, Skip, check
from dflash_doctor.checks.views import drafter, require_dflash, window_state
from dflash_doctor.facts.models import HostFacts

MIN_POINTS = 8
DROP_RATIO = 0.8


@check(
    "DFD109",
    "acceptance-length-falling",
    Severity.WARNING,
    needs=("log", "drafter"),
)
def acceptance_falling(facts: HostFacts) -> list[Finding]:
    """Speculative acceptance length falls over the server's run, and the drafter is unwindowed.

    **What it finds.** The `Decode batch. ... accept len: X` lines of the latest start: the
    mean accept length of the last quarter of the run is below 80% of the first quarter's,
    while the drafter (trained with a sliding window) runs without a draft window.

    **Why it hurts.** It is the symptom of DFD101/DFD103: as conversations grow past the
    window, an unwindowed drafter attends over context it was not trained on and its
    proposals are accepted less; every lost accepted token is target compute spent for
    nothing. (Workload shifts also move acceptance: the finding gives the numbers.)

    **How to fix.** Fix DFD101 (set the draft window); then watch the same lines again.
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
    if window_state(facts).window is not None:
        return []
    quarter = max(1, len(series) // 4)
    first = sum(p.accept_len or 0 for p in series[:quarter]) / quarter
    last = sum(p.accept_len or 0 for p in series[-quarter:]) / quarter
    if first <= 0 or last >= DROP_RATIO * first:
        return []
    return [
        Finding(
            check_id="DFD109",
            severity=Severity.WARNING,
            title=f"Accept length fell from {first:.2f} to {last:.2f} over the run",
            message=(
                f"Mean accept length of the last quarter of decode samples is {last:.2f}, "
                f"{100 * (1 - last / first):.0f}% below the first quarter's {first:.2f}, with no "
                "draft window for a sliding-window drafter."
            ),
            evidence=[
                Evidence(
                    kind="log",
                    text=f"accept len {series[0].accept_len} at {series[0].timestamp}, "
                    f"{series[-1].accept_len} at {series[-1].timestamp} "
                    f"({log.decode.count} decode lines parsed)",
                    file=log.path,
                ),
            ],
            impact={
                "accept_len_first_quarter": round(first, 3),
                "accept_len_last_quarter": round(last, 3),
                "decode_samples": len(series),
            },
            fixes=[],
        )
    ]
