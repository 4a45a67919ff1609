"""The `dflash-doctor` command line: it parses, calls, prints and exits.

Each command's options are declared once, as the fields of its options class
(commands/options.py); what a command does between parsing and printing lives in commands/.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from dflash_doctor import __version__
from dflash_doctor.commands.options import (
    BenchArgs,
    CheckArgs,
    FixArgs,
    Format,
    GateArgs,
    ProbeArgs,
    command_signature,
)
from dflash_doctor.errors import DoctorError, HostUnreachable, UsageError, one_line
from dflash_doctor.exit_codes import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
)
from dflash_doctor.fleet.cli import report_app
from dflash_doctor.render.text import clean

# Start-up stays near `python -c pass` (bench/startup.py): what a command needs is imported
# inside it, so `--help` and `checks` never load paramiko, torch, matplotlib or pydantic
# models they do not use (tests/test_startup.py pins it).
if TYPE_CHECKING:
    from _typeshed import DataclassInstance
    from rich.console import Console

    from dflash_doctor.bench.matrix import BenchOptions
    from dflash_doctor.commands.fix import FixRun
    from dflash_doctor.facts.models import BenchResult
    from dflash_doctor.fix.report import FixReport
    from dflash_doctor.hosts import HostSpec
    from dflash_doctor.probes.host import ProbeOptions
    from dflash_doctor.report import Report
    from dflash_doctor.transport.ssh_options import SSHOptions


app = typer.Typer(
    no_args_is_help=True,
    # Plain click help and errors: typer's rich formatting imports markdown and pygments,
    # which would double the start-up of `--help` (bench/startup.py).
    rich_markup_mode=None,
    add_completion=False,
    # Locals in a traceback could hold secrets read from a host.
    pretty_exceptions_show_locals=False,
    help="Find, prove and fix DFlash speculative-decoding misconfigurations on SGLang hosts.",
)
# `report merge`: fleets through the tools operators already use (dflash_doctor/fleet/).
app.add_typer(report_app, name="report")

Args = TypeVar("Args", bound="DataclassInstance")


def _command(
    options: type[Args], name: str | None = None
) -> Callable[[Callable[[Args], None]], Callable[[Args], None]]:
    """Register `body` as a command whose parameters are the fields of `options`: typer
    parses the command line into them, and `body` receives the one frozen value."""

    def register(body: Callable[[Args], None]) -> Callable[[Args], None]:
        def parsed(**values: Any) -> None:
            body(options(**values))

        signature = command_signature(options)
        parsed.__signature__ = signature  # type: ignore[attr-defined]
        parsed.__annotations__ = {p.name: p.annotation for p in signature.parameters.values()}
        parsed.__name__, parsed.__doc__ = body.__name__, body.__doc__
        app.command(name)(parsed)
        return body

    return register


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"dflash-doctor {__version__}")
        raise typer.Exit(0)


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_show_version,
            is_eager=True,
            help="print the version and exit",
        ),
    ] = False,
) -> None:
    """Find, prove and fix DFlash speculative-decoding misconfigurations on SGLang hosts."""


def _emit(report: Report, machine: str | None, output: Path | None) -> None:
    """Where `check` and `gate` put their report, one rule for both.

    `--output FILE` writes the `--format` report (JSON for text); stdout carries that report
    when there is no `--output` (the terminal report for text); with `--output` and a machine
    format the terminal report goes to stderr, so stdout stays empty for pipes.
    """
    if output is not None:
        from dflash_doctor.render.json_report import render_json

        try:
            output.write_text(machine or render_json(report), encoding="utf-8")
        except OSError as e:
            raise UsageError(f"{output}: cannot write report: {e.strerror}") from None
    if machine is not None and output is None:
        sys.stdout.write(machine)
        return
    # The terminal report alone loads rich's console: a machine format on stdout never does.
    from rich.console import Console

    from dflash_doctor.render.terminal import render_terminal

    render_terminal(report, Console(stderr=machine is not None))


@_command(CheckArgs)
def check(args: CheckArgs) -> None:
    """Gather facts from hosts, run the check catalog, report findings with evidence and fixes."""
    from dflash_doctor.commands.check import check_report, check_reports, with_next_steps
    from dflash_doctor.commands.hosts import check_specs
    from dflash_doctor.commands.inputs import selection
    from dflash_doctor.render.formats import render_format
    from dflash_doctor.render.progress import host_progress

    chosen = selection(args.select)
    specs, listed = check_specs(args)
    reports = check_reports(args, specs, chosen, host_progress)
    reports = with_next_steps(args, specs, listed, reports)
    report = check_report(args, reports)
    _emit(report, render_format(report, args.fmt.value), args.output)
    raise typer.Exit(report.exit_code)


@_command(ProbeArgs)
def probe(args: ProbeArgs) -> None:
    """Probe served vs trained drafter attention on a host's GPU (CPU where none).

    Exit 0 when the probe ran, 1 when it refused (GPU memory) or its self-check failed,
    2 when it could not run (no torch on the host, bad input).
    """
    from dflash_doctor.commands.hosts import probe_spec
    from dflash_doctor.commands.inputs import lengths, ssh
    from dflash_doctor.pipeline import within_budget
    from dflash_doctor.probes.host import ProbeOptions
    from dflash_doctor.render.probe_plot import require_plot

    if args.device not in ("auto", "cpu", "cuda") or args.dtype not in ("float32", "bfloat16"):
        raise UsageError("--device is auto, cpu or cuda; --dtype is float32 or bfloat16")
    if args.weights not in ("random", "real"):
        raise UsageError("--weights is random or real")
    if args.plot is not None:
        require_plot(str(args.plot))  # before the run, not after it
    spec = probe_spec(args)
    contexts = lengths(args.contexts)
    reach = ssh(args.identity, args.known_hosts, args.ssh_config, args.accept_new_host_key)
    options = ProbeOptions(
        contexts, args.window, args.budget_mib, args.device, args.dtype, args.weights,
        args.python, args.agreement_tokens,
    )  # fmt: skip

    def work() -> int:
        return _probe_one(spec, options, reach, args.fmt, args.plot)

    raise typer.Exit(within_budget(spec.name, args.timeout, work))


def _probe_one(
    spec: HostSpec, options: ProbeOptions, ssh: SSHOptions, fmt: Format, plot: Path | None
) -> int:
    """Probe one host, its progress on stderr, its result on stdout; the exit code."""
    from rich.console import Console

    from dflash_doctor.facts.probe_result import HostProbe
    from dflash_doctor.probes.host import probe_host
    from dflash_doctor.render.probe import render_probe
    from dflash_doctor.render.probe_plot import write_plot

    err = Console(stderr=True)
    name = spec.name
    result = probe_host(
        spec,
        options,
        ssh=ssh,
        on_progress=lambda line: err.print(
            f"{name}: {line}", markup=False, highlight=False, soft_wrap=True
        ),
    )
    if fmt is Format.json:
        sys.stdout.write(result.model_dump_json(indent=2) + "\n")
    else:
        render_probe(HostProbe(host=name, result=result), Console())
    if plot is not None and result.contexts:
        write_plot(result, str(plot), f"{name} attention probe")
    # passed is None when no scenario had the reference's spans: nothing to check.
    ok = result.refused is None and (
        result.self_check is None or result.self_check.passed is not False
    )
    return 0 if ok else 1


@_command(GateArgs)
def gate(args: GateArgs) -> None:
    """Pre-deploy gate: the same checks over launch and model files, with no host."""
    from dflash_doctor.commands.check import gate_report
    from dflash_doctor.commands.hosts import gate_specs, pinned_version
    from dflash_doctor.commands.inputs import selection
    from dflash_doctor.render.formats import render_format

    chosen = selection(args.select)
    specs, pinned = pinned_version(args, gate_specs(args))
    report = gate_report(args, specs, chosen, pinned)
    _emit(report, render_format(report, args.fmt.value, str(args.root)), args.output)
    raise typer.Exit(report.exit_code)


@_command(FixArgs)
def fix(args: FixArgs) -> None:
    """Show the change to the launch definition as a diff; --apply carries it out safely."""
    from dflash_doctor.commands.hosts import fix_specs
    from dflash_doctor.fix.report import fix_exit_code

    specs = fix_specs(args, _say)
    ask = (args.apply or args.do_rollback) and not args.yes
    if ask and not sys.stdin.isatty():
        raise UsageError("--apply and --rollback change hosts: add --yes when not at a terminal")
    if ask and args.do_rollback and not typer.confirm(f"Roll back {len(specs)} host(s)?"):
        raise typer.Exit(0)  # "no" changes nothing: not an error
    raise typer.Exit(fix_exit_code(_fix_hosts(args, specs, ask=ask and not args.do_rollback)))


def _fix_hosts(args: FixArgs, specs: list[HostSpec], *, ask: bool) -> list[FixReport]:
    """Plan (or apply, or roll back) each host in turn, printing each host's report. `ask`
    (--apply at a terminal without --yes): each host's plan is shown first, then asked."""
    from rich.console import Console

    from dflash_doctor.commands.fix import fix_runner
    from dflash_doctor.render.fix import render_fix

    run = fix_runner(args)
    console = Console()
    reports = []
    for s in specs:
        if ask:
            reports.append(_asked(s, run, console))
            continue
        report = run(s, args.apply, None)
        render_fix(report, console)
        reports.append(report)
    return reports


def _asked(spec: HostSpec, run: FixRun, console: Console) -> FixReport:
    """At a terminal: the plan (diff, the process to stop, the relaunch) first, then the
    question; "no" leaves the host as it was (the dry run's report: exit 0). "yes" applies
    only the plan shown: one that differs by then (the host changed) is refused."""
    from dflash_doctor.render.fix import render_fix, render_fix_outcome

    planned = run(spec, False, None)
    render_fix(planned, console)
    view = planned.plan
    if planned.outcome != "planned" or view is None or not (view.diff or view.command):
        return planned  # nothing to apply: nothing to ask
    if not typer.confirm(f"Apply this change to {spec.name}?", default=False):
        console.print(f"nothing changed on {spec.name}", markup=False, highlight=False)
        return planned
    report = run(spec, True, view)
    render_fix_outcome(report, console)
    return report


@_command(BenchArgs, "bench")
def bench_command(args: BenchArgs) -> None:
    """Measure acceptance on the live server across the drafter's window and concurrency."""
    from dflash_doctor.commands.hosts import bench_spec
    from dflash_doctor.commands.inputs import bench_options, ssh
    from dflash_doctor.pipeline import within_budget
    from dflash_doctor.render.bench_plot import require_matplotlib

    if args.plot is not None:
        require_matplotlib()  # before the sweep, not after it
    options = bench_options(
        args.contexts, args.concurrency, args.max_new_tokens, args.temperature, args.seed,
        args.max_total_tokens, args.yes, args.prompts, args.repeats, args.baseline_port,
    )  # fmt: skip
    spec = bench_spec(args)
    reach = ssh(args.identity, args.known_hosts, args.ssh_config, args.accept_new_host_key)
    result = within_budget(spec.name, args.timeout, lambda: _bench_live(spec, reach, options))
    _show_bench(result, spec.name, args.fmt, args.output, args.plot)
    failed = [c for c in result.cells if c.accept_length is None]
    raise typer.Exit(1 if failed or result.collapse else 0)


def _bench_live(spec: HostSpec, ssh: SSHOptions, options: BenchOptions) -> BenchResult:
    """Sweep the host's live server; an unreachable host exits with its own code."""
    from rich.console import Console

    from dflash_doctor.bench.run import bench_host
    from dflash_doctor.pipeline import open_transport
    from dflash_doctor.render.bench import cell_progress

    try:
        transport = open_transport(spec, ssh)
        try:
            return bench_host(spec, transport, options, progress=cell_progress)
        finally:
            transport.close()
    except HostUnreachable as e:
        Console(stderr=True).print(f"dflash-doctor: unreachable: {e}", markup=False)
        raise typer.Exit(EXIT_UNREACHABLE) from None


def _show_bench(
    result: BenchResult, name: str, fmt: Format, output: Path | None, plot: Path | None
) -> None:
    """The JSON document to --output, the report to stdout, the curve to --plot."""
    from rich.console import Console

    from dflash_doctor.render.bench import render_bench, render_bench_json
    from dflash_doctor.render.bench_plot import write_bench_plot

    document = render_bench_json(result)
    if output is not None:
        try:
            output.write_text(document, encoding="utf-8")
        except OSError as e:
            raise UsageError(f"{output}: cannot write: {e.strerror}") from None
    if fmt is Format.json:
        sys.stdout.write(document)
    else:
        render_bench(result, Console())
    if plot is not None:
        write_bench_plot(result, str(plot), f"{name} bench")


@app.command("checks")
def list_checks() -> None:
    """List the check catalog."""
    from rich.console import Console

    from dflash_doctor.catalog_index import catalog_entries
    from dflash_doctor.render.catalog import render_catalog

    render_catalog(catalog_entries(), Console())


@app.command()
def explain(check_id: Annotated[str, typer.Argument(help="a check id, e.g. DFD103")]) -> None:
    """Print a check's documentation: what it finds, why it hurts, how to fix it."""
    from rich.console import Console

    from dflash_doctor.checks import CATALOG
    from dflash_doctor.checks.retired import RETIRED
    from dflash_doctor.fleet.drift import FLEET_CHECKS
    from dflash_doctor.render.terminal import render_explain

    found = CATALOG.get(check_id.upper()) or FLEET_CHECKS.get(check_id.upper())
    if found is None and check_id.upper() in RETIRED:
        Console().print(RETIRED[check_id.upper()], markup=False, highlight=False)
        return
    if found is None:
        raise UsageError(f"unknown check id {check_id!r} (see `dflash-doctor checks`)")
    render_explain(found, Console())


@app.command()
def version() -> None:
    """Print the version."""
    typer.echo(__version__)


# Commands that take no arguments run without typer's parsing when given none: typer 0.29
# builds a pydantic TypeAdapter for every parameter it processes (an unset --help too),
# and importing pydantic alone costs more than the whole listing (bench/startup.py).
_BARE_COMMANDS = {"checks": list_checks, "version": version}


def _say(text: str) -> None:
    """One line on stderr, however long (soft_wrap: never cut at the console width)."""
    from rich.console import Console

    Console(stderr=True).print(clean(text), markup=False, highlight=False, soft_wrap=True)


def main() -> None:
    try:
        bare = _BARE_COMMANDS.get(sys.argv[1]) if len(sys.argv) == 2 else None
        if bare is not None:
            bare()
            return
        # Not standalone: click would turn an unexpected exception into exit 1, the code
        # for findings. Here every way out has its documented code (report.py).
        code = app(standalone_mode=False)
    except HostUnreachable as e:  # unreachable, or ran past --timeout: exit 3 everywhere
        _say(one_line(f"dflash-doctor: unreachable: {e}"))
        sys.exit(EXIT_UNREACHABLE)
    except DoctorError as e:
        _say(one_line(f"dflash-doctor: error: {e}"))
        sys.exit(EXIT_USAGE)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except typer.Abort:  # Ctrl-C inside a command (click turns it into Abort)
        _say("dflash-doctor: interrupted")
        sys.exit(EXIT_INTERRUPTED)
    except typer.TyperException as e:  # the command line itself is wrong
        show = getattr(e, "show", None)
        if callable(show):
            show()
        sys.exit(EXIT_USAGE)
    except KeyboardInterrupt:
        _say("dflash-doctor: interrupted")
        sys.exit(EXIT_INTERRUPTED)
    except Exception as e:  # a crash is never exit 1 (findings)
        where = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
        at = f" at {Path(where.filename).name}:{where.lineno}" if where else ""
        _say(f"dflash-doctor: internal error{at}: {type(e).__name__}: {str(e)[:200]}")
        sys.exit(EXIT_INTERNAL)
    if code == EXIT_INTERRUPTED:  # typer's own answer to Ctrl-C inside a command
        _say("dflash-doctor: interrupted")
    sys.exit(code if isinstance(code, int) else 0)
