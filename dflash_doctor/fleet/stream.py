"""`report merge` without holding the fleet: each host counted, shown and dropped as it is read.

The default text report needs of each host only its counts (report.tally_host), its one line
(shown as it is read, by `on_host`) and its readings of the drift settings (a few short
strings): the reports themselves are not kept, so memory does not grow with their size.
DFD170 needs the whole fleet, so the drift findings are counted at the end, into the same
summary and exit code as merge_reports gives (tests/test_fleet.py compares the two).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from dflash_doctor.checks.base import Severity
from dflash_doctor.fleet.drift import (
    HostReadings,
    drift_of,
    drift_result,
    host_readings,
    strip_drift,
)
from dflash_doctor.fleet.merge import (
    FleetReport,
    ReportSource,
    fleet_code,
    iter_hosts,
    merge_notes,
)
from dflash_doctor.report import HostReport, Summary, conclude, tally_host, unread_inputs


def stream_merge(
    paths: list[Path],
    fail_on: Severity,
    on_host: Callable[[HostReport], None],
    *,
    name_from_file: bool = False,
    on_error: Callable[[str], None] | None = None,
    missing: list[str] | None = None,
) -> FleetReport:
    """merge_reports' summary, drift, notes and exit code, with `hosts` left empty: each
    host goes to `on_host` (without its DFD170 result) and is then dropped."""
    sources: list[ReportSource] = []
    errors: list[str] = []
    summary = Summary()
    gate = False
    input_errors: list[str] = []
    readings: list[HostReadings] = []
    for host in iter_hosts(
        paths, sources, errors, name_from_file=name_from_file, on_error=on_error, missing=missing
    ):
        host = strip_drift(host)
        summary.hosts += 1
        gate = tally_host(summary, host, fail_on) or gate
        input_errors.extend(unread_inputs([host], {}))
        readings.append(host_readings(host))
        on_host(host)
    judged = [name for name, mine in readings if mine is not None]
    table, findings = drift_of(readings) if judged else ([], {})
    if len(judged) >= 2:
        for name in judged:
            # Counted as merge_reports counts the result it appends to the host.
            drifted = HostReport(host=name, results=[drift_result(findings.get(name, []))])
            gate = tally_host(summary, drifted, fail_on) or gate
    notes = merge_notes(errors, summary.hosts, sources)
    notes, code = conclude(summary, gate, notes, input_errors)
    return FleetReport(
        fail_on=fail_on,
        hosts=[],
        summary=summary,
        notes=notes,
        exit_code=fleet_code(code, errors, summary.hosts),
        sources=sources,
        drift=table,
    )
