"""Every command's options, each declared once: a field of the command's options value.

A field's `Annotated` metadata is its flag, help and limits (typer reads it), its default is
the option's default, and the order of the fields is the order of `--help`. cli.py turns each
class into a command (`command_signature`), so the command's body receives one frozen value,
and the modules below the CLI (commands/) read the same value: nothing lists an option twice.

Imports only typer at module level: cli.py imports this for `--help`, which must stay fast
(tests/test_startup.py). No `from __future__ import annotations`: the annotations are objects
already, so building the signatures evaluates no strings.
"""

import dataclasses
import inspect
import typing
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

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
from dflash_doctor.errors import UsageError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance


class Format(StrEnum):
    """`bench` and `probe`'s formats."""

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


def _sglang_version(value: str | None) -> str | None:
    """A declared SGLang version must read as one (X.Y or X.Y.Z, post/rc suffixes allowed)."""
    from dflash_doctor.sglang_versions import parse_version

    if value is not None and parse_version(value) is None:
        raise UsageError(f"--sglang-version {value!r}: not a version (e.g. 0.5.13, 0.5.23)")
    return value


def _sglang_version_option(help: str) -> typing.Any:
    """`--sglang-version` as each command words it, always validated as a version (typer
    declares `Option` as returning Any)."""
    return typer.Option("--sglang-version", callback=_sglang_version, help=help)


def command_signature(options: "type[DataclassInstance]") -> inspect.Signature:
    """The parameters typer reads for a command: the fields of its options class, in order."""
    hints = typing.get_type_hints(options, include_extras=True)
    empty = inspect.Parameter.empty
    return inspect.Signature(
        [
            inspect.Parameter(
                f.name,
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                default=empty if f.default is dataclasses.MISSING else f.default,
                annotation=hints[f.name],
            )
            for f in dataclasses.fields(options)
        ]
    )


REPORT_FORMAT_HELP = (
    "text (the terminal report), concise (one line per finding), github (Actions "
    "annotations), json, sarif or junit"
)
FAIL_ON_SKIP_HELP = (
    "exit 2 when a check that applies could not judge (an input missing or unusable); "
    "checks that do not apply here (no log offline, no window flag) never fail it"
)
PROMPTS_HELP = "code, prose, random (a content-free control) or FILE.jsonl (default code,prose)"

# Options several commands share (same flag, same help).
HostsArg = Annotated[list[str] | None, typer.Argument(help="hosts: 'local' or SSH targets")]
FormatOpt = Annotated[Format, typer.Option("--format", help="report format")]
ReportFormatOpt = Annotated[ReportFormat, typer.Option("--format", help=REPORT_FORMAT_HELP)]
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
BudgetTimeoutOpt = Annotated[
    float | None,
    typer.Option("--timeout", min=1, help="seconds allowed for the host (default: no limit)"),
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
HostDirOpt = Annotated[
    list[Path] | None, typer.Option("--host-dir", help="a recorded host tree (host.yaml)")
]
SelectOpt = Annotated[str | None, typer.Option("--select", help="comma-separated check ids to run")]


@dataclasses.dataclass(frozen=True, kw_only=True)
class CheckArgs:
    """`check`'s command line."""

    hosts: HostsArg = None
    demo: Annotated[bool, typer.Option("--demo", help="check the built-in demo host")] = False
    demo_name: Annotated[
        str | None,
        typer.Option(
            "--demo-host",
            help="check a named built-in demo host: seed (= --demo, SGLang 0.5.13) or v0523",
        ),
    ] = None
    host_dir: HostDirOpt = None
    fmt: ReportFormatOpt = ReportFormat.text
    fail_on: FailOnOpt = Severity.ERROR
    output: Annotated[
        Path | None,
        typer.Option("--output", help="write the --format report here (JSON for text)"),
    ] = None
    select: SelectOpt = None
    log: Annotated[str | None, typer.Option("--log", help="server log path on the host")] = None
    launch: Annotated[
        str | None, typer.Option("--launch", help="launch script or systemd unit on the host")
    ] = None
    pid: PidOpt = None
    port: ServerPortOpt = None
    drafter: DrafterOpt = None
    target: TargetOpt = None
    sglang_version: Annotated[
        str | None, _sglang_version_option("declare the host's SGLang version (X.Y.Z)")
    ] = None
    inventory: InventoryOpt = None
    limit: Annotated[
        str | None, typer.Option("--limit", help="inventory groups, labels or hosts to check")
    ] = None
    jobs: Annotated[int, typer.Option("--jobs", "-j", min=1, help="hosts checked at once")] = (
        DEFAULT_JOBS
    )
    timeout: Annotated[float, typer.Option("--timeout", min=1, help="seconds allowed per host")] = (
        DEFAULT_HOST_TIMEOUT
    )
    connect_timeout: Annotated[
        float, typer.Option("--connect-timeout", min=1, help="seconds to connect over SSH")
    ] = 10.0
    identity: IdentityOpt = None
    known_hosts: KnownHostsOpt = None
    ssh_config: SshConfigOpt = None
    accept_new_host_key: AcceptNewHostKeyOpt = False
    probe: Annotated[
        bool,
        typer.Option("--probe", help="also run the attention probe; its numbers feed findings"),
    ] = False
    probe_contexts: Annotated[
        str | None, typer.Option("--probe-contexts", help="context lengths for --probe")
    ] = None
    probe_window: Annotated[
        int | None, typer.Option("--probe-window", help="window for --probe (reduced runs)")
    ] = None
    bench: Annotated[
        bool,
        typer.Option("--bench", help="also bench the live server; its curve feeds the findings"),
    ] = False
    bench_contexts: BenchContextsOpt = None
    bench_concurrency: Annotated[
        str | None, typer.Option("--bench-concurrency", help="concurrencies for --bench")
    ] = None
    bench_max_new_tokens: Annotated[
        int, typer.Option("--bench-max-new-tokens", min=1, help="output tokens per request")
    ] = DEFAULT_MAX_NEW_TOKENS
    yes: Annotated[
        bool, typer.Option("--yes", help="with --bench: load a server that serves traffic")
    ] = False
    fail_on_skip: FailOnSkipOpt = False


@dataclasses.dataclass(frozen=True, kw_only=True)
class ProbeArgs:
    """`probe`'s command line."""

    host: Annotated[str | None, typer.Argument(help="'local' or an SSH target")] = None
    demo: Annotated[bool, typer.Option("--demo", help="probe the built-in demo host")] = False
    host_dir: Annotated[
        Path | None, typer.Option("--host-dir", help="a recorded host tree (host.yaml)")
    ] = None
    contexts: Annotated[
        str | None, typer.Option("--contexts", help="comma-separated context lengths")
    ] = None
    window: Annotated[
        int | None, typer.Option("--window", help="probe this window instead of the config's")
    ] = None
    budget_mib: Annotated[
        int, typer.Option("--budget-mib", min=64, help="memory the probe may use")
    ] = DEFAULT_BUDGET_MIB
    device: Annotated[str, typer.Option("--device", help="auto, cpu or cuda")] = "auto"
    dtype: Annotated[str, typer.Option("--dtype", help="float32 or bfloat16")] = "float32"
    weights: Annotated[
        str, typer.Option("--weights", help="random, or real (the drafter's safetensors)")
    ] = "random"
    python: Annotated[
        str | None, typer.Option("--python", help="the Python on the host that has torch")
    ] = None
    agreement_tokens: Annotated[
        int,
        typer.Option(
            "--agreement-tokens", min=16, help="draft tokens the top-1 agreement is measured over"
        ),
    ] = DEFAULT_AGREEMENT_TOKENS
    pid: PidOpt = None
    port: ServerPortOpt = None
    fmt: FormatOpt = Format.text
    plot: Annotated[
        Path | None,
        typer.Option("--plot", help="also draw divergence and draft reads to a PNG (matplotlib)"),
    ] = None
    timeout: BudgetTimeoutOpt = None
    identity: IdentityOpt = None
    known_hosts: KnownHostsOpt = None
    ssh_config: SshConfigOpt = None
    accept_new_host_key: AcceptNewHostKeyOpt = False


@dataclasses.dataclass(frozen=True, kw_only=True)
class GateArgs:
    """`gate`'s command line."""

    launch: Annotated[
        list[str] | None,
        typer.Argument(help="launch scripts, systemd units or compose files in the repository"),
    ] = None
    drafter: Annotated[
        str | None, typer.Option("--drafter", help="drafter dir, config.json or HF repo id")
    ] = None
    target: Annotated[
        str | None, typer.Option("--target", help="target dir, config.json or HF repo id")
    ] = None
    sglang_version: Annotated[
        str | None, _sglang_version_option("the SGLang version to deploy")
    ] = None
    compose_service: Annotated[
        str | None, typer.Option("--compose-service", help="service of a compose file")
    ] = None
    host: Annotated[
        str | None, typer.Option("--host", help="host name the waivers match (default: file)")
    ] = None
    labels: Annotated[
        str | None, typer.Option("--labels", help="comma-separated labels the waivers match")
    ] = None
    inventory: Annotated[
        Path | None, typer.Option("--inventory", "-I", help="gate the inventory's hosts offline")
    ] = None
    limit: Annotated[str | None, typer.Option("--limit", help="inventory groups/labels/hosts")] = (
        None
    )
    fmt: ReportFormatOpt = ReportFormat.text
    output: Annotated[
        Path | None, typer.Option("--output", help="write the --format report (json for text)")
    ] = None
    fail_on: FailOnOpt = Severity.ERROR
    waivers: Annotated[
        Path | None,
        typer.Option("--waivers", help="waiver file (default .dflash-doctor.yaml, pyproject)"),
    ] = None
    baseline: Annotated[
        Path | None, typer.Option("--baseline", help="earlier JSON report: fail on new findings")
    ] = None
    root: Annotated[Path, typer.Option("--root", help="repository root for SARIF locations")] = (
        Path(".")
    )
    select: Annotated[str | None, typer.Option("--select", help="check ids to run")] = None
    fail_on_skip: FailOnSkipOpt = False


@dataclasses.dataclass(frozen=True, kw_only=True)
class FixArgs:
    """`fix`'s command line."""

    hosts: HostsArg = None
    demo: Annotated[bool, typer.Option("--demo", help="plan the fix of the demo host")] = False
    host_dir: Annotated[
        list[Path] | None, typer.Option("--host-dir", help="a recorded host tree")
    ] = None
    inventory: InventoryOpt = None
    limit: Annotated[
        str | None, typer.Option("--limit", help="inventory groups, labels or hosts to fix")
    ] = None
    launch: Annotated[
        str | None, typer.Option("--launch", help="the launch file that starts the server")
    ] = None
    pid: PidOpt = None
    port: ServerPortOpt = None
    offline: Annotated[
        bool, typer.Option("--offline", help="a launch file in a repository, no running server")
    ] = False
    drafter: DrafterOpt = None
    target: TargetOpt = None
    sglang_version: Annotated[
        str | None, _sglang_version_option("declare the host's SGLang version")
    ] = None
    apply: Annotated[
        bool,
        typer.Option("--apply", help="back up, write, relaunch, verify, roll back on failure"),
    ] = False
    yes: Annotated[bool, typer.Option("--yes", help="do not ask before --apply")] = False
    do_rollback: Annotated[
        bool, typer.Option("--rollback", help="restore the last backup and relaunch")
    ] = False
    health_timeout: Annotated[
        float, typer.Option("--health-timeout", min=1, help="seconds to wait for /health")
    ] = 300.0
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout",
            min=1,
            help="seconds allowed to read each host and plan its fix (default: no limit)",
        ),
    ] = None
    identity: IdentityOpt = None
    known_hosts: KnownHostsOpt = None
    ssh_config: SshConfigOpt = None
    accept_new_host_key: AcceptNewHostKeyOpt = False
    bench: Annotated[
        bool,
        typer.Option("--bench", help="with --apply: bench before and after, keep only if it helps"),
    ] = False
    bench_contexts: BenchContextsOpt = None
    bench_concurrency: Annotated[
        str | None, typer.Option("--bench-concurrency", help="concurrent requests for --bench")
    ] = None
    bench_max_new_tokens: Annotated[
        int, typer.Option("--bench-max-new-tokens", min=1, help="tokens generated per request")
    ] = DEFAULT_MAX_NEW_TOKENS
    bench_threshold: Annotated[
        float,
        typer.Option(
            "--bench-threshold",
            min=0.0,
            max=1.0,
            help="largest loss of accept length beyond the window that keeps a fix",
        ),
    ] = 0.05
    bench_prompts: Annotated[str | None, typer.Option("--bench-prompts", help=PROMPTS_HELP)] = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class BenchArgs:
    """`bench`'s command line."""

    host: Annotated[str, typer.Argument(help="'local' or an SSH target")]
    contexts: Annotated[
        str | None,
        typer.Option("--contexts", help="context lengths (default 0.25x..8x the window)"),
    ] = None
    concurrency: Annotated[
        str | None, typer.Option("--concurrency", help="concurrent requests (default 1,4,16)")
    ] = None
    max_new_tokens: Annotated[
        int, typer.Option("--max-new-tokens", min=1, help="output tokens per request")
    ] = DEFAULT_MAX_NEW_TOKENS
    temperature: Annotated[
        float | None,
        typer.Option("--temperature", min=0.0, help="production temperature (greedy always runs)"),
    ] = None
    seed: Annotated[str, typer.Option("--seed", help="seed of the prompt token ids")] = DEFAULT_SEED
    max_total_tokens: Annotated[
        int, typer.Option("--max-total-tokens", min=1, help="refuse sweeps that send more")
    ] = DEFAULT_MAX_TOTAL_TOKENS
    yes: Annotated[
        bool, typer.Option("--yes", help="load the server even if it serves traffic")
    ] = False
    prompts: Annotated[str | None, typer.Option("--prompts", help=PROMPTS_HELP)] = None
    repeats: Annotated[
        int, typer.Option("--repeats", min=1, help="runs per cell for a 95 % interval (>= 3)")
    ] = 3
    baseline_port: Annotated[
        int | None,
        typer.Option(
            "--baseline-port",
            min=1,
            max=65535,
            help="also bench the same cells on this port: the same model served without "
            "--speculative-algorithm (you start it); reports where DFLASH is slower",
        ),
    ] = None
    fmt: FormatOpt = Format.text
    output: Annotated[
        Path | None, typer.Option("--output", help="also write the JSON document here")
    ] = None
    plot: Annotated[
        Path | None, typer.Option("--plot", help="draw accept length vs context to a PNG")
    ] = None
    pid: PidOpt = None
    port: ServerPortOpt = None
    launch: Annotated[str | None, typer.Option("--launch", help="launch file on the host")] = None
    drafter: DrafterOpt = None
    target: TargetOpt = None
    timeout: BudgetTimeoutOpt = None
    identity: IdentityOpt = None
    known_hosts: KnownHostsOpt = None
    ssh_config: SshConfigOpt = None
    accept_new_host_key: AcceptNewHostKeyOpt = False
