"""gather facts -> run checks -> host report, for each host; the one place they are joined.

Hosts are checked in parallel (bounded by `jobs`); each has a wall-clock budget after which
its connection is closed, so one slow or hung host never holds up the others.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from dflash_doctor.defaults import DEFAULT_HOST_TIMEOUT as DEFAULT_HOST_TIMEOUT
from dflash_doctor.defaults import DEFAULT_JOBS as DEFAULT_JOBS
from dflash_doctor.errors import DoctorError, HostUnreachable
from dflash_doctor.facts.models import Fact
from dflash_doctor.gather import gather
from dflash_doctor.hosts import HostSpec
from dflash_doctor.report import HostReport, fact_errors
from dflash_doctor.runner import run_checks
from dflash_doctor.transport.base import Transport
from dflash_doctor.transport.local import LocalTransport

if TYPE_CHECKING:
    from dflash_doctor.bench.matrix import BenchOptions
    from dflash_doctor.probes.host import ProbeOptions
    from dflash_doctor.transport.ssh import SSHOptions


def open_transport(spec: HostSpec, ssh: SSHOptions | None = None) -> Transport:
    if spec.address is None or spec.offline:
        # Offline means no host: the launch and model files are this machine's.
        return LocalTransport(spec.name)
    # Imported here so that only the SSH path loads paramiko.
    from dataclasses import replace

    from dflash_doctor.transport.ssh import SSHOptions, SSHTransport

    options = ssh or SSHOptions()
    options = replace(
        options,
        user=spec.user or options.user,
        port=spec.port or options.port,
        identity_files=((spec.identity_file,) if spec.identity_file else ())
        + options.identity_files,
        proxy_jump=spec.proxy_jump or options.proxy_jump,
    )
    return SSHTransport(spec.name, spec.address, options)


def check_host(
    spec: HostSpec,
    select: list[str] | None = None,
    *,
    ssh: SSHOptions | None = None,
    timeout: float = DEFAULT_HOST_TIMEOUT,
    probe: ProbeOptions | None = None,
    bench: BenchOptions | None = None,
) -> HostReport:
    try:
        transport = open_transport(spec, ssh)
    except DoctorError as e:
        return HostReport(host=spec.name, reachable=False, error=str(e))
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        transport.close()  # wakes whatever read is blocked on this host

    watchdog = threading.Timer(timeout, expire)
    watchdog.daemon = True
    watchdog.start()
    try:
        facts = gather(spec, transport)
        if probe is not None and not expired.is_set():
            from dflash_doctor.probes.host import probe_with

            try:
                facts.probe = Fact.of(probe_with(transport, spec, facts, probe), "probe")
            except DoctorError as e:
                facts.probe = Fact.missing(str(e), "probe")
        if bench is not None and not expired.is_set():
            from dflash_doctor.bench.evidence import bench_fact

            facts.bench = bench_fact(transport, facts, bench)
    except HostUnreachable as e:
        return HostReport(host=spec.name, reachable=False, error=str(e))
    finally:
        watchdog.cancel()
        transport.close()
    if expired.is_set():
        return HostReport(
            host=spec.name, reachable=False, error=f"{spec.name}: timed out after {timeout:g}s"
        )
    results = run_checks(facts, select)
    if facts.bench.value is not None:
        from dflash_doctor.bench.evidence import attach_bench_evidence

        attach_bench_evidence(facts, results)
    return HostReport(
        host=spec.name,
        facts=facts,
        fact_errors=fact_errors(facts),
        results=results,
    )


def check_hosts(
    specs: list[HostSpec],
    select: list[str] | None = None,
    *,
    ssh: SSHOptions | None = None,
    jobs: int = DEFAULT_JOBS,
    timeout: float = DEFAULT_HOST_TIMEOUT,
    on_done: Callable[[HostReport], None] | None = None,
    probe: ProbeOptions | None = None,
    bench: BenchOptions | None = None,
) -> list[HostReport]:
    """Check every host, at most `jobs` at a time; reports come back in the input order."""

    def one(spec: HostSpec) -> HostReport:
        report = check_host(spec, select, ssh=ssh, timeout=timeout, probe=probe, bench=bench)
        if on_done is not None:
            on_done(report)
        return report

    if len(specs) <= 1 or jobs <= 1:
        return [one(s) for s in specs]
    with ThreadPoolExecutor(max_workers=min(jobs, len(specs))) as pool:
        return list(pool.map(one, specs))
