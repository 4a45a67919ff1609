"""The terminal report, with rich."""

from __future__ import annotations

from rich.console import Console, Group
from rich.markdown import Markdown
from rich.padding import Padding
from rich.panel import Panel
from rich.text import Text

from dflash_doctor.checks.base import Check, Evidence, Finding
from dflash_doctor.checks.impact_labels import impact_label
from dflash_doctor.render.catalog import STYLE
from dflash_doctor.render.text import clean
from dflash_doctor.report import HostReport, Report


def _where(ev: Evidence) -> str:
    """Where evidence was found: file:line, else its kind."""
    if ev.file is None:
        return clean(ev.kind)
    return clean(f"{ev.file}:{ev.line}" if ev.line is not None else ev.file)


def _host_line(host: HostReport) -> Text:
    """The host name with its SGLang version, GPUs and launch source."""
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
    """One finding as a panel: title, message, evidence, impact and fixes."""
    # The title is the body's first line, not the panel's border title: a border title is
    # cut at the terminal width (CI logs are 80 columns), a body line wraps at words.
    body: list[Text | Padding] = [Text(clean(f.title), style="bold"), Text(clean(f.message))]
    body.append(Text("Evidence", style="bold"))
    for e in f.evidence:
        # The place on its own line, the text indented below it: `file:line` is never
        # folded into a narrow column and broken mid-word.
        body.append(Text(_where(e), style="dim"))
        body.append(Padding(Text(clean(e.text)), (0, 0, 0, 2), expand=False))
    if f.impact:
        body.append(Text("Impact", style="bold"))
        for k, v in f.impact.items():
            row = Text(clean(f"{impact_label(k)}: "), style="dim")
            row.append(clean(str(v)))
            body.append(Padding(row, (0, 0, 0, 2), expand=False))
    for fix in f.fixes:
        line = Text("Fix: ", style="bold green")
        line.append(clean(fix.describe()))
        if fix.note and fix.action != "manual":  # a manual fix's note is its description
            line.append(clean(f"  ({fix.note})"), style="dim")
        body.append(line)
    title = Text(clean(f"{f.check_id} {f.severity.value}"), style=STYLE[f.severity])
    return Panel(Group(*body), title=title, title_align="left", border_style=STYLE[f.severity])


def _skips(host: HostReport) -> dict[str, list[str]]:
    """The skipped checks by reason, each reason said once: a fact that could not be read
    is named above (`could not read ...`), so its skips point there instead of repeating it."""
    shown = {err.partition(": ")[2]: err.partition(": ")[0] for err in host.fact_errors}
    grouped: dict[str, list[str]] = {}
    for r in host.results:
        if r.status != "skipped":
            continue
        reason = r.reason or ""
        need, _, why = reason.partition(": ")
        if need.startswith("needs ") and why in shown:
            reason = f"{need} (could not read {shown[why]}, above)"
        grouped.setdefault(reason, []).append(f"{r.check_id} {r.name}")
    return grouped


def render_terminal(report: Report, console: Console) -> None:
    """The report for a terminal: per host its findings, then the summary."""
    for host in report.hosts:
        # A rule's title is cut at the width; the host line below it wraps instead.
        console.rule(style="dim")
        console.print(_host_line(host))
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
        if host.pending_relaunch is not None:
            line = Text("Pending relaunch: ", style="bold yellow")
            line.append(clean(host.pending_relaunch))
            console.print(line)
        if host.fix_command is not None:
            where = f"edits {host.fix_file}" if host.fix_file else "prints the new command line"
            line = Text("To fix: ", style="bold green")
            line.append(clean(host.fix_command))  # a merged report's text: the host's
            line.append(
                clean(f"  (backs up and {where}; without --apply: the diff only)"), style="dim"
            )
            console.print(line)
        passed = [r.check_id for r in host.results if r.status == "passed"]
        if passed:
            console.print(Text(clean("passed: " + ", ".join(passed)), style="green"))
        for reason, checks in _skips(host).items():
            console.print(Text(clean(f"skipped {', '.join(checks)}: {reason}"), style="dim"))
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
    """One check's documentation page."""
    console.print(Markdown(f"# {check.id} {check.name} ({check.severity.value})\n\n{check.doc}"))
