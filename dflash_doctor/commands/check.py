"""`check` and `gate` between parsing and printing: the hosts checked, their next steps, the
report."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import date
from typing import TYPE_CHECKING

from dflash_doctor.commands.inputs import bench_options, given, lengths, local_env, ssh
from dflash_doctor.defaults import DEFAULT_HOST_TIMEOUT

if TYPE_CHECKING:
    from dflash_doctor.commands.options import CheckArgs, GateArgs
    from dflash_doctor.hosts import HostSpec
    from dflash_doctor.probes.host import ProbeOptions
    from dflash_doctor.report import HostReport, NextStep, Report

BENCH_HOST_TIMEOUT = 3600.0


def check_reports(
    args: CheckArgs,
    specs: list[HostSpec],
    chosen: list[str] | None,
    progress: Callable[[int], AbstractContextManager[Callable[[HostReport], None]]],
) -> list[HostReport]:
    """Check every host (with the probe and bench when asked), `progress` hearing each."""
    from dflash_doctor.pipeline import check_hosts

    options = ssh(
        args.identity,
        args.known_hosts,
        args.ssh_config,
        args.accept_new_host_key,
        args.connect_timeout,
    )
    bench = (
        bench_options(
            args.bench_contexts, args.bench_concurrency, args.bench_max_new_tokens, yes=args.yes
        )
        if args.bench
        else None
    )
    timeout = args.timeout
    if args.bench and timeout == DEFAULT_HOST_TIMEOUT:
        timeout = BENCH_HOST_TIMEOUT  # a sweep takes minutes on a real server
    with progress(len(specs)) as done:
        return check_hosts(
            specs,
            chosen,
            ssh=options,
            jobs=args.jobs,
            timeout=timeout,
            on_done=done,
            probe=_probe_options(args) if args.probe else None,
            bench=bench,
        )


def _probe_options(args: CheckArgs) -> ProbeOptions:
    """The probe's options: probes/ is imported only when `--probe` asks for it."""
    from dflash_doctor.probes.host import ProbeOptions

    return ProbeOptions(lengths(args.probe_contexts), args.probe_window)


def _check_hows(args: CheckArgs, listed: list[HostSpec]) -> list[list[str] | None]:
    """How each host was named, in host selection's order, to build its `fix` command."""
    hows: list[list[str] | None] = [["-I", str(args.inventory), "--limit", s.name] for s in listed]
    hows += [["--demo"] if args.demo_name == "seed" else None] if args.demo_name else []
    hows += [["--demo"]] if args.demo else []
    hows += [["--host-dir", str(d)] for d in args.host_dir or []]
    hows += [[h] for h in args.hosts or []]
    return hows


def _reach_options(args: CheckArgs) -> list[tuple[str, str | None]]:
    """The options that reach the same host and server again, for the `fix` command: pasted
    as printed, it must connect with the same key and known_hosts and pick the same server."""
    return [
        *(("-i", key) for key in args.identity or []),
        ("--known-hosts", args.known_hosts),
        ("--ssh-config", args.ssh_config),
        ("--pid", None if args.pid is None else str(args.pid)),
        ("--port", None if args.port is None else str(args.port)),
    ]


def _next_step(
    spec: HostSpec,
    how: list[str] | None,
    given: list[tuple[str, str | None]],
    host_report: HostReport,
) -> NextStep:
    """A host's next step: the pending relaunch, or the `fix` to run (none when neither)."""
    from dflash_doctor.launch_edits import describe_relaunch
    from dflash_doctor.next_step import automated, fix_command, launch_place, pending_relaunch
    from dflash_doctor.report import NextStep
    from dflash_doctor.transport.open import relaunch_refusal

    facts = host_report.facts
    pending = pending_relaunch(host_report.findings, facts) if facts is not None else None
    if pending is not None:
        written = facts.launch_file.value if facts is not None else None
        refused = relaunch_refusal(spec)
        if refused is None:  # a recorded host is never relaunched
            how_to = describe_relaunch(spec, written, written.source if written else None, refused)
            pending += f" ({how_to})"
        return NextStep(pending_relaunch=pending)
    if how is not None and automated(host_report.findings, facts):
        return NextStep(
            fix_command=fix_command(how, given),
            fix_file=launch_place(
                spec.hints.launch_file,
                None if facts is None else facts.launch_file.value or facts.launch.value,
            ),
        )
    return NextStep()


def with_next_steps(
    args: CheckArgs, specs: list[HostSpec], listed: list[HostSpec], reports: list[HostReport]
) -> list[HostReport]:
    """Each host's report with its next step: the pending relaunch, or the `fix` to run."""
    given = [
        *_reach_options(args),
        ("--launch", args.launch),
        ("--drafter", args.drafter),
        ("--target", args.target),
        ("--sglang-version", args.sglang_version),
    ]
    return [
        host_report.with_next_step(_next_step(spec, how, given, host_report))
        for spec, how, host_report in zip(specs, _check_hows(args, listed), reports, strict=True)
    ]


def check_report(args: CheckArgs, reports: list[HostReport]) -> Report:
    """`check`'s report: the hosts' reports under `--fail-on` and the inputs it was given."""
    from dflash_doctor.report import build_report

    return build_report(
        reports,
        fail_on=args.fail_on,
        fail_on_skip=args.fail_on_skip,
        given=given(
            {
                "log": ("--log", args.log),
                "launch": ("--launch", args.launch),
                "drafter": ("--drafter", args.drafter),
            }
            | {"target": ("--target", args.target)}
            | ({"launch": ("--pid", str(args.pid))} if args.pid is not None else {})
        ),
    )


def gate_report(
    args: GateArgs, specs: list[HostSpec], chosen: list[str] | None, pinned: str | None
) -> Report:
    """Check the files, then apply the waivers and the baseline (policy.py); a launch the gate
    cannot judge is an input error (exit 2), one line naming what to pass."""
    from dflash_doctor.gate_inputs import missing_inputs
    from dflash_doctor.pipeline import check_hosts
    from dflash_doctor.policy import apply_policy
    from dflash_doctor.report import build_report

    named = given({"drafter": ("--drafter", args.drafter), "target": ("--target", args.target)})
    # No host here: model names resolve in this machine's Hugging Face cache.
    checked = check_hosts(specs, chosen, jobs=1, local_env=local_env())
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
        given=named,
        input_errors=missing_inputs(checked, named),
    )
