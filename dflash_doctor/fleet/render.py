"""The fleet report's renderers: the per-host renderers of `check`/`gate`, plus drift."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from dflash_doctor.checks.base import Severity
from dflash_doctor.fleet.drift import FLEET_CHECKS
from dflash_doctor.fleet.merge import FleetReport
from dflash_doctor.render.formats import render_format
from dflash_doctor.render.terminal import host_line, print_line, render_terminal, summary_line
from dflash_doctor.render.text import clean
from dflash_doctor.report import HostReport

# A sha256 or a long path in a table cell: the start is what tells values apart.
CELL = 24


def _short(value: str) -> str:
    return value if len(value) <= CELL else value[: CELL - 1] + "\u2026"


def render_drift(report: FleetReport, console: Console) -> None:
    table = Table(title="Fleet drift", title_justify="left", show_lines=False)
    table.add_column("setting")
    table.add_column("fleet value")
    table.add_column("hosts that differ")
    table.add_column("unknown")
    drifted: set[str] = set()
    for row in report.drift:
        known = sum(len(h) for h in row.values.values())
        if row.majority is not None:
            fleet = f"{_short(row.majority)} ({len(row.values[row.majority])}/{known})"
        else:
            fleet = "split" if row.values else "-"
        differ = "; ".join(
            f"{', '.join(hosts)}: {_short(value)}"
            for value, hosts in row.values.items()
            if value != row.majority
        )
        drifted.update(row.differing)
        style = "yellow" if row.differing else ""
        table.add_row(
            clean(row.label),
            Text(clean(fleet)),
            Text(clean(differ or "none"), style=style),
            Text(clean(", ".join(row.unknown) or "-"), style="dim"),
        )
    console.print(table)
    settings = sum(1 for r in report.drift if r.differing)
    console.print(
        Text(
            f"drift: {settings} setting(s) differ on {len(drifted)} of "
            f"{report.summary.hosts} host(s) ({len(report.sources)} report file(s))",
            style="bold",
        )
    )


def render_fleet_terminal(report: FleetReport, console: Console) -> None:
    render_terminal(report, console)
    render_drift(report, console)


def render_host_line(host: HostReport, console: Console) -> None:
    """A host of the default text report: one line, and only for a host with something to
    say (unreachable, an error, a finding that is not waived); `--hosts` shows the rest."""
    shown = [f for f in host.findings if f.suppressed is None]
    if host.reachable and host.error is None and not shown:
        return
    line = host_line(host)
    if not host.reachable:
        line.append(clean(f": unreachable: {host.error}"), style="bold red")
    elif host.error is not None:
        line.append(clean(f": error: {host.error}"), style="bold red")
    if shown:
        counts = {s: sum(f.severity is s for f in shown) for s in Severity}
        line.append(": " + ", ".join(f"{n} {s.value}" for s, n in counts.items() if n) + ": ")
        line.append(clean(", ".join(dict.fromkeys(f.check_id for f in shown))))
    print_line(console, line)


def render_fleet_close(report: FleetReport, console: Console) -> None:
    """After the host lines: the drift table, the notes and the summary line."""
    console.rule(style="dim")
    render_drift(report, console)
    for note in report.notes:
        print_line(console, note, "yellow")
    print_line(console, summary_line(report), "bold")


def render_fleet(report: FleetReport, fmt: str, root: str = ".") -> str | None:
    """The fleet report in `fmt` (render/formats.py), the drift check DFD170 among SARIF's
    rules; None for text (render_fleet_terminal)."""
    return render_format(report, fmt, root, FLEET_CHECKS.values())
