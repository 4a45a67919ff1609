"""`dflash-doctor report ...`: commands over saved reports (registered in cli.py).

Imports only typer at module level: cli.py imports this for `--help`, which must stay fast
(tests/test_startup.py).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from dflash_doctor.defaults import Severity

if TYPE_CHECKING:
    from dflash_doctor.fleet.merge import FleetReport

report_app = typer.Typer(
    no_args_is_help=True,
    rich_markup_mode=None,
    add_completion=False,
    pretty_exceptions_show_locals=False,
    help="Work with saved JSON reports: merge a fleet's per-host reports into one.",
)


class MergeFormat(StrEnum):
    """The formats of `check` and `gate` (render/formats.py REPORT_FORMATS)."""

    text = "text"
    concise = "concise"
    github = "github"
    json = "json"
    sarif = "sarif"
    junit = "junit"


@report_app.callback()
def _report() -> None:
    """Work with saved JSON reports: merge a fleet's per-host reports into one."""


# `merge`'s options, declared here so the command reads as its list of flags.
_ReportsArg = Annotated[
    list[Path],
    typer.Argument(help="JSON reports of `check`/`gate --format json` (one per host)"),
]
_FormatOpt = Annotated[
    MergeFormat,
    typer.Option(
        "--format",
        help="text, concise (one line per finding), github (Actions annotations), json, "
        "sarif or junit",
    ),
]
_FailOnOpt = Annotated[
    Severity, typer.Option("--fail-on", help="lowest severity that fails (exit 1)")
]
_OutputOpt = Annotated[
    Path | None,
    typer.Option("--output", help="write the --format report here (JSON for text)"),
]
_NameFromFileOpt = Annotated[
    bool,
    typer.Option(
        "--name-from-file",
        help="name each single-host report's host after its file (HOST.json -> HOST)",
    ),
]
_MissingOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--missing",
        help="a host expected in the fleet without a report (reported unreachable, exit 3)",
    ),
]
_HostsOpt = Annotated[
    bool,
    typer.Option(
        "--hosts",
        help="text: every host in full (its findings, fixes, passes), not one line per host "
        "with findings",
    ),
]


@report_app.command("merge")
def merge(
    reports: _ReportsArg,
    fmt: _FormatOpt = MergeFormat.text,
    fail_on: _FailOnOpt = Severity.ERROR,
    output: _OutputOpt = None,
    name_from_file: _NameFromFileOpt = False,
    missing: _MissingOpt = None,
    hosts: _HostsOpt = False,
) -> None:
    """Merge per-host JSON reports into one fleet report with a drift view (DFD170).

    Exit codes as for `check`, over the merged hosts; 2 also when a file is not a readable
    report (one line names it, the others are merged). Text shows one line per host with
    findings, the drift table and the summary, reading one report at a time; `--hosts` shows
    every host in full.
    """
    from rich.console import Console

    from dflash_doctor.fleet.merge import merge_reports
    from dflash_doctor.render.text import clean

    err = Console(stderr=True)

    def say(line: str) -> None:
        err.print(clean(f"dflash-doctor: {line}"), markup=False, highlight=False, soft_wrap=True)

    if fmt is MergeFormat.text and output is None and not hosts:
        raise typer.Exit(_stream_text(reports, fail_on, name_from_file, say, missing))
    report = merge_reports(
        reports, fail_on, name_from_file=name_from_file, on_error=say, missing=missing
    )
    _emit_fleet(report, fmt, output)
    raise typer.Exit(report.exit_code)


def _emit_fleet(report: FleetReport, fmt: MergeFormat, output: Path | None) -> None:
    """Where the fleet report goes: the rule of `check` and `gate` (cli._emit)."""
    from rich.console import Console

    from dflash_doctor.errors import UsageError
    from dflash_doctor.fleet.render import render_fleet, render_fleet_terminal

    machine = render_fleet(report, fmt.value)
    if output is not None:
        try:
            output.write_text(machine or render_fleet(report, "json") or "", encoding="utf-8")
        except OSError as e:
            raise UsageError(f"{output}: cannot write report: {e.strerror}") from None
    if machine is None:
        render_fleet_terminal(report, Console())
    elif output is None:
        sys.stdout.write(machine)
    else:
        render_fleet_terminal(report, Console(stderr=True))


def _stream_text(
    reports: list[Path],
    fail_on: Severity,
    name_from_file: bool,
    say: Callable[[str], None],
    missing: list[str] | None,
) -> int:
    """The default text report, each host shown as read and dropped (fleet/stream.py)."""
    from rich.console import Console

    from dflash_doctor.fleet.render import render_fleet_close, render_host_line
    from dflash_doctor.fleet.stream import stream_merge

    console = Console()
    report = stream_merge(
        reports,
        fail_on,
        lambda host: render_host_line(host, console),
        name_from_file=name_from_file,
        on_error=say,
        missing=missing,
    )
    render_fleet_close(report, console)
    return report.exit_code
