"""DFD151: silent slow paths the DFLASH server took, read from its log."""

from __future__ import annotations

from dflash_doctor.checks.base import Evidence, Finding, Fix, Severity, Skip, check
from dflash_doctor.checks.views import crashed_in_latest_start, log_evidence, require_dflash
from dflash_doctor.facts.log_patterns import LogPattern, of_kind, pattern
from dflash_doctor.facts.models import HostFacts, LogFacts

# Decode lines without a graph: above this share of the latest start's decode lines, the
# finding is a warning (below it, info: large batches beyond --cuda-graph-max-bs run
# eagerly by design).
GRAPH_OFF_WARN_SHARE = 0.10
MAX_RUNNING_DEFAULT = 48


@check("DFD151", "dflash-slow-paths", Severity.WARNING, needs=("log",))
def slow_paths(facts: HostFacts) -> list[Finding]:
    """The server runs DFLASH on a slower path than it could, and says so only in its log.

    **What it finds.** In the latest start: `Disable DFLASH draft cuda graph because ...`
    (0.5.14+: too little memory after the target, dp attention, or a device without
    graph capture), decode lines with `cuda graph: False`, `DFLASH fused KV
    initialization failed, falling back to sequential path` (0.5.11+), `flashinfer is
    unavailable; the DFlash2 selector falls back to torch.topk` (0.5.19+), `DFLASH
    non-greedy verification is unavailable on this build/device; falling back to greedy
    argmax verification.` (0.5.11+), and the DFLASH default `max_running_requests=48`
    (`Max running requests is reset to 48 ...`, every release, read from the
    `server_args=` dump that follows it when `--max-running-requests` was not given).

    **Why it hurts.** Each costs throughput or correctness without an error: eager draft
    steps, a sequential KV path, a torch.topk selector (SGLang's own text: it roughly
    halves end-to-end throughput), greedy outputs for sampled requests, or a benchmark
    above 48 concurrent requests that only queues.

    **Example.** `Disable DFLASH draft cuda graph because only 1.82 GB GPU memory is
    available after target backend initialization.` at line 212; 61% of decode lines with
    `cuda graph: False`.

    **How to fix.** Per finding: leave memory for the draft graph (lower
    `--mem-fraction-static` a little), fix the kernel install the message names (sgl-kernel,
    flashinfer), or set `--max-running-requests` to the concurrency the host must serve.

    **Fix safety.** `--max-running-requests` is a launch change `fix` can apply and roll
    back; raise it only as far as the KV budget allows (DFD131 shows the draft's share).
    The other fixes are manual installs.

    **Versions.** Texts, ranges and file:line per release in data/log_patterns.json (e.g.
    srt/speculative/dflash_worker_v2.py 0.5.14:306, srt/models/dflash.py 0.5.23:1160,
    srt/arg_groups/speculative_hook.py 0.5.23:445). Skipped when no log was read, and when
    the latest start crashed (DFD152): no server came up to be slow.
    """
    require_dflash(facts)
    log = facts.log.value
    assert log is not None
    crashed = [p.id for p in of_kind("crash") if crashed_in_latest_start(log, p.id)]
    if crashed:
        # No server came up to be slow: the crash is DFD152's (and DFD111's), not a cap.
        raise Skip(f"the latest start crashed ({', '.join(crashed)}: DFD152)")
    findings = [
        _event_finding(log, p) for p in of_kind("slow") if p.id in log.events and p.id != _MAX48
    ]
    graph = _graph_off(log)
    if graph is not None:
        findings.append(graph)
    max48 = _max_running_default(facts, log)
    if max48 is not None:
        findings.append(max48)
    return findings


_MAX48 = "slow_max_running_48"


def _event_finding(log: LogFacts, p: LogPattern) -> Finding:
    event = log.events[p.id]
    evidence = [log_evidence(log, event.first.line, event.first.text)]
    if event.count > 1:
        evidence.append(log_evidence(log, event.last.line, event.last.text))
    return slow_paths.finding(
        title=f"DFLASH slow path: {p.meaning}",
        message=(
            f"The log says `{event.first.text.split('] ', 1)[-1][:200]}` "
            f"({event.count} time(s), first at line {event.first.line}): {p.meaning}. "
            f"Texts of SGLang {p.releases()}."
        ),
        evidence=evidence,
        impact={"lines": event.count, "first_line": event.first.line},
        fixes=[Fix(action="manual", note=p.workaround)],
    )


def _graph_off(log: LogFacts) -> Finding | None:
    d = log.decode
    if not d.graph_off_count or not d.count:
        return None
    share = d.graph_off_count / d.count
    first, last = d.graph_off_first_line, d.graph_off_last_line
    return slow_paths.finding(
        severity=Severity.WARNING if share >= GRAPH_OFF_WARN_SHARE else Severity.INFO,
        title=f"{100 * share:.0f}% of decode batches ran without a CUDA graph",
        message=(
            f"{d.graph_off_count} of {d.count} `Decode batch` lines of the latest start say "
            f"`cuda graph: False` (lines {first}-{last}): those steps ran eagerly, "
            "usually because the batch exceeded --cuda-graph-max-bs or graphs are off."
        ),
        evidence=[
            Evidence(
                kind="log",
                text=f"{d.graph_off_count}/{d.count} decode lines with `cuda graph: False`",
                file=log.path,
                line=first,
            )
        ],
        impact={"graph_off_lines": d.graph_off_count, "decode_lines": d.count},
        fixes=[
            Fix(
                action="manual",
                note="raise --cuda-graph-max-bs to the running batch sizes "
                "(memory allowing), or find why graphs are disabled",
            )
        ],
    )


def _max_running_default(facts: HostFacts, log: LogFacts) -> Finding | None:
    launch = facts.launch.value
    dumped = log.server_args_fields.get("max_running_requests")
    if launch is None or launch.max_running_requests is not None:
        return None  # explicit, or we cannot tell it was SGLang's default
    if dumped is not None and dumped != str(MAX_RUNNING_DEFAULT):
        return None
    p = pattern(_MAX48)
    evidence = [Evidence(kind="flag", text="no --max-running-requests", file=launch.source)]
    if log.server_args is not None and dumped is not None:
        evidence.append(log_evidence(log, log.server_args.line, f"max_running_requests={dumped}"))
    return slow_paths.finding(
        title="DFLASH caps the server at 48 running requests",
        message=(
            "Without --max-running-requests, SGLang's DFLASH setup logs "
            f"`{p.formats[-1].format}` and serves at most 48 requests at once: "
            f"{p.meaning}. ({p.formats[-1].cite()})"
        ),
        evidence=evidence,
        impact={"max_running_requests": MAX_RUNNING_DEFAULT},
        fixes=[
            Fix(
                action="manual",
                flag="--max-running-requests",
                note=p.workaround,
            )
        ],
    )
