"""The `dflash-doctor` command line."""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from dflash_doctor import __version__
from dflash_doctor.defaults import (
    DEFAULT_AGREEMENT_TOKENS,
    DEFAULT_BUDGET_MIB,
    DEFAULT_HOST_TIMEOUT,
    DEFAULT_JOBS,
    DEFAULT_MAX_NEW_TOKENS,
    DEFAULT_MAX_TOTAL_TOKENS,
    DEFAULT_SEED,
    Severity,
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
    from rich.console import Console

    from dflash_doctor.bench.matrix import BenchOptions
    from dflash_doctor.facts.models import BenchResult
    from dflash_doctor.fix.report import FixReport, PlanView
    from dflash_doctor.hosts import HostSpec
    from dflash_doctor.probes.host import ProbeOptions
    from dflash_doctor.report import HostReport, Report
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


class Format(StrEnum):
    text = "text"
    json = "json"


class ReportFormat(StrEnum):
    """`check` and `gate`'s report formats (render/formats.py REPORT_FORMATS)."""

    text = "text"
    concise = "concise"
    github = "github"
    json = "json"
    sarif = "sarif"
    junit = "junit"


REPORT_FORMAT_HELP = (
    "text (the terminal report), concise (one line per finding), github (Actions "
    "annotations), json, sarif or junit"
)


LOCAL_NAMES = ("local", "localhost")
FAIL_ON_SKIP_HELP = (
    "exit 2 when a check that applies could not judge (an input missing or unusable); "
    "checks that do not apply here (no log offline, no window flag) never fail it"
)


# Options several commands share, declared once (same flag, same help, same default).
HostsArg = Annotated[list[str] | None, typer.Argument(help="hosts: 'local' or SSH targets")]
FormatOpt = Annotated[Format, typer.Option("--format", help="report format")]
FailOnOpt = Annotated[
    Severity, typer.Option("--fail-on", help="lowest severity that fails (exit 1)")
]
FailOnSkipOpt = Annotated[bool, typer.Option("--fail-on-skip", help=FAIL_ON_SKIP_HELP)]
InventoryOpt = Annotated[
    Path | None, typer.Option("--inventory", "-I", help="inventory YAML of hosts and groups")
]
PidOpt = Annotated[
    int | None,
    typer.Option("--pid", min=1, help="the SGLang server's process id (where several run)"),
]
ServerPortOpt = Annotated[
    int | None,
    typer.Option(
        "--port", min=1, max=65535, help="the SGLang server's HTTP port (where several run)"
    ),
]
DrafterOpt = Annotated[str | None, typer.Option("--drafter", help="drafter dir or repo")]
TargetOpt = Annotated[str | None, typer.Option("--target", help="target dir or repo")]
BenchContextsOpt = Annotated[
    str | None, typer.Option("--bench-contexts", help="context lengths for --bench")
]
IdentityOpt = Annotated[
    list[str] | None, typer.Option("--identity", "-i", help="SSH private key file")
]
KnownHostsOpt = Annotated[
    str | None, typer.Option("--known-hosts", help="known_hosts file to verify host keys")
]
SshConfigOpt = Annotated[
    str | None, typer.Option("--ssh-config", help="SSH config file (default ~/.ssh/config)")
]
AcceptNewHostKeyOpt = Annotated[
    bool, typer.Option("--accept-new-host-key", help="trust and record unknown host keys")
]


def _given(options: dict[str, tuple[str, str | None]]) -> dict[str, str]:
    """Facts the command line named a path or pid for: unreadable ones are input errors."""
    return {fact: f"{flag} {value}" for fact, (flag, value) in options.items() if value}


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"dflash-doctor {__version__}")
        raise typer.Exit(0)


def _sglang_version(value: str | None) -> str | None:
    """A declared SGLang version must read as one (X.Y or X.Y.Z, post/rc suffixes allowed)."""
    from dflash_doctor.sglang_versions import parse_version

    if value is not None and parse_version(value) is None:
        raise UsageError(f"--sglang-version {value!r}: not a version (e.g. 0.5.13, 0.5.23)")
    return value


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


def _specs(
    hosts: list[str],
    demo: bool,
    host_dirs: list[Path],
    from_inventory: list[HostSpec],
    overrides: dict[str, object],
) -> list[HostSpec]:
    from dflash_doctor.container_targets import is_container_target, parse_container_target
    from dflash_doctor.demo import demo_host
    from dflash_doctor.hosts import HostSpec, load_recorded_host

    specs: list[HostSpec] = list(from_inventory)
    if demo:
        specs.append(demo_host())
    for d in host_dirs:
        specs.append(load_recorded_host(str(d)))
    for h in hosts:
        if is_container_target(h):
            named: dict[str, str] = parse_container_target(h)
        else:
            named = {"name": h} if h in LOCAL_NAMES else {"name": h, "address": h}
        specs.append(_override(HostSpec.of(h), named))
    if not specs:
        raise UsageError("give a HOST, --inventory FILE, --host-dir DIR or --demo")
    return [_override(s, overrides) for s in specs]


def _override(
    spec: HostSpec, overrides: Mapping[str, object], *, clear: tuple[str, ...] = ()
) -> HostSpec:
    """`spec` with the command line's settings (None = not given), validated as host keys.

    The one way a command line changes a host: a misspelled key or a value of the wrong
    kind (`port="notaport"`) is a UsageError (exit 2) naming the host, not copied in.
    `clear` names keys set back to their default (None).
    """
    given = {k: v for k, v in overrides.items() if v is not None} | dict.fromkeys(clear)
    if not given or spec.invalid is not None:  # an unreadable host.yaml stays this host's error
        return spec
    return spec.override(**given)


def _ssh(
    identity: list[str] | None,
    known_hosts: str | None,
    ssh_config: str | None,
    accept_new_host_key: bool,
    connect_timeout: float = 10.0,
) -> SSHOptions:
    from dflash_doctor.transport.ssh_options import SSHOptions

    return SSHOptions(
        identity_files=tuple(identity or ()),
        known_hosts=known_hosts,
        ssh_config=ssh_config,
        accept_new_host_key=accept_new_host_key,
        connect_timeout=connect_timeout,
    )


def _local_env() -> dict[str, str]:
    """This machine's settings that locate model files (offline: the files are here)."""
    from dflash_doctor.gather import ENV_KEYS

    return {k: os.environ[k] for k in ENV_KEYS if k in os.environ}


def _selection(select: str | None) -> list[str] | None:
    if not select:
        return None
    from dflash_doctor.checks import CATALOG

    chosen = [s.strip().upper() for s in select.split(",") if s.strip()]
    unknown = [c for c in chosen if c not in CATALOG]
    if unknown:
        raise UsageError(f"unknown check id(s): {', '.join(unknown)}")
    return chosen


def _lengths(contexts: str | None) -> list[int] | None:
    if not contexts:
        return None
    try:
        lengths = sorted({int(x) for x in contexts.split(",") if x.strip()})
    except ValueError:
        raise UsageError(f"context lengths {contexts!r}: comma-separated integers") from None
    if not lengths or lengths[0] < 1:
        raise UsageError("context lengths must be positive")
    return lengths


def _counts(text: str | None, what: str) -> list[int] | None:
    if not text:
        return None
    try:
        values = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise UsageError(f"{what} {text!r}: comma-separated integers") from None
    if not values or values[0] < 1:
        raise UsageError(f"{what} must be positive")
    return values


def _bench_options(
    contexts: str | None,
    concurrency: str | None,
    max_new_tokens: int,
    temperature: float | None = None,
    seed: str = DEFAULT_SEED,
    max_total_tokens: int = DEFAULT_MAX_TOTAL_TOKENS,
    yes: bool = False,
    prompts: str | None = None,
    repeats: int = 3,
    baseline_port: int | None = None,
) -> BenchOptions:
    from dflash_doctor.bench.matrix import BenchOptions
    from dflash_doctor.bench.prompts import parse_prompts

    return BenchOptions(
        contexts=_counts(contexts, "--contexts"),
        concurrency=_counts(concurrency, "--concurrency"),
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        seed=seed,
        max_total_tokens=max_total_tokens,
        yes=yes,
        prompts=tuple(parse_prompts(prompts)),
        repeats=repeats,
        baseline_port=baseline_port,
    )


BENCH_HOST_TIMEOUT = 3600.0


def _emit(report: Report, machine: str | None, output: Path | None) -> None:
    """Where `check` and `gate` put their report, one rule for both.

    `--output FILE` writes the `--format` report (JSON for text); stdout carries that report
    when there is no `--output` (the terminal report for text); with `--output` and a machine
    format the terminal report goes to stderr, so stdout stays empty for pipes.
    """
    from rich.console import Console

    from dflash_doctor.render.json_report import render_json
    from dflash_doctor.render.terminal import render_terminal

    if output is not None:
        try:
            output.write_text(machine or render_json(report), encoding="utf-8")
        except OSError as e:
            raise UsageError(f"{output}: cannot write report: {e.strerror}") from None
    if machine is None:
        render_terminal(report, Console())
    elif output is None:
        sys.stdout.write(machine)
    else:
        render_terminal(report, Console(stderr=True))


# `check`'s own options, declared here so the command reads as its list of flags.
_DemoHostOpt = Annotated[
    str | None,
    typer.Option(
        "--demo-host",
        help="check a named built-in demo host: seed (= --demo, SGLang 0.5.13) or v0523",
    ),
]
_CheckHostDirOpt = Annotated[
    list[Path] | None, typer.Option("--host-dir", help="a recorded host tree (host.yaml)")
]
_CheckFormatOpt = Annotated[ReportFormat, typer.Option("--format", help=REPORT_FORMAT_HELP)]
_CheckOutputOpt = Annotated[
    Path | None,
    typer.Option("--output", help="write the --format report here (JSON for text)"),
]
_CheckSelectOpt = Annotated[
    str | None, typer.Option("--select", help="comma-separated check ids to run")
]
_LogOpt = Annotated[str | None, typer.Option("--log", help="server log path on the host")]
_CheckLaunchOpt = Annotated[
    str | None, typer.Option("--launch", help="launch script or systemd unit on the host")
]
_CheckVersionOpt = Annotated[
    str | None,
    typer.Option(
        "--sglang-version",
        callback=_sglang_version,
        help="declare the host's SGLang version (X.Y.Z)",
    ),
]
_CheckLimitOpt = Annotated[
    str | None, typer.Option("--limit", help="inventory groups, labels or hosts to check")
]
_JobsOpt = Annotated[int, typer.Option("--jobs", "-j", min=1, help="hosts checked at once")]
_TimeoutOpt = Annotated[float, typer.Option("--timeout", min=1, help="seconds allowed per host")]
_BudgetTimeoutOpt = Annotated[
    float | None,
    typer.Option("--timeout", min=1, help="seconds allowed for the host (default: no limit)"),
]
_ConnectTimeoutOpt = Annotated[
    float, typer.Option("--connect-timeout", min=1, help="seconds to connect over SSH")
]
_ProbeOpt = Annotated[
    bool,
    typer.Option("--probe", help="also run the attention probe; its numbers feed findings"),
]
_ProbeContextsOpt = Annotated[
    str | None, typer.Option("--probe-contexts", help="context lengths for --probe")
]
_ProbeWindowOpt = Annotated[
    int | None, typer.Option("--probe-window", help="window for --probe (reduced runs)")
]
_CheckBenchOpt = Annotated[
    bool,
    typer.Option("--bench", help="also bench the live server; its curve feeds the findings"),
]
_CheckBenchConcurrencyOpt = Annotated[
    str | None, typer.Option("--bench-concurrency", help="concurrencies for --bench")
]
_CheckBenchTokensOpt = Annotated[
    int, typer.Option("--bench-max-new-tokens", min=1, help="output tokens per request")
]
_CheckYesOpt = Annotated[
    bool, typer.Option("--yes", help="with --bench: load a server that serves traffic")
]


@dataclass(frozen=True)
class _CheckArgs:
    """`check`'s command line as one value, for the phases the command runs in turn."""

    hosts: list[str] | None
    demo: bool
    demo_name: str | None
    host_dir: list[Path] | None
    fmt: ReportFormat
    fail_on: Severity
    output: Path | None
    select: str | None
    log: str | None
    launch: str | None
    pid: int | None
    port: int | None
    drafter: str | None
    target: str | None
    sglang_version: str | None
    inventory: Path | None
    limit: str | None
    jobs: int
    timeout: float
    connect_timeout: float
    identity: list[str] | None
    known_hosts: str | None
    ssh_config: str | None
    accept_new_host_key: bool
    probe: bool
    probe_contexts: str | None
    probe_window: int | None
    bench: bool
    bench_contexts: str | None
    bench_concurrency: str | None
    bench_max_new_tokens: int
    yes: bool
    fail_on_skip: bool


@app.command()
def check(
    hosts: HostsArg = None,
    demo: Annotated[bool, typer.Option("--demo", help="check the built-in demo host")] = False,
    demo_name: _DemoHostOpt = None,
    host_dir: _CheckHostDirOpt = None,
    fmt: _CheckFormatOpt = ReportFormat.text,
    fail_on: FailOnOpt = Severity.ERROR,
    output: _CheckOutputOpt = None,
    select: _CheckSelectOpt = None,
    log: _LogOpt = None,
    launch: _CheckLaunchOpt = None,
    pid: PidOpt = None,
    port: ServerPortOpt = None,
    drafter: DrafterOpt = None,
    target: TargetOpt = None,
    sglang_version: _CheckVersionOpt = None,
    inventory: InventoryOpt = None,
    limit: _CheckLimitOpt = None,
    jobs: _JobsOpt = DEFAULT_JOBS,
    timeout: _TimeoutOpt = DEFAULT_HOST_TIMEOUT,
    connect_timeout: _ConnectTimeoutOpt = 10.0,
    identity: IdentityOpt = None,
    known_hosts: KnownHostsOpt = None,
    ssh_config: SshConfigOpt = None,
    accept_new_host_key: AcceptNewHostKeyOpt = False,
    probe: _ProbeOpt = False,
    probe_contexts: _ProbeContextsOpt = None,
    probe_window: _ProbeWindowOpt = None,
    bench: _CheckBenchOpt = False,
    bench_contexts: BenchContextsOpt = None,
    bench_concurrency: _CheckBenchConcurrencyOpt = None,
    bench_max_new_tokens: _CheckBenchTokensOpt = DEFAULT_MAX_NEW_TOKENS,
    yes: _CheckYesOpt = False,
    fail_on_skip: FailOnSkipOpt = False,
) -> None:
    """Gather facts from hosts, run the check catalog, report findings with evidence and fixes."""
    # Taken first, before any other local: exactly the parameters above.
    args = _CheckArgs(**locals())
    from dflash_doctor.render.formats import render_format

    chosen = _selection(select)
    specs, listed = _check_specs(args)
    reports = _check_reports(args, specs, chosen)
    _note_next_steps(args, specs, listed, reports)
    report = _check_report(args, reports)
    _emit(report, render_format(report, fmt.value), output)
    raise typer.Exit(report.exit_code)


def _check_specs(args: _CheckArgs) -> tuple[list[HostSpec], list[HostSpec]]:
    """The hosts to check, and those of them the inventory listed (they come first)."""
    from dflash_doctor.demo import demo_host
    from dflash_doctor.inventory import load_inventory

    listed = load_inventory(str(args.inventory)).select(args.limit) if args.inventory else []
    specs = _specs(
        args.hosts or [],
        args.demo,
        args.host_dir or [],
        listed + ([demo_host(args.demo_name)] if args.demo_name else []),
        {
            "log_path": args.log,
            "launch_file": args.launch,
            "pid": args.pid,
            "server_port": args.port,
            "drafter_path": args.drafter,
            "target_path": args.target,
            "sglang_version": args.sglang_version,
        },
    )
    if args.limit and not args.inventory:
        raise UsageError("--limit needs --inventory")
    return specs, listed


def _check_reports(
    args: _CheckArgs, specs: list[HostSpec], chosen: list[str] | None
) -> list[HostReport]:
    """Check every host (with the probe and bench when asked), a progress line per host."""
    from dflash_doctor.pipeline import check_hosts
    from dflash_doctor.probes.host import ProbeOptions
    from dflash_doctor.render.progress import host_progress

    ssh = _ssh(
        args.identity,
        args.known_hosts,
        args.ssh_config,
        args.accept_new_host_key,
        args.connect_timeout,
    )
    bench_options = (
        _bench_options(
            args.bench_contexts, args.bench_concurrency, args.bench_max_new_tokens, yes=args.yes
        )
        if args.bench
        else None
    )
    timeout = args.timeout
    if args.bench and timeout == DEFAULT_HOST_TIMEOUT:
        timeout = BENCH_HOST_TIMEOUT  # a sweep takes minutes on a real server
    with host_progress(len(specs)) as done:
        return check_hosts(
            specs,
            chosen,
            ssh=ssh,
            jobs=args.jobs,
            timeout=timeout,
            on_done=done,
            probe=ProbeOptions(_lengths(args.probe_contexts), args.probe_window)
            if args.probe
            else None,
            bench=bench_options,
        )


def _check_hows(args: _CheckArgs, listed: list[HostSpec]) -> list[list[str] | None]:
    """How each host was named, in _specs' order, to build its `fix` command."""
    hows: list[list[str] | None] = [["-I", str(args.inventory), "--limit", s.name] for s in listed]
    hows += [["--demo"] if args.demo_name == "seed" else None] if args.demo_name else []
    hows += [["--demo"]] if args.demo else []
    hows += [["--host-dir", str(d)] for d in args.host_dir or []]
    hows += [[h] for h in args.hosts or []]
    return hows


def _reach_options(args: _CheckArgs) -> list[tuple[str, str | None]]:
    """The options that reach the same host and server again, for the `fix` command: pasted
    as printed, it must connect with the same key and known_hosts and pick the same server."""
    return [
        *(("-i", key) for key in args.identity or []),
        ("--known-hosts", args.known_hosts),
        ("--ssh-config", args.ssh_config),
        ("--pid", None if args.pid is None else str(args.pid)),
        ("--port", None if args.port is None else str(args.port)),
    ]


def _note_next_steps(
    args: _CheckArgs, specs: list[HostSpec], listed: list[HostSpec], reports: list[HostReport]
) -> None:
    """Tell each host's report its next step: the pending relaunch, or the `fix` to run."""
    from dflash_doctor.launch_edits import describe_relaunch
    from dflash_doctor.next_step import automated, fix_command, launch_place, pending_relaunch
    from dflash_doctor.transport.open import relaunch_refusal

    given = [
        *_reach_options(args),
        ("--launch", args.launch),
        ("--drafter", args.drafter),
        ("--target", args.target),
        ("--sglang-version", args.sglang_version),
    ]
    for spec, how, host_report in zip(specs, _check_hows(args, listed), reports, strict=True):
        facts = host_report.facts
        pending = pending_relaunch(host_report.findings, facts) if facts is not None else None
        if pending is not None:
            written = facts.launch_file.value if facts is not None else None
            host_report.pending_relaunch = pending
            refused = relaunch_refusal(spec)
            if refused is None:  # a recorded host is never relaunched
                how_to = describe_relaunch(
                    spec, written, written.source if written else None, refused
                )
                host_report.pending_relaunch += f" ({how_to})"
        elif how is not None and automated(host_report.findings):
            host_report.fix_command = fix_command(how, given)
            host_report.fix_file = launch_place(
                spec.hints.launch_file,
                None if facts is None else facts.launch_file.value or facts.launch.value,
            )


def _check_report(args: _CheckArgs, reports: list[HostReport]) -> Report:
    from dflash_doctor.report import build_report

    return build_report(
        reports,
        fail_on=args.fail_on,
        fail_on_skip=args.fail_on_skip,
        given=_given(
            {
                "log": ("--log", args.log),
                "launch": ("--launch", args.launch),
                "drafter": ("--drafter", args.drafter),
            }
            | {"target": ("--target", args.target)}
            | ({"launch": ("--pid", str(args.pid))} if args.pid is not None else {})
        ),
    )


# `probe`'s own options.
_ProbeHostDirOpt = Annotated[
    Path | None, typer.Option("--host-dir", help="a recorded host tree (host.yaml)")
]
_ContextsOpt = Annotated[
    str | None, typer.Option("--contexts", help="comma-separated context lengths")
]
_WindowOpt = Annotated[
    int | None, typer.Option("--window", help="probe this window instead of the config's")
]
_BudgetOpt = Annotated[int, typer.Option("--budget-mib", min=64, help="memory the probe may use")]
_WeightsOpt = Annotated[
    str, typer.Option("--weights", help="random, or real (the drafter's safetensors)")
]
_PythonOpt = Annotated[
    str | None, typer.Option("--python", help="the Python on the host that has torch")
]
_AgreementOpt = Annotated[
    int,
    typer.Option(
        "--agreement-tokens", min=16, help="draft tokens the top-1 agreement is measured over"
    ),
]
_ProbePlotOpt = Annotated[
    Path | None,
    typer.Option("--plot", help="also draw divergence and draft reads to a PNG (matplotlib)"),
]


@app.command()
def probe(
    host: Annotated[str | None, typer.Argument(help="'local' or an SSH target")] = None,
    demo: Annotated[bool, typer.Option("--demo", help="probe the built-in demo host")] = False,
    host_dir: _ProbeHostDirOpt = None,
    contexts: _ContextsOpt = None,
    window: _WindowOpt = None,
    budget_mib: _BudgetOpt = DEFAULT_BUDGET_MIB,
    device: Annotated[str, typer.Option("--device", help="auto, cpu or cuda")] = "auto",
    dtype: Annotated[str, typer.Option("--dtype", help="float32 or bfloat16")] = "float32",
    weights: _WeightsOpt = "random",
    python: _PythonOpt = None,
    agreement_tokens: _AgreementOpt = DEFAULT_AGREEMENT_TOKENS,
    pid: PidOpt = None,
    port: ServerPortOpt = None,
    fmt: FormatOpt = Format.text,
    plot: _ProbePlotOpt = None,
    timeout: _BudgetTimeoutOpt = None,
    identity: IdentityOpt = None,
    known_hosts: KnownHostsOpt = None,
    ssh_config: SshConfigOpt = None,
    accept_new_host_key: AcceptNewHostKeyOpt = False,
) -> None:
    """Probe served vs trained drafter attention on a host's GPU (CPU where none).

    Exit 0 when the probe ran, 1 when it refused (GPU memory) or its self-check failed,
    2 when it could not run (no torch on the host, bad input).
    """
    from dflash_doctor.probes.host import ProbeOptions
    from dflash_doctor.render.probe_plot import require_plot

    if device not in ("auto", "cpu", "cuda") or dtype not in ("float32", "bfloat16"):
        raise UsageError("--device is auto, cpu or cuda; --dtype is float32 or bfloat16")
    if weights not in ("random", "real"):
        raise UsageError("--weights is random or real")
    if plot is not None:
        require_plot(str(plot))  # before the run, not after it
    specs = _specs(
        [host] if host else [],
        demo,
        [host_dir] if host_dir else [],
        [],
        {"pid": pid, "server_port": port},
    )
    if len(specs) != 1:
        raise UsageError("probe one host at a time")
    lengths = _lengths(contexts)
    ssh = _ssh(identity, known_hosts, ssh_config, accept_new_host_key)
    options = ProbeOptions(
        lengths, window, budget_mib, device, dtype, weights, python, agreement_tokens
    )
    from dflash_doctor.pipeline import within_budget

    spec = specs[0]
    raise typer.Exit(
        within_budget(spec.name, timeout, lambda: _probe_one(spec, options, ssh, fmt, plot))
    )


def _probe_one(
    spec: HostSpec, options: ProbeOptions, ssh: SSHOptions, fmt: Format, plot: Path | None
) -> int:
    """Probe one host, its progress on stderr, its result on stdout; the exit code."""
    from rich.console import Console

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
        render_probe(name, result, Console())
    if plot is not None and result.contexts:
        write_plot(result, str(plot), f"{name} attention probe")
    # passed is None when no scenario had the reference's spans: nothing to check.
    ok = result.refused is None and (
        result.self_check is None or result.self_check.passed is not False
    )
    return 0 if ok else 1


# `gate`'s own options.
_GateLaunchArg = Annotated[
    list[str] | None,
    typer.Argument(help="launch scripts, systemd units or compose files in the repository"),
]
_GateDrafterOpt = Annotated[
    str | None, typer.Option("--drafter", help="drafter dir, config.json or HF repo id")
]
_GateTargetOpt = Annotated[
    str | None, typer.Option("--target", help="target dir, config.json or HF repo id")
]
_GateVersionOpt = Annotated[
    str | None,
    typer.Option("--sglang-version", callback=_sglang_version, help="the SGLang version to deploy"),
]
_ComposeServiceOpt = Annotated[
    str | None, typer.Option("--compose-service", help="service of a compose file")
]
_GateHostOpt = Annotated[
    str | None, typer.Option("--host", help="host name the waivers match (default: file)")
]
_LabelsOpt = Annotated[
    str | None, typer.Option("--labels", help="comma-separated labels the waivers match")
]
_GateInventoryOpt = Annotated[
    Path | None, typer.Option("--inventory", "-I", help="gate the inventory's hosts offline")
]
_GateLimitOpt = Annotated[str | None, typer.Option("--limit", help="inventory groups/labels/hosts")]
_GateFormatOpt = Annotated[ReportFormat, typer.Option("--format", help=REPORT_FORMAT_HELP)]
_GateOutputOpt = Annotated[
    Path | None, typer.Option("--output", help="write the --format report (json for text)")
]
_WaiversOpt = Annotated[
    Path | None,
    typer.Option("--waivers", help="waiver file (default .dflash-doctor.yaml, pyproject)"),
]
_BaselineOpt = Annotated[
    Path | None, typer.Option("--baseline", help="earlier JSON report: fail on new findings")
]
_RootOpt = Annotated[Path, typer.Option("--root", help="repository root for SARIF locations")]
_GateSelectOpt = Annotated[str | None, typer.Option("--select", help="check ids to run")]


@dataclass(frozen=True)
class _GateArgs:
    """`gate`'s command line as one value, for the phases the command runs in turn."""

    launch: list[str] | None
    drafter: str | None
    target: str | None
    sglang_version: str | None
    compose_service: str | None
    host: str | None
    labels: str | None
    inventory: Path | None
    limit: str | None
    fmt: ReportFormat
    output: Path | None
    fail_on: Severity
    waivers: Path | None
    baseline: Path | None
    root: Path
    select: str | None
    fail_on_skip: bool


@app.command()
def gate(
    launch: _GateLaunchArg = None,
    drafter: _GateDrafterOpt = None,
    target: _GateTargetOpt = None,
    sglang_version: _GateVersionOpt = None,
    compose_service: _ComposeServiceOpt = None,
    host: _GateHostOpt = None,
    labels: _LabelsOpt = None,
    inventory: _GateInventoryOpt = None,
    limit: _GateLimitOpt = None,
    fmt: _GateFormatOpt = ReportFormat.text,
    output: _GateOutputOpt = None,
    fail_on: FailOnOpt = Severity.ERROR,
    waivers: _WaiversOpt = None,
    baseline: _BaselineOpt = None,
    root: _RootOpt = Path("."),
    select: _GateSelectOpt = None,
    fail_on_skip: FailOnSkipOpt = False,
) -> None:
    """Pre-deploy gate: the same checks over launch and model files, with no host."""
    # Taken first, before any other local: exactly the parameters above.
    args = _GateArgs(**locals())
    from dflash_doctor.render.formats import render_format

    chosen = _selection(select)
    specs, pinned = _pinned_version(args, _gate_specs(args))
    report = _gate_report(args, specs, chosen, pinned)
    _emit(report, render_format(report, fmt.value, str(root)), output)
    raise typer.Exit(report.exit_code)


def _pinned_version(args: _GateArgs, specs: list[HostSpec]) -> tuple[list[HostSpec], str | None]:
    """`specs` with the SGLang version the repository pins where none was declared (an
    inventory host's own `sglang_version` stays), and the note saying where it came from;
    a repository pinning several versions is an input error."""
    from dflash_doctor.gate_inputs import Pin, chosen_pin, pinned_sglang

    undeclared = [s.hints.sglang_version is None for s in specs]
    if args.sglang_version is not None or not any(undeclared):
        return specs, None
    files = args.launch or []
    pin = chosen_pin(pinned_sglang(str(args.root), files), files, str(args.root))
    if isinstance(pin, str):
        raise UsageError(f"{pin}: pass --sglang-version X.Y.Z")
    if not isinstance(pin, Pin):
        return specs, None
    pinned = [
        _override(s, {"sglang_version": pin.version}) if bare else s
        for s, bare in zip(specs, undeclared, strict=True)
    ]
    return pinned, f"SGLang {pin.version} from {pin.where} (--sglang-version overrides it)"


def _gate_specs(args: _GateArgs) -> list[HostSpec]:
    """The inventory's hosts made offline, then one host per launch file, in that order."""
    from dflash_doctor.hosts import HostSpec
    from dflash_doctor.inventory import load_inventory

    overrides: dict[str, object] = {"offline": True}
    for key, value in (
        ("drafter_path", args.drafter),
        ("target_path", args.target),
        ("sglang_version", args.sglang_version),
        ("compose_service", args.compose_service),
    ):
        if value is not None:
            overrides[key] = value
    specs = [
        _override(s, overrides, clear=("address",))
        for s in (load_inventory(str(args.inventory)).select(args.limit) if args.inventory else [])
    ]
    for path in args.launch or []:
        if not os.path.isfile(path):
            raise UsageError(f"{path}: no such launch file")
        given = {
            "launch_file": path,
            "labels": [x.strip() for x in (args.labels or "").split(",") if x.strip()],
            **overrides,
        }
        specs.append(_override(HostSpec.of(args.host or path), given))
    if not specs:
        raise UsageError("give launch files or --inventory")
    return specs


def _gate_report(
    args: _GateArgs, specs: list[HostSpec], chosen: list[str] | None, pinned: str | None
) -> Report:
    """Check the files, then apply the waivers and the baseline (policy.py); a launch the gate
    cannot judge is an input error (exit 2), one line naming what to pass."""
    from dflash_doctor.gate_inputs import missing_inputs
    from dflash_doctor.pipeline import check_hosts
    from dflash_doctor.policy import apply_policy
    from dflash_doctor.report import build_report

    given = _given({"drafter": ("--drafter", args.drafter), "target": ("--target", args.target)})
    # No host here: model names resolve in this machine's Hugging Face cache.
    checked = check_hosts(specs, chosen, jobs=1, local_env=_local_env())
    hosts, notes = apply_policy(
        checked,
        {s.name: s.labels for s in specs},
        today=date.today(),
        waiver_file=str(args.waivers) if args.waivers else None,
        search_dir=str(args.root),
        baseline_file=str(args.baseline) if args.baseline is not None else None,
    )
    return build_report(
        hosts,
        fail_on=args.fail_on,
        notes=[*([pinned] if pinned else []), *notes],
        fail_on_skip=args.fail_on_skip,
        given=given,
        input_errors=missing_inputs(checked, given),
    )


# `fix`'s own options.
_FixHostDirOpt = Annotated[
    list[Path] | None, typer.Option("--host-dir", help="a recorded host tree")
]
_FixLimitOpt = Annotated[
    str | None, typer.Option("--limit", help="inventory groups, labels or hosts to fix")
]
_FixLaunchOpt = Annotated[
    str | None, typer.Option("--launch", help="the launch file that starts the server")
]
_OfflineOpt = Annotated[
    bool, typer.Option("--offline", help="a launch file in a repository, no running server")
]
_FixVersionOpt = Annotated[
    str | None,
    typer.Option(
        "--sglang-version", callback=_sglang_version, help="declare the host's SGLang version"
    ),
]
_ApplyOpt = Annotated[
    bool, typer.Option("--apply", help="back up, write, relaunch, verify, roll back on failure")
]
_FixYesOpt = Annotated[bool, typer.Option("--yes", help="do not ask before --apply")]
_RollbackOpt = Annotated[
    bool, typer.Option("--rollback", help="restore the last backup and relaunch")
]
_FixTimeoutOpt = Annotated[
    float | None,
    typer.Option(
        "--timeout",
        min=1,
        help="seconds allowed to read each host and plan its fix (default: no limit)",
    ),
]
_HealthTimeoutOpt = Annotated[
    float, typer.Option("--health-timeout", min=1, help="seconds to wait for /health")
]
_FixBenchOpt = Annotated[
    bool,
    typer.Option("--bench", help="with --apply: bench before and after, keep only if it helps"),
]
_FixBenchConcurrencyOpt = Annotated[
    str | None, typer.Option("--bench-concurrency", help="concurrent requests for --bench")
]
_FixBenchTokensOpt = Annotated[
    int, typer.Option("--bench-max-new-tokens", min=1, help="tokens generated per request")
]
_PromptsHelp = "code, prose, random (a content-free control) or FILE.jsonl (default code,prose)"
_FixBenchPromptsOpt = Annotated[str | None, typer.Option("--bench-prompts", help=_PromptsHelp)]
_BenchThresholdOpt = Annotated[
    float,
    typer.Option(
        "--bench-threshold",
        min=0.0,
        max=1.0,
        help="largest loss of accept length beyond the window that keeps a fix",
    ),
]


@dataclass(frozen=True)
class _FixArgs:
    """`fix`'s command line as one value, for the phases the command runs in turn."""

    hosts: list[str] | None
    demo: bool
    host_dir: list[Path] | None
    inventory: Path | None
    limit: str | None
    launch: str | None
    pid: int | None
    port: int | None
    offline: bool
    drafter: str | None
    target: str | None
    sglang_version: str | None
    apply: bool
    yes: bool
    do_rollback: bool
    health_timeout: float
    timeout: float | None
    identity: list[str] | None
    known_hosts: str | None
    ssh_config: str | None
    accept_new_host_key: bool
    bench: bool
    bench_contexts: str | None
    bench_concurrency: str | None
    bench_max_new_tokens: int
    bench_threshold: float
    bench_prompts: str | None


@app.command()
def fix(
    hosts: HostsArg = None,
    demo: Annotated[bool, typer.Option("--demo", help="plan the fix of the demo host")] = False,
    host_dir: _FixHostDirOpt = None,
    inventory: InventoryOpt = None,
    limit: _FixLimitOpt = None,
    launch: _FixLaunchOpt = None,
    pid: PidOpt = None,
    port: ServerPortOpt = None,
    offline: _OfflineOpt = False,
    drafter: DrafterOpt = None,
    target: TargetOpt = None,
    sglang_version: _FixVersionOpt = None,
    apply: _ApplyOpt = False,
    yes: _FixYesOpt = False,
    do_rollback: _RollbackOpt = False,
    health_timeout: _HealthTimeoutOpt = 300.0,
    timeout: _FixTimeoutOpt = None,
    identity: IdentityOpt = None,
    known_hosts: KnownHostsOpt = None,
    ssh_config: SshConfigOpt = None,
    accept_new_host_key: AcceptNewHostKeyOpt = False,
    bench: _FixBenchOpt = False,
    bench_contexts: BenchContextsOpt = None,
    bench_concurrency: _FixBenchConcurrencyOpt = None,
    bench_max_new_tokens: _FixBenchTokensOpt = DEFAULT_MAX_NEW_TOKENS,
    bench_threshold: _BenchThresholdOpt = 0.05,
    bench_prompts: _FixBenchPromptsOpt = None,
) -> None:
    """Show the change to the launch definition as a diff; --apply carries it out safely."""
    # Taken first, before any other local: exactly the parameters above.
    args = _FixArgs(**locals())
    from dflash_doctor.fix.report import fix_exit_code

    specs = _fix_specs(args)
    ask = (apply or do_rollback) and not yes
    if ask and not sys.stdin.isatty():
        raise UsageError("--apply and --rollback change hosts: add --yes when not at a terminal")
    if ask and do_rollback and not typer.confirm(f"Roll back {len(specs)} host(s)?"):
        raise typer.Exit(0)  # "no" changes nothing: not an error
    raise typer.Exit(fix_exit_code(_fix_hosts(args, specs, ask=ask and not do_rollback)))


def _fix_specs(args: _FixArgs) -> list[HostSpec]:
    """The hosts to fix; `--offline --launch FILE` alone names a file in a repository."""
    from dflash_doctor.hosts import HostSpec
    from dflash_doctor.inventory import load_inventory

    overrides: dict[str, object] = {
        "launch_file": args.launch,
        "pid": args.pid,
        "server_port": args.port,
        "drafter_path": args.drafter,
        "target_path": args.target,
        "sglang_version": args.sglang_version,
    }
    if args.offline:
        overrides["offline"] = True
    if (
        args.offline
        and args.launch
        and not (args.hosts or args.demo or args.host_dir or args.inventory)
    ):
        # A launch file in a repository: the gate's counterpart.
        return [_override(HostSpec.of(args.launch), overrides)]
    listed = load_inventory(str(args.inventory)).select(args.limit) if args.inventory else []
    demo = args.demo and not (args.apply or args.do_rollback)
    if args.demo and not demo:
        listed.append(_demo_copy(args.do_rollback))
    return _specs(args.hosts or [], demo, args.host_dir or [], listed, overrides)


def _demo_copy(rollback: bool) -> HostSpec:
    """`fix --demo --apply` (what the demo itself suggests) works on a temporary copy of the
    demo host, never on the installed package's files; the user is told where it is."""
    import shutil
    import tempfile

    from dflash_doctor.demo import DEMO_DIR
    from dflash_doctor.hosts import load_recorded_host

    if rollback:
        raise UsageError(
            "--demo --rollback: each --demo --apply works on a new copy of the demo host; "
            "roll that copy back with --host-dir DIR --rollback"
        )
    copy = os.path.join(tempfile.mkdtemp(prefix="dflash-doctor-demo-"), "seed")
    shutil.copytree(DEMO_DIR, copy, symlinks=True)
    _say(
        f"--demo --apply: working on a copy of the demo host in {copy} (the installed demo "
        f"is never edited); look at it with: dflash-doctor check --host-dir {copy}"
    )
    return load_recorded_host(copy, name="demo-seed")


def _fix_hosts(args: _FixArgs, specs: list[HostSpec], *, ask: bool) -> list[FixReport]:
    """Plan (or apply, or roll back) each host in turn, printing each host's report. `ask`
    (--apply at a terminal without --yes): each host's plan is shown first, then asked."""
    from rich.console import Console

    from dflash_doctor.fix.session import fix_host
    from dflash_doctor.render.fix import render_fix

    ssh = _ssh(args.identity, args.known_hosts, args.ssh_config, args.accept_new_host_key)
    stamp = datetime.now().strftime("%Y%m%dT%H%M%S")
    console = Console()
    if args.bench and not args.apply:
        raise UsageError("--bench measures a fix as it is applied: add --apply")
    bench_options = (
        _bench_options(
            args.bench_contexts,
            args.bench_concurrency,
            args.bench_max_new_tokens,
            yes=args.yes,
            prompts=args.bench_prompts,
        )
        if args.bench
        else None
    )

    def run(spec: HostSpec, apply: bool, shown: PlanView | None = None) -> FixReport:
        return fix_host(
            spec,
            ssh,
            apply=apply,
            roll_back=args.do_rollback,
            stamp=stamp,
            health_timeout=args.health_timeout,
            read_timeout=args.timeout,
            bench=bench_options,
            bench_threshold=args.bench_threshold,
            local_env=_local_env() if args.offline else None,
            shown=shown,
        )

    reports = []
    for s in specs:
        if ask:
            reports.append(_asked(s, run, console))
            continue
        report = run(s, args.apply)
        render_fix(report, console)
        reports.append(report)
    return reports


def _asked(
    spec: HostSpec, run: Callable[[HostSpec, bool, PlanView | None], FixReport], console: Console
) -> FixReport:
    """At a terminal: the plan (diff, the process to stop, the relaunch) first, then the
    question; "no" leaves the host as it was (the dry run's report: exit 0). "yes" applies
    only the plan shown: one that differs by then (the host changed) is refused."""
    from dflash_doctor.render.fix import render_fix

    planned = run(spec, False, None)
    render_fix(planned, console)
    view = planned.plan
    if planned.outcome != "planned" or view is None or not (view.diff or view.command):
        return planned  # nothing to apply: nothing to ask
    if not typer.confirm(f"Apply this change to {spec.name}?", default=False):
        console.print(f"nothing changed on {spec.name}", markup=False, highlight=False)
        return planned
    report = run(spec, True, view)
    render_fix(report, console, plan=False)
    return report


# `bench`'s own options.
_BenchContextsOpt = Annotated[
    str | None,
    typer.Option("--contexts", help="context lengths (default 0.25x..8x the window)"),
]
_ConcurrencyOpt = Annotated[
    str | None, typer.Option("--concurrency", help="concurrent requests (default 1,4,16)")
]
_MaxNewTokensOpt = Annotated[
    int, typer.Option("--max-new-tokens", min=1, help="output tokens per request")
]
_TemperatureOpt = Annotated[
    float | None,
    typer.Option("--temperature", min=0.0, help="production temperature (greedy always runs)"),
]
_SeedOpt = Annotated[str, typer.Option("--seed", help="seed of the prompt token ids")]
_MaxTotalTokensOpt = Annotated[
    int, typer.Option("--max-total-tokens", min=1, help="refuse sweeps that send more")
]
_BenchYesOpt = Annotated[
    bool, typer.Option("--yes", help="load the server even if it serves traffic")
]
_BenchOutputOpt = Annotated[
    Path | None, typer.Option("--output", help="also write the JSON document here")
]
_BenchPlotOpt = Annotated[
    Path | None, typer.Option("--plot", help="draw accept length vs context to a PNG")
]
_BenchLaunchOpt = Annotated[str | None, typer.Option("--launch", help="launch file on the host")]
_PromptsOpt = Annotated[str | None, typer.Option("--prompts", help=_PromptsHelp)]
_RepeatsOpt = Annotated[
    int, typer.Option("--repeats", min=1, help="runs per cell for a 95 % interval (>= 3)")
]

_BaselinePortOpt = Annotated[
    int | None,
    typer.Option(
        "--baseline-port",
        min=1,
        max=65535,
        help="also bench the same cells on this port: the same model served without "
        "--speculative-algorithm (you start it); reports where DFLASH is slower",
    ),
]


@app.command("bench")
def bench_command(
    host: Annotated[str, typer.Argument(help="'local' or an SSH target")],
    contexts: _BenchContextsOpt = None,
    concurrency: _ConcurrencyOpt = None,
    max_new_tokens: _MaxNewTokensOpt = DEFAULT_MAX_NEW_TOKENS,
    temperature: _TemperatureOpt = None,
    seed: _SeedOpt = DEFAULT_SEED,
    max_total_tokens: _MaxTotalTokensOpt = DEFAULT_MAX_TOTAL_TOKENS,
    yes: _BenchYesOpt = False,
    prompts: _PromptsOpt = None,
    repeats: _RepeatsOpt = 3,
    baseline_port: _BaselinePortOpt = None,
    fmt: FormatOpt = Format.text,
    output: _BenchOutputOpt = None,
    plot: _BenchPlotOpt = None,
    pid: PidOpt = None,
    port: ServerPortOpt = None,
    launch: _BenchLaunchOpt = None,
    drafter: DrafterOpt = None,
    target: TargetOpt = None,
    timeout: _BudgetTimeoutOpt = None,
    identity: IdentityOpt = None,
    known_hosts: KnownHostsOpt = None,
    ssh_config: SshConfigOpt = None,
    accept_new_host_key: AcceptNewHostKeyOpt = False,
) -> None:
    """Measure acceptance on the live server across the drafter's window and concurrency."""
    from dflash_doctor.render.bench_plot import require_matplotlib

    if plot is not None:
        require_matplotlib()  # before the sweep, not after it
    options = _bench_options(
        contexts, concurrency, max_new_tokens, temperature, seed, max_total_tokens, yes, prompts,
        repeats, baseline_port,
    )  # fmt: skip
    (spec,) = _specs(
        [host],
        False,
        [],
        [],
        {
            "pid": pid,
            "server_port": port,
            "launch_file": launch,
            "drafter_path": drafter,
            "target_path": target,
        },
    )
    ssh = _ssh(identity, known_hosts, ssh_config, accept_new_host_key)
    from dflash_doctor.pipeline import within_budget

    result = within_budget(spec.name, timeout, lambda: _bench_live(spec, ssh, options))
    _show_bench(result, spec.name, fmt, output, plot)
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
