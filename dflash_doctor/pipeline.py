"""gather facts -> run checks -> host report, for each host; the one place they are joined.

Hosts are checked in parallel (bounded by `jobs`); each has a wall-clock budget after which
its connection is closed, so one slow or hung host never holds up the others.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, TypeVar

from dflash_doctor.defaults import DEFAULT_HOST_TIMEOUT as DEFAULT_HOST_TIMEOUT
from dflash_doctor.defaults import DEFAULT_JOBS as DEFAULT_JOBS
from dflash_doctor.errors import DoctorError, HostUnreachable, ServerChoice, one_line
from dflash_doctor.facts.models import Fact
from dflash_doctor.gather import gather
from dflash_doctor.hosts import HostSpec
from dflash_doctor.report import HostReport, fact_errors
from dflash_doctor.runner import run_checks
from dflash_doctor.transport.base import Transport
from dflash_doctor.transport.open import open_transport as open_transport

if TYPE_CHECKING:
    from dflash_doctor.bench.matrix import BenchOptions
    from dflash_doctor.probes.host import ProbeOptions
    from dflash_doctor.transport.ssh_options import SSHOptions


T = TypeVar("T")
# Set on Ctrl-C: every host still running reports "cancelled" at once.
CANCEL = threading.Event()
_POLL_S = 0.2


def check_host(
    spec: HostSpec,
    select: list[str] | None = None,
    *,
    ssh: SSHOptions | None = None,
    timeout: float = DEFAULT_HOST_TIMEOUT,
    probe: ProbeOptions | None = None,
    bench: BenchOptions | None = None,
    local_env: Mapping[str, str] | None = None,
) -> HostReport:
    """One host's report, within its budget, whatever its data does.

    The work runs in a daemon thread: the budget then covers CPU work too (a parser that
    spins is abandoned, not waited for), and any exception becomes this host's one line.
    """
    if spec.invalid is not None:
        return HostReport(host=spec.name, error=one_line(spec.invalid))
    box: list[HostReport] = []
    transports: list[Transport] = []

    def work() -> None:
        try:
            box.append(_check_host(spec, select, ssh, timeout, probe, bench, transports, local_env))
        except Exception as e:  # one host's bad data never stops the run
            box.append(HostReport(host=spec.name, error=_crash_line(spec.name, e)))

    thread = threading.Thread(target=work, name=f"host-{spec.name}", daemon=True)
    start = time.monotonic()
    thread.start()
    deadline = start + timeout
    while thread.is_alive() and time.monotonic() < deadline and not _cancelled():
        thread.join(min(_POLL_S, max(deadline - time.monotonic(), 0.001)))
    if box and time.monotonic() - start <= timeout:
        report = box[0]
        if report.error is None:
            return report
        return report.model_copy(update={"error": one_line(report.error)})
    for t in transports:
        t.close()  # wakes whatever read is blocked on this host
    why = "cancelled" if _cancelled() else f"timed out after {timeout:g}s"
    return HostReport(host=spec.name, reachable=False, error=f"{spec.name}: {why}")


def within_budget(host: str, timeout: float | None, work: Callable[[], T]) -> T:
    """`work()` (one host's `bench` or `probe`) within `timeout` seconds of wall time; None:
    no budget. It runs in a daemon thread, so the budget covers a peer that drips bytes and
    CPU work alike; past it HostUnreachable ("ran past --timeout": exit 3) and the work is
    abandoned (the process then ends, closing its connections). Its own error is raised
    here as it was."""
    if timeout is None:
        return work()
    box: list[T | BaseException] = []

    def run() -> None:
        try:
            box.append(work())
        except BaseException as e:  # raised again in the caller's thread
            box.append(e)

    thread = threading.Thread(target=run, name=f"host-{host}", daemon=True)
    start = time.monotonic()
    thread.start()
    while thread.is_alive() and time.monotonic() - start < timeout and not _cancelled():
        thread.join(min(_POLL_S, max(timeout - (time.monotonic() - start), 0.001)))
    if not box:
        why = "cancelled" if _cancelled() else f"ran past --timeout ({timeout:g}s)"
        raise HostUnreachable(f"{host}: {why}")
    if isinstance(box[0], BaseException):
        raise box[0]
    return box[0]


def _cancelled() -> bool:
    # Also when the main thread has gone (interrupted elsewhere): never hold up the exit.
    return CANCEL.is_set() or not threading.main_thread().is_alive()


def _crash_line(host: str, e: BaseException) -> str:
    text = str(e).splitlines()[0][:200] if str(e) else ""
    return f"{host}: cannot process this host's data: {type(e).__name__}" + (
        f": {text}" if text else ""
    )


def _check_host(
    spec: HostSpec,
    select: list[str] | None,
    ssh: SSHOptions | None,
    timeout: float,
    probe: ProbeOptions | None,
    bench: BenchOptions | None,
    transports: list[Transport],
    local_env: Mapping[str, str] | None = None,
) -> HostReport:
    try:
        transport = open_transport(spec, ssh)
    except DoctorError as e:
        return HostReport(host=spec.name, reachable=False, error=str(e))
    transports.append(transport)
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        transport.close()  # wakes whatever read is blocked on this host

    watchdog = threading.Timer(timeout, expire)
    watchdog.daemon = True
    watchdog.start()
    try:
        facts = gather(spec, transport, local_env=local_env)
        if probe is not None and not expired.is_set():
            from dflash_doctor.probes.host import probe_with

            try:
                probed = Fact.of(probe_with(transport, spec, facts, probe), "probe")
            except DoctorError as e:
                probed = Fact.missing(str(e), "probe")
            facts = facts.model_copy(update={"probe": probed})
        if bench is not None and not expired.is_set():
            from dflash_doctor.bench.evidence import bench_fact

            facts = facts.model_copy(update={"bench": bench_fact(transport, facts, bench)})
    except HostUnreachable as e:
        return HostReport(host=spec.name, reachable=False, error=str(e))
    except ServerChoice as e:  # several servers, or the pid named is gone: exit 2, listed
        return HostReport(host=spec.name, error=str(e))
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
    local_env: Mapping[str, str] | None = None,
) -> list[HostReport]:
    """Check every host, at most `jobs` at a time; reports come back in the input order.

    Ctrl-C cancels promptly: hosts still running report "cancelled" and the
    KeyboardInterrupt goes on to the caller.
    """
    CANCEL.clear()

    def one(spec: HostSpec) -> HostReport:
        report = check_host(
            spec, select, ssh=ssh, timeout=timeout, probe=probe, bench=bench, local_env=local_env
        )
        if on_done is not None and not CANCEL.is_set():
            on_done(report)
        return report

    if len(specs) <= 1 or jobs <= 1:
        try:
            return [one(s) for s in specs]
        except KeyboardInterrupt:
            CANCEL.set()
            raise
    pool = ThreadPoolExecutor(max_workers=min(jobs, len(specs)))
    try:
        futures = [pool.submit(one, s) for s in specs]
        # Wait in slices: a SIGINT delivered to another thread only reaches the main thread
        # when it runs Python code, which a plain blocking wait would never do.
        while not all(f.done() for f in futures):
            wait(futures, timeout=_POLL_S, return_when=FIRST_EXCEPTION)
        return [f.result() for f in futures]
    except KeyboardInterrupt:
        CANCEL.set()
        raise
    finally:
        pool.shutdown(wait=not CANCEL.is_set(), cancel_futures=True)
