"""`fix` between parsing and printing: how each host is planned, applied or rolled back."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from dflash_doctor.commands.inputs import bench_options, local_env, ssh
from dflash_doctor.errors import UsageError

if TYPE_CHECKING:
    from dflash_doctor.commands.options import FixArgs
    from dflash_doctor.fix.report import FixReport, PlanView
    from dflash_doctor.hosts import HostSpec

FixRun = Callable[["HostSpec", bool, "PlanView | None"], "FixReport"]


def fix_runner(args: FixArgs) -> FixRun:
    """`run(spec, apply, shown)`: one host's fix report, with the command line's settings;
    `shown` is the plan the user agreed to (a plan that differs by then is refused)."""
    from dflash_doctor.fix.session import fix_host

    options = ssh(args.identity, args.known_hosts, args.ssh_config, args.accept_new_host_key)
    stamp = datetime.now().strftime("%Y%m%dT%H%M%S")
    if args.bench and not args.apply:
        raise UsageError("--bench measures a fix as it is applied: add --apply")
    bench = (
        bench_options(
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
            options,
            apply=apply,
            roll_back=args.do_rollback,
            stamp=stamp,
            health_timeout=args.health_timeout,
            read_timeout=args.timeout,
            bench=bench,
            bench_threshold=args.bench_threshold,
            local_env=local_env() if args.offline else None,
            shown=shown,
        )

    return run
