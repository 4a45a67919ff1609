"""The terminal report, with rich."""

from __future__ import annotations

from rich.console import Console, Group
from rich.markdown import Markdown
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from dflash_doctor.checks.base import Check, Evidence, Finding
from dflash_doctor.render.catalog import STYLE
from dflash_doctor.render.text import clean
from dflash_doctor.report import HostReport, Report


def _where(ev: Evidence) -> str:
    if ev.file is None:
        return clean(ev.kind)
    return clean(f"{ev.file}:{ev.line}" if ev.line is not None else ev.file)


def _host_line(host: HostReport) -> Text:
    text = Text(clean(host.host), style="bold")
    facts = host.facts
    if facts is None:
        return text
    parts = []
    if facts.sglang_version.value:
        parts.append(f"SGLang {facts.sglang_version.value}")
    if facts.gpus.value:
        names = {g.name for g in facts.gpus.value}
        parts.append(f"{len(facts.gpus.value)}x {', '.join(sorted(names))}")
    if facts.launch.value:
        parts.append(facts.launch.value.source)
    if parts:
        text.append(clean("  " + " | ".join(parts)), style="dim")
    return text


def _finding(f: Finding) -> Panel:
    body: list[Text | Table] = [Text(clean(f.message))]
    ev = Table.grid(padding=(0, 1))
    # Long paths fold inside their column rather than squeezing the evidence text out.
    ev.add_column(style="dim", overflow="fold", max_width=44)
    ev.add_column(ratio=1, overflow="fold")
    for e in f.evidence:
        ev.add_row(_where(e), clean(e.text))
    body.append(Text("Evidence", style="bold"))
    body.append(ev)
    if f.impact:
        body.append(Text("Impact", style="bold"))
        impact = Table.grid(padding=(0, 1))
        impact.add_column(style="dim")
        impact.add_column()
        for k, v in f.impact.items():
            impact.add_row(clean(k), clean(str(v)))
        body.append(impact)
    for fix in f.fixes:
        line = Text("Fix: ", style="bold green")
        line.append(clean(fix.describe()))
        if fix.note and fix.action != "manual":  # a manual fix's note is its description
            line.append(clean(f"  ({fix.note})"), style="dim")
        body.append(line)
    title = Text(f"{f.check_id} {f.severity.value}: ", style=STYLE[f.severity])
    title.append(clean(f.title), style="bold")
    return Panel(Group(*body), title=title, title_align="left", border_style=STYLE[f.severity])


def render_terminal(report: Report, console: Console) -> None:
    for host in report.hosts:
        console.rule(_host_line(host), align="left")
        if not host.reachable:
            console.print(Text(clean(f"unreachable: {host.error}"), style="bold red"))
            continue
        if host.error is not None:
            console.print(Text(clean(f"error: {host.error}"), style="bold red"))
        for err in host.fact_errors:
            console.print(Text(clean(f"could not read {err}"), style="yellow"))
        for finding in host.findings:
            if finding.suppressed is None:
                console.print(_finding(finding))
            else:
                console.print(
                    Text(
                        clean(f"{finding.check_id} {finding.title}: {finding.suppressed}"),
                        style="dim",
                    )
                )
        passed = [r.check_id for r in host.results if r.status == "passed"]
        if passed:
            console.print(Text("passed: " + ", ".join(passed), style="green"))
        for r in host.results:
            if r.status == "skipped":
                console.print(
                    Text(clean(f"skipped {r.check_id} {r.name}: {r.reason}"), style="dim")
                )
    for note in report.notes:
        console.print(Text(clean(note), style="yellow"))
    s = report.summary
    console.print(
        Text(
            f"{s.hosts} host(s), {s.unreachable} unreachable"
            + (f", {s.host_errors} with unreadable data" if s.host_errors else "")
            + f": {s.errors} error(s), "
            f"{s.warnings} warning(s), {s.infos} info, {s.suppressed} suppressed; "
            f"checks {s.passed} passed, {s.failed} failed, {s.skipped} skipped "
            f"(fail on {report.fail_on.value}: exit {report.exit_code})",
            style="bold",
        )
    )


def render_explain(check: Check, console: Console) -> None:
    console.print(Markdown(f"# {check.id} {check.name} ({check.severity.value})\n\n{check.doc}"))
