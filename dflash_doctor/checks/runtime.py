"""Checks on what the running server's log shows over time."""

from __future__ import annotations

from dflash_doctor.checks.base import Evidence, Finding, Severity, Skip, check
from dflash_doctor.checks.views import drafter, require_dflash, span_model, window_state
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
    while the drafter's sliding layers are served beyond their trained window (the served-span
    model of DFD103: SGLang 0.5.11-0.5.13 with no draft window or a larger one; where the
    SGLang behaviour is unknown, no draft window at all).

    **Why it hurts.** It is the symptom of DFD103: as conversations grow past the
    window, the sliding layers attend over context they were not trained on and their
    proposals are accepted less; every lost accepted token is target compute spent for
    nothing. (Workload shifts also move acceptance: the finding gives the numbers.)

    **How to fix.** Apply DFD103's fix (upgrade to 0.5.14+, or the draft window at the
    trained size); then watch the same lines again. On 0.5.14+ without a window the drafter
    is served as trained and this check does not fire: look at the workload instead.
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
                f"{100 * (1 - last / first):.0f}% below the first quarter's {first:.2f}, while "
                "the drafter's sliding layers attend beyond their trained window (DFD103)."
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
