"""One line per finding, in the manner of ruff's concise output, and GitHub annotations.

`--format concise`: `file:line: DFDnnn severity: title -> fix`, then the notes (input errors,
a derived version) and unreachable hosts one line each, then one summary line. `--format
github`: the same findings as GitHub Actions workflow commands (`::error file=F,line=L::...`),
which the Actions log turns into annotations on the pull request's files; the summary line
after them. GitHub's format is asked for by name, never guessed from the environment: a
renderer decides nothing, and a CI log that is not GitHub's stays readable.

A finding's place is SARIF's (render/sarif.py finding_place): the launch flag, else the
config key, else the log line, else the host's launch file; a host name that is not that file
follows in brackets. Suppressed findings (waived, baselined) are counted, not listed.
"""

from __future__ import annotations

import os
import re

from dflash_doctor.checks.base import Finding, Severity
from dflash_doctor.render.sarif import finding_place
from dflash_doctor.render.text import clean
from dflash_doctor.report import HostReport, Report

# Where a launch read from /proc/PID/cmdline says it came from (finders/launch.py).
PROCESS = re.compile(r"^process \d+$")
GITHUB_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def _path(path: str, root: str) -> str:
    """`path` relative to `root` where it lies under it (an editor opens it), else as is."""
    absolute, base = os.path.abspath(path), os.path.abspath(root)
    if os.path.commonpath([absolute, base]) == base and absolute != base:
        return os.path.relpath(absolute, base)
    return path


def _findings(report: Report) -> list[tuple[HostReport, Finding, str, int | None]]:
    """Every finding that gates or informs (not suppressed), with its file and line."""
    out = []
    for host in report.hosts:
        fallback = host.facts.launch.source if host.facts is not None else None
        for finding in host.findings:
            if finding.suppressed is None:
                file, line = finding_place(finding, fallback)
                if file is None or PROCESS.match(file):
                    file, line = host.host, None  # a launch read from a process is no file
                out.append((host, finding, file, line))
    return out


def _text(host: HostReport, finding: Finding, file: str) -> str:
    """`DFDnnn severity: title -> fix` and the host where it is not the file."""
    fixes = "; ".join(f.describe() for f in finding.fixes)
    text = f"{finding.title}" + (f" -> {fixes}" if fixes else "")
    if host.host != file:
        text += f" [{host.host}]"
    return clean(" ".join(text.split()))


def _lines_before_summary(report: Report) -> list[str]:
    """Unreachable hosts, hosts whose data could not be processed, then the notes."""
    lines = [clean(f"{h.host}: unreachable: {h.error}") for h in report.hosts if not h.reachable]
    lines += [
        clean(f"{h.host}: error: {h.error}")
        for h in report.hosts
        if h.reachable and h.error is not None
    ]
    return lines + [clean(note) for note in report.notes]


def concise_summary(report: Report) -> str:
    """The last line: findings by severity, hosts, what could not be judged, the exit code."""
    s = report.summary
    found = s.errors + s.warnings + s.infos
    parts = [
        f"Found {found} finding(s) ({s.errors} error(s), {s.warnings} warning(s), "
        f"{s.infos} info) on {s.hosts} host(s)"
    ]
    if s.suppressed:
        parts.append(f"{s.suppressed} suppressed")
    if s.unreachable:
        parts.append(f"{s.unreachable} unreachable")
    if s.unjudged:
        parts.append(f"{s.unjudged} check(s) could not judge")
    return "; ".join(parts) + f" (fail on {report.fail_on.value}: exit {report.exit_code})"


def render_concise(report: Report, root: str = ".") -> str:
    """`file:line: DFDnnn severity: title -> fix`, one line per finding, then the summary."""
    lines = []
    for host, finding, file, line in _findings(report):
        where = _path(file, root) + (f":{line}" if line else "")
        head = f"{where}: {finding.check_id} {finding.severity.value}: "
        lines.append(clean(head) + _text(host, finding, file))
    return "\n".join([*lines, *_lines_before_summary(report), concise_summary(report)]) + "\n"


def _data(text: str) -> str:
    """A workflow command's message, escaped as the runner unescapes it."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    """A workflow command's property value (`file=`, `title=`): `:` and `,` escaped too."""
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def render_github(report: Report, root: str = ".") -> str:
    """GitHub Actions annotations, one per finding; the notes as warnings; the summary."""
    lines = []
    for host, finding, file, line in _findings(report):
        props = [f"file={_property(clean(_path(file, root)))}"]
        if line:
            props.append(f"line={line}")
        props.append(f"title={_property(f'{finding.check_id} {finding.severity.value}')}")
        level = GITHUB_LEVEL[finding.severity]
        lines.append(f"::{level} {','.join(props)}::{_data(_text(host, finding, file))}")
    lines += [f"::warning::{_data(text)}" for text in _lines_before_summary(report)]
    return "\n".join([*lines, concise_summary(report)]) + "\n"
