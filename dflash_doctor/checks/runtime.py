"""Checks on what the running server's log shows over time."""

from __future__ import annotations

from dflash_doctor.checks.base import Evidence, Finding, Severity, Skip, check
from dflash_doctor.checks.views import drafter, require_dflash, span_model, window_state
from dflash_doctor.facts.accept_drop import AcceptDrop, sustained_drop
from dflash_doctor.facts.bench_stats import COLLAPSE_ACCEPT_LENGTH
from dflash_doctor.facts.models import HostFacts, LogFacts

MIN_POINTS = 8


@check(
    "DFD109",
    "acceptance-length-falling",
    Severity.WARNING,
    needs=("log", "drafter"),
)
def acceptance_falling(facts: HostFacts) -> list[Finding]:
    """Speculative acceptance length drops over the server's run and stays down.

    **What it finds.** The `Decode batch, ... accept len: X` lines of the latest start: the
    point where the mean accept length dropped and stayed down (one change point over the
    series: the split that best separates a higher "before" from a lower "after", with at
    least a quarter of the run before it, so that a warm-up is not a drop; the after part
    sustained to the end of the log and below 80% of before). It fires when the drafter's
    sliding layers are served beyond their trained window (the served-span model of DFD103:
    SGLang 0.5.11-0.5.13 with no draft window or a larger one; where the SGLang behaviour is
    unknown, no draft window at all), and whatever the window when acceptance collapsed to
    the bonus token alone (accept length <= 1.05). The finding says when the drop began.

    **Why it hurts.** A gradual drop is the symptom of DFD103: as conversations grow past
    the window, the sliding layers attend over context they were not trained on and their
    proposals are accepted less; every lost accepted token is target compute spent for
    nothing. A collapse to 1.0 late in a run means speculation stopped working while the
    server kept serving: pure overhead. (Workload shifts also move acceptance: the finding
    gives the numbers and the time.)

    The series is over decode lines, not points: in a log's first 64 MiB every decode line
    is read; beyond, an unbiased sample (one 256 KiB block in 8, each line weighing 8,
    placed by a hash so that no periodic pattern of the log lines up with it).

    **Example.** Accept length 4.1 for the first 95% of a day's decode lines, 1.0 after: the
    quarter means (4.1 and 3.3) hid it; the change point reports 4.10 -> 1.00 from the
    timestamp of the first low sample, for the last 5% of the run.

    **How to fix.** Apply DFD103's fix (upgrade to 0.5.14+, or the draft window at the
    trained size); then watch the same lines again. For a collapse, look at what changed at
    the time it began (a restart of the draft path, a new workload) and run `bench`
    (DFD143). On 0.5.14+ without a window the drafter is served as trained and a gradual
    drop does not fire: look at the workload instead.

    **Fix safety.** Nothing is changed by this finding; DFD103's fix is the change.

    **Versions.** `Decode batch, ... accept len: {:.2f}, ...` in every release
    (srt/observability/scheduler_metrics_mixin.py 0.5.11:522-565,
    srt/managers/scheduler_components/metrics_reporter.py 0.5.23:963-1042); the served
    spans are DFD103's (`srt/models/dflash.py` 0.5.13:116-122, 0.5.14:44-66).
    """
    require_dflash(facts)
    log = facts.log.value
    assert log is not None
    series = [p for p in log.decode.series if p.accept_len is not None]
    if len(series) < MIN_POINTS:
        raise Skip(f"only {len(series)} accept-length samples in the log (need {MIN_POINTS})")
    drop = sustained_drop(series)
    collapsed = drop is not None and drop.after <= COLLAPSE_ACCEPT_LENGTH
    if not collapsed and not _window_suspected(facts):
        return []  # served as trained (or no sliding layers): a mild drift has another cause
    if drop is None:
        return []
    return [_drop_finding(log, drop, collapsed)]


def _window_suspected(facts: HostFacts) -> bool:
    """Whether the drafter's sliding layers are served beyond their trained window (DFD103's
    span model; where SGLang's behaviour is unknown, when no draft window is set)."""
    cfg = drafter(facts)
    if cfg.effective_sliding_window is None:
        raise Skip("drafter has no sliding window")
    try:
        wider: list[object] | None = list(span_model(facts, cfg).with_verdict("wider"))
    except Skip:
        wider = None  # behaviour unknown: fall back to "no draft window at all"
    return not (wider == [] or (wider is None and window_state(facts).window is not None))


def _drop_finding(log: LogFacts, drop: AcceptDrop, collapsed: bool) -> Finding:
    by = drop.began_at.timestamp or f"byte {drop.began_at.offset}"
    after = drop.previous.timestamp or f"byte {drop.previous.offset}"
    began = f"by {by}" if after == by else f"between {after} and {by}"
    share = 100 * drop.after_share
    cause = (
        "Acceptance at the bonus token alone: the drafter's proposals are all rejected "
        "(a wrong drafter, weights not loaded, or a broken draft path; see DFD143, which "
        "`bench` proves), whatever the window."
        if collapsed
        else "The drafter's sliding layers attend beyond their trained window (DFD103)."
    )
    return acceptance_falling.finding(
        title=f"Accept length fell from {drop.before:.2f} to {drop.after:.2f} {began}",
        message=(
            f"Mean accept length dropped from {drop.before:.2f} to {drop.after:.2f} {began} "
            f"and stayed down for the last {share:.0f}% of decode lines. {cause}"
        ),
        evidence=[
            Evidence(
                kind="log",
                text=f"accept len {drop.before:.2f} (from "
                f"{log.decode.first_timestamp or '-'}) to {drop.after:.2f} ({began}, until "
                f"{log.decode.last_timestamp or '-'}); {log.decode.count} decode lines, "
                f"{log.decode.parsed_lines} read",
                file=log.path,
            ),
        ],
        impact={
            "Accept length before the drop (tokens per step)": round(drop.before, 3),
            "Accept length after the drop (tokens per step)": round(drop.after, 3),
            "Drop began": began,
            "Decode lines after the drop (share of the run)": round(drop.after_share, 3),
        },
        fixes=[],
    )
