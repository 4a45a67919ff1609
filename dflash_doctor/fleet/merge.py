"""Per-host reports merged into one fleet report: the hosts, their drift, the exit code.

Host names: `check local` names its host `local` on every node, so a host called `local`
or `localhost` takes its file's name (`gpu-a1.json` -> `gpu-a1`: what the Ansible playbook
writes); `name_from_file` does that for every single-host report. A name already taken gets
`@FILE` (and `#N` after that): two hosts are never merged into one.

Exit code (report.py's rules over the merged hosts, then): 2 when a file could not be read
as a report, or none could; 3 (a host unreachable in its own report, or named missing)
still comes first.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from dflash_doctor.checks.base import Severity
from dflash_doctor.exit_codes import EXIT_UNREACHABLE, EXIT_USAGE
from dflash_doctor.fleet.drift import SettingDrift, drift_results
from dflash_doctor.fleet.load import LoadError, load_report
from dflash_doctor.report import HostReport, Report, build_report

LOCAL_NAMES = ("local", "localhost")
NO_REPORT = "no report: the runner could not reach the host or run the check there"


class ReportSource(BaseModel):
    """One file given to `report merge`: the hosts it added, or why it could not be read."""

    file: str
    hosts: list[str] = Field(default_factory=list)
    tool_version: str | None = None
    exit_code: int | None = None
    notes: list[str] = Field(default_factory=list)
    error: str | None = None


class FleetReport(Report):
    """A Report (same schema version, fields only added) with where it came from and drift."""

    kind: Literal["fleet"] = "fleet"
    sources: list[ReportSource] = Field(default_factory=list)
    drift: list[SettingDrift] = Field(default_factory=list)


def _unique(name: str, stem: str, taken: set[str]) -> str:
    candidate = name if name not in taken else f"{name}@{stem}"
    n = 2
    while candidate in taken:
        candidate = f"{name}@{stem}#{n}"
        n += 1
    taken.add(candidate)
    return candidate


def _renamed(host: HostReport, name: str) -> HostReport:
    """The host under `name`, its facts too."""
    facts = None if host.facts is None else host.facts.model_copy(update={"host": name})
    return host.model_copy(update={"host": name, "facts": facts})


def _named(
    host: HostReport, source: ReportSource, stem: str, taken: set[str], by_file: bool
) -> HostReport:
    """The host under its fleet name (the file's for `local` or `by_file`), noted in source."""
    own = stem if host.host in LOCAL_NAMES or by_file else host.host
    named = _renamed(host, _unique(own, stem, taken))
    source.hosts.append(named.host)
    return named


def merge_notes(errors: list[str], n_hosts: int, sources: list[ReportSource]) -> list[str]:
    """The fleet report's notes: each unreadable file, an empty merge, mixed tool versions."""
    notes = list(errors)
    if not n_hosts:
        notes.append("no report could be read: nothing was merged")
    versions = Counter(s.tool_version for s in sources if s.error is None)
    if len(versions) > 1:
        # Another version's catalog judged those hosts: a check may be missing, not passing.
        notes.append(
            "reports from different dflash-doctor versions: "
            + ", ".join(f"{v} ({n} file(s))" for v, n in sorted(versions.items(), key=str))
        )
    return notes


def fleet_code(code: int, errors: list[str], n_hosts: int) -> int:
    """The hosts' exit code, then 2 for an unreadable file or an empty merge (3 first)."""
    if (errors or not n_hosts) and code != EXIT_UNREACHABLE:
        return EXIT_USAGE
    return code


def iter_hosts(
    paths: list[Path],
    sources: list[ReportSource],
    errors: list[str],
    *,
    name_from_file: bool = False,
    on_error: Callable[[str], None] | None = None,
    missing: list[str] | None = None,
) -> Iterator[HostReport]:
    """The hosts of the files, one report read at a time, each named uniquely; each file's
    ReportSource goes to `sources` and each unreadable file's line to `errors` as met.
    `missing`: hosts the runner (Ansible, ...) expected but brought no report from: each is
    an unreachable host of the fleet, so a fleet report never leaves a host out silently."""
    taken: set[str] = set()
    for path in paths:
        try:
            report = load_report(path)
        except LoadError as e:
            sources.append(ReportSource(file=str(path), error=str(e)))
            errors.append(str(e))
            if on_error is not None:
                on_error(str(e))
            continue
        stem = path.name.removesuffix(".json") or path.name
        source = ReportSource(
            file=str(path),
            tool_version=report.tool_version,
            exit_code=report.exit_code,
            notes=report.notes,
        )
        sources.append(source)
        single = len(report.hosts) == 1
        hosts = report.hosts
        del report  # the report is not held while its hosts go
        while hosts:
            # Bound to no name here: the generator holds no host while the next is shown.
            yield _named(hosts.pop(0), source, stem, taken, name_from_file and single)
    for name in missing or []:
        if name not in taken:
            taken.add(name)
            yield HostReport(host=name, reachable=False, error=NO_REPORT)


def merge_reports(
    paths: list[Path],
    fail_on: Severity = Severity.ERROR,
    *,
    name_from_file: bool = False,
    on_error: Callable[[str], None] | None = None,
    missing: list[str] | None = None,
) -> FleetReport:
    """Every host of the files in one report, each with its DFD170 result (iter_hosts)."""
    sources: list[ReportSource] = []
    errors: list[str] = []
    hosts = list(
        iter_hosts(
            paths,
            sources,
            errors,
            name_from_file=name_from_file,
            on_error=on_error,
            missing=missing,
        )
    )
    hosts, drift = drift_results(hosts)
    notes = merge_notes(errors, len(hosts), sources)
    base = build_report(hosts, fail_on=fail_on, notes=notes)
    return FleetReport(
        fail_on=fail_on,
        hosts=base.hosts,
        summary=base.summary,
        notes=base.notes,
        exit_code=fleet_code(base.exit_code, errors, len(hosts)),
        sources=sources,
        drift=drift,
    )
