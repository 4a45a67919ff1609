"""One host's fix: gather, plan, show; apply or roll back when asked."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.syntax import Syntax
from rich.text import Text

from dflash_doctor.errors import DoctorError, FactError
from dflash_doctor.exit_codes import EXIT_FIX_FAILED, EXIT_OK, EXIT_UNREACHABLE, EXIT_USAGE
from dflash_doctor.facts.launch import parse_launch_file
from dflash_doctor.fix.apply import apply_plan, describe_relaunch, rollback
from dflash_doctor.fix.edits import edit_argv, edit_inventory_launch
from dflash_doctor.fix.plan import plan_fixes
from dflash_doctor.gather import Gatherer, gather
from dflash_doctor.hosts import HostSpec
from dflash_doctor.pipeline import open_transport
from dflash_doctor.redact import redact_argv, redact_block, redact_text, shell_with_placeholders
from dflash_doctor.render.text import clean
from dflash_doctor.runner import run_checks
from dflash_doctor.transport.local import LocalTransport
from dflash_doctor.transport.ssh import SSHOptions

if TYPE_CHECKING:
    from dflash_doctor.bench.matrix import BenchOptions


def fix_host(
    spec: HostSpec,
    ssh: SSHOptions,
    console: Console,
    *,
    apply: bool,
    roll_back: bool,
    stamp: str,
    health_timeout: float,
    bench: BenchOptions | None = None,
    bench_threshold: float = 0.05,
) -> int:
    console.rule(Text(f"{spec.name}  fix", style="bold"), align="left")
    try:
        transport = open_transport(spec, ssh)
    except DoctorError as e:
        console.print(Text(clean(f"unreachable: {e}"), style="bold red"))
        return EXIT_UNREACHABLE
    try:
        facts = gather(spec, transport)
        source = spec.launch_file or (
            facts.launch.value.source
            if facts.launch.value and facts.launch.value.kind in ("script", "systemd", "compose")
            else None
        )
        text = source_launch = None
        if source is not None:
            data = transport.read_file(spec.path(source), max_bytes=1 << 20)
            text = data.decode("utf-8")
            source_launch = parse_launch_file(
                data,
                source=source,
                path=source,
                service=spec.compose_service,
                read=Gatherer(spec, transport).read_host_file,
            )
        if roll_back:
            if source is None or source_launch is None:
                console.print(Text("no launch file to roll back", style="red"))
                return EXIT_USAGE
            out = rollback(spec, transport, source, facts, source_launch, health_timeout)
            return _report(console, out.status, out.message, out.steps, out.log_tail)
        results = run_checks(facts)
        plan = plan_fixes(
            spec.name,
            results,
            source=source,
            source_text=text,
            source_launch=source_launch,
            running=facts.launch.value,
        )
        writer, write_spec = transport, spec
        if spec.launch is not None and spec.inventory_file and plan.new_argv is not None:
            # The launch is the inventory's own `launch:` entry: edit that file, here, from
            # its unredacted text (the parsed launch hides secrets: never write those back).
            try:
                raw = (
                    shlex.split(spec.launch) if isinstance(spec.launch, str) else list(spec.launch)
                )
            except ValueError as e:
                raise FactError(f"{spec.inventory_file}: host {spec.name} launch: {e}") from None
            plan.new_argv = edit_argv(raw, plan.edits)
            plan.source = spec.inventory_file
            plan.old_text = Path(spec.inventory_file).read_text(encoding="utf-8")
            plan.new_text = edit_inventory_launch(plan.old_text, spec.name, plan.new_argv)
            writer = LocalTransport("local")
            write_spec = spec.model_copy(update={"offline": True, "root": "/"})
        # Secrets are hidden in what is shown (context lines too), never in what is written.
        diff = clean(redact_block(plan.diff()))
        if diff:
            console.print(Syntax(diff, "diff", theme="ansi_dark", background_color="default"))
        elif plan.new_argv and plan.changes:
            line, variables = shell_with_placeholders(redact_argv(plan.new_argv))
            console.print(Text("no launch file to edit: start the server with", style="bold"))
            console.print(clean(line), markup=False, highlight=False)
            if variables:
                console.print(
                    Text(
                        f"secrets are not shown: set {', '.join(variables)} to their values "
                        "before you run it",
                        style="yellow",
                    )
                )
        else:
            console.print(Text("nothing to change", style="green"))
        for line in plan.manual:
            console.print(Text(clean(f"not automated: {line}"), style="yellow"))
        for note in plan.notes:
            console.print(Text(clean(note), style="dim"))
        if plan.changes:
            console.print(
                Text(
                    clean(f"relaunch: {describe_relaunch(write_spec, plan.launch, source)}"),
                    style="dim",
                )
            )
        if not apply:
            return EXIT_OK
        step = None
        if bench is not None and plan.changes and not (spec.offline or spec.recorded):
            from dflash_doctor.fix.bench_step import BenchStep

            step = BenchStep(spec, transport, facts, bench, threshold=bench_threshold)
        out = apply_plan(
            write_spec,
            writer,
            plan,
            facts,
            stamp=stamp,
            health_timeout=health_timeout,
            bench=step,
        )
        if step is not None and step.before_result is not None:
            from dflash_doctor.render.bench import render_bench_pair

            render_bench_pair(step.before_result, step.after_result, step.verdict, console)
        return _report(console, out.status, out.message, out.steps, out.log_tail)
    except (DoctorError, UnicodeDecodeError) as e:
        console.print(Text(clean(f"error: {e}"), style="bold red"))
        return EXIT_USAGE
    finally:
        transport.close()


def _report(console: Console, status: str, message: str, steps: list[str], tail: list[str]) -> int:
    for step in steps:
        console.print(Text(clean(f"  {redact_text(step)}"), style="dim"))
    ok = status in ("unchanged", "written", "applied")
    console.print(Text(clean(message), style="green" if ok else "bold red"))
    if tail:
        console.print(Text("last server log lines:", style="bold"))
        for line in tail:
            console.print(clean(redact_text(line)), markup=False, highlight=False)
    return EXIT_OK if ok else EXIT_FIX_FAILED
