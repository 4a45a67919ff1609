"""The terminal report, with rich."""

from __future__ import annotations

import re

from rich.console import Console, Group
from rich.padding import Padding
from rich.panel import Panel
from rich.text import Text

from dflash_doctor.checks.base import Check, Evidence, Finding
from dflash_doctor.checks.impact_labels import impact_label
from dflash_doctor.render.catalog import STYLE
from dflash_doctor.render.text import clean
from dflash_doctor.report import HostReport, Report, wanted_facts


def _where(ev: Evidence) -> str:
    """Where evidence was found: file:line, else its kind."""
    if ev.file is None:
        return clean(ev.kind)
    return clean(f"{ev.file}:{ev.line}" if ev.line is not None else ev.file)


def host_line(host: HostReport) -> Text:
    """The host name with its SGLang version, GPUs and launch source."""
    text = Text(clean(host.host), style="bold")
    facts = host.facts
    if facts is None:
        return text
    parts = []
    if facts.sglang_version.value:
        parts.append(f"SGLang {facts.sglang_version.value}")
    elif facts.vllm_version.value:
        parts.append(f"vLLM {facts.vllm_version.value}")
    if facts.gpus.value:
        names = {g.name for g in facts.gpus.value}
        parts.append(f"{len(facts.gpus.value)}x {', '.join(sorted(names))}")
    launch = facts.launch.value or facts.vllm_launch.value
    if launch and launch.source != host.host:
        # A gate names its host after the launch file: said once, not twice.
        parts.append(launch.source)
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


def _cause(host: HostReport, reason: str) -> str:
    """A skip's reason as its cause, said once: a fact that could not be read is named above
    (`could not read ...`), so its skips point there; the host's name (in the rule above)
    is left out, so one cause on many hosts folds into one line."""
    shown = {err.partition(": ")[2]: err.partition(": ")[0] for err in host.fact_errors}
    need, _, why = reason.partition(": ")
    if need.startswith("needs ") and why in shown:
        return f"{need} (could not read {shown[why]}, above)"
    return _unhosted(host.host, reason)


def _unhosted(name: str, text: str) -> str:
    """`text` without the host's name where it prefixes a reason or a path (`h: ...`,
    `h:/path`): the rule above names the host, said once."""
    for prefix in (f"{name}: ", f"{name}:"):
        text = text.replace(f": {prefix}", ": ").replace(f"({prefix}", "(")
    return text.removeprefix(f"{name}: ").removeprefix(f"{name}:")


def _skips(hosts: list[HostReport], unjudged: bool) -> dict[str, tuple[list[str], set[str]]]:
    """The skipped checks of one kind by cause: their ids (each once) and the hosts."""
    grouped: dict[str, tuple[list[str], set[str]]] = {}
    for host in hosts:
        for r in host.results:
            if r.status != "skipped" or wanted_facts(r) is not unjudged:
                continue
            ids, names = grouped.setdefault(_cause(host, r.reason or ""), ([], set()))
            if r.check_id not in ids:
                ids.append(r.check_id)
            names.add(host.host)
    return grouped


def _skip_lines(hosts: list[HostReport], unjudged: bool, console: Console) -> None:
    """One line per cause: `could not judge` (fails --fail-on-skip) or `not applicable here`."""
    kind, style = ("could not judge", "yellow") if unjudged else ("not applicable here", "dim")
    for cause, (ids, names) in _skips(hosts, unjudged).items():
        on = f" on {len(names)} hosts" if len(names) > 1 else ""
        _line(console, f"{kind} ({len(ids)}{on}): {', '.join(ids)}: {cause}", style)


def print_line(console: Console, text: str | Text, style: str = "") -> None:
    """One line wrapped at words to the width (_line)."""
    _line(console, text, style)


def _line(console: Console, text: str | Text, style: str = "") -> None:
    """One line wrapped at words to the width (CI logs are 80 columns), never inside a word:
    a path longer than the width stays whole on its own row; no row ends in spaces."""
    line = text if isinstance(text, Text) else Text(clean(text), style=style)
    for row in line.divide(_breaks(line.plain, console.width)):
        row.rstrip()
        console.print(row, soft_wrap=True)


def _breaks(plain: str, width: int) -> list[int]:
    """Where to start each new row: before the word that would pass `width` (rich folds a
    long word mid-way or crops it; a path must stay whole, to be copied)."""
    breaks: list[int] = []
    start = 0
    for word in re.finditer(r"\S+\s*", plain):
        if (
            word.start() > start
            and len(plain[start : word.start()] + word.group().rstrip()) > width
        ):
            breaks.append(word.start())
            start = word.start()
    return breaks


def render_terminal(report: Report, console: Console) -> None:
    """The report for a terminal: per host its findings, then the summary."""
    for host in report.hosts:
        # A rule's title is cut at the width; the host line below it wraps instead.
        console.rule(style="dim")
        _line(console, host_line(host))
        if not host.reachable:
            _line(console, f"unreachable: {host.error}", "bold red")
            continue
        _host_body(host, console)
    # Not applicable here: the same causes on every host of a gate, said once for all.
    _skip_lines(report.hosts, False, console)
    for note in report.notes:
        _line(console, note, "yellow")
    _line(console, summary_line(report), "bold")


def summary_line(report: Report) -> str:
    """The report's last line: hosts, findings by severity, checks, the exit code."""
    s = report.summary
    return (
        f"{s.hosts} host(s), {s.unreachable} unreachable"
        + (f", {s.host_errors} with unreadable data" if s.host_errors else "")
        + f": {s.errors} error(s), "
        f"{s.warnings} warning(s), {s.infos} info, {s.suppressed} suppressed; "
        f"checks {s.passed} passed, {s.failed} failed, {s.skipped} skipped"
        + (f", {s.unjudged} of them could not judge" if s.unjudged else "")
        + f" (fail on {report.fail_on.value}: exit {report.exit_code})"
    )


def _host_body(host: HostReport, console: Console) -> None:
    """A reached host's errors, findings, next step, passes and unjudged checks."""
    if host.error is not None:
        _line(console, f"error: {host.error}", "bold red")
    for err in host.fact_errors:
        fact, _, why = err.partition(": ")
        _line(console, f"could not read {fact}: {_unhosted(host.host, why)}", "yellow")
    for finding in host.findings:
        if finding.suppressed is None:
            console.print(_finding(finding))
        else:
            _line(console, f"{finding.check_id} {finding.title}: {finding.suppressed}", "dim")
    if host.pending_relaunch is not None:
        line = Text("Pending relaunch: ", style="bold yellow")
        line.append(clean(host.pending_relaunch))
        _line(console, line)
    if host.fix_command is not None:
        where = f"edits {host.fix_file}" if host.fix_file else "prints the new command line"
        line = Text("To fix: ", style="bold green")
        line.append(clean(host.fix_command))
        line.append(clean(f"  (backs up and {where}; without --apply: the diff only)"), style="dim")
        _line(console, line)
    passed = [r.check_id for r in host.results if r.status == "passed"]
    if passed:
        _line(console, "passed: " + ", ".join(passed), "green")
    _skip_lines([host], True, console)


def render_explain(check: Check, console: Console) -> None:
    """One check's documentation page."""
    # markdown-it and pygments come with rich.markdown: only `explain` pays for them.
    from rich.markdown import Markdown

    console.print(Markdown(f"# {check.id} {check.name} ({check.severity.value})\n\n{check.doc}"))
