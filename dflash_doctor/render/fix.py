"""`fix` on the terminal: one host's FixReport, as the session used to print it."""

from __future__ import annotations

from rich.console import Console
from rich.syntax import Syntax
from rich.text import Text

from dflash_doctor.fix.report import FixReport, PlanView
from dflash_doctor.render.text import clean


def render_fix(report: FixReport, console: Console) -> None:
    """One host's report: its heading, its plan, then how it ended (render_fix_outcome)."""
    console.rule(Text(f"{report.host}  fix", style="bold"), align="left")
    if report.plan is not None and report.outcome not in ("unreachable", "no_rollback"):
        _plan(report.plan, console)
    render_fix_outcome(report, console)


def render_fix_outcome(report: FixReport, console: Console) -> None:
    """One host's report without its heading and plan: after the plan was shown (at the
    question)."""
    if report.outcome == "unreachable":
        console.print(Text(clean(f"unreachable: {report.error}"), style="bold red"))
        return
    if report.outcome == "no_rollback":
        console.print(Text("no launch file to roll back", style="red"))
        return
    if report.bench is not None:
        from dflash_doctor.render.bench import bench_pair

        pair = report.bench
        for part in bench_pair(pair.before, pair.after, pair.verdict):
            console.print(part)
    if report.outcome == "error":
        console.print(Text(clean(f"error: {report.error}"), style="bold red"))
        return
    if report.message is not None:
        _outcome(report, console)


def _plan(plan: PlanView, console: Console) -> None:
    if plan.diff:
        console.print(
            # Wrapped, never cropped: a long line's change (an inventory's one-line `launch:`)
            # is seen whole at any terminal width.
            Syntax(
                clean(plan.diff),
                "diff",
                theme="ansi_dark",
                background_color="default",
                word_wrap=True,
            )
        )
    elif plan.command is not None:
        console.print(Text(clean(plan.command_intro), style="bold"))
        console.print(clean(plan.command), markup=False, highlight=False)
        if plan.secret_variables:
            console.print(
                Text(
                    f"secrets are not shown: set {', '.join(plan.secret_variables)} to their "
                    "values before you run it",
                    style="yellow",
                )
            )
    else:
        console.print(Text("nothing to change", style="green"))
    for line in plan.manual:
        console.print(Text(clean(f"not automated: {line}"), style="yellow"))
    for note in plan.notes:
        console.print(Text(clean(note), style="dim"))
    if plan.stop is not None:
        console.print(Text(clean(f"stop: {plan.stop}"), style="dim"))
    if plan.relaunch is not None:
        console.print(Text(clean(f"relaunch: {plan.relaunch}"), style="dim"))


def _outcome(report: FixReport, console: Console) -> None:
    for step in report.steps:
        console.print(Text(clean(f"  {step}"), style="dim"))
    style = "green" if report.succeeded else "bold red"
    console.print(Text(clean(report.message or ""), style=style))
    if report.log_tail:
        console.print(Text("last server log lines:", style="bold"))
        for line in report.log_tail:
            console.print(clean(line), markup=False, highlight=False)
