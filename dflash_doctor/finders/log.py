"""The server log: the path given, the file the process writes through /proc/PID/fd, or the
log its runtime keeps (a container); filtered on a remote host when it is large."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from dflash_doctor.errors import (
    DoctorError,
    FactError,
    FileMissing,
    OutOfReach,
    PermissionDenied,
    Refused,
)
from dflash_doctor.facts.models import Fact, LogFacts
from dflash_doctor.facts.server_log import read_filter_output, scan_log
from dflash_doctor.finders.base import attempt
from dflash_doctor.finders.plan import PROCESS
from dflash_doctor.host_exec import HostExec
from dflash_doctor.shipped import script_source
from dflash_doctor.transport.base import Transport

# Logs this large are filtered on the host; smaller ones cost less to copy than to filter.
REMOTE_FILTER_MIN_BYTES = 8 * 1024 * 1024
# How much of a runtime-kept log (`docker logs`, `kubectl logs`) is read: its last lines.
RUNTIME_LOG_TAIL_LINES = 200_000
LOG_FILTER = "on_host/log_filter.py"


def log_path(t: Transport, given: str | None, pid: int | None) -> str | None:
    """The log path given, else the file the server's stdout or stderr is."""
    if given:
        return given
    if pid is None:
        return None
    for fd in PROCESS["log_fds"]:
        try:
            target = t.readlink(f"/proc/{pid}/fd/{fd}")
        except DoctorError:
            continue
        if target.startswith("/") and not target.startswith("/dev/"):
            return target
    return None


def find_log(
    t: Transport,
    host: str,
    given: str | None,
    pid: int | None,
    pythons: Iterator[list[str]],
    since: str | None = None,
) -> Fact[LogFacts]:
    """The server log's facts. `pythons`: interpreters that may run the log filter;
    `since`: how far back a runtime-kept log is read (`docker logs --since`)."""
    if t.log_refused is not None:
        return Fact[LogFacts].missing(t.log_refused, out_of_reach=True)
    path = log_path(t, given, pid)
    if path is None and pid is not None:
        # A container's server logs to a pipe: its runtime (docker, kubelet) keeps it.
        where = f"{t.kind} logs"
        try:
            chunks = runtime_log(t, tail_lines=RUNTIME_LOG_TAIL_LINES, since=since)
        except Refused:
            pass  # the log is a file here (local, SSH, a recorded tree)
        except DoctorError as e:
            return Fact[LogFacts].missing(f"{host}: {where}: {e}", source=where)
        else:
            return attempt(host, where, lambda: scan_log(chunks, where))
    if path is None:
        return Fact[LogFacts].missing(
            f"{host}: server log not found (give its path with --log or log_path)"
        )
    return attempt(host, path, lambda: scan_log_file(t, path, pythons))


def runtime_log(t: Transport, *, tail_lines: int, since: str | None = None) -> Iterator[bytes]:
    """The server log that the runtime keeps (`docker logs`, `kubectl logs`: the command
    `t.reach` names, run on `t.machine`), bounded to its last `tail_lines` lines and, given
    `since` (a duration such as 15m, or a time), to what was logged since then; Refused
    where the log is only a file (local, SSH, recorded): it is then found through
    /proc/PID/fd; OutOfReach where the host has no log at all (offline)."""
    if t.log_refused is not None:
        raise OutOfReach(t.log_refused)
    command = t.reach.log_command
    if command is None or t.machine is None:
        raise Refused(f"{t.host}: {t.reach.runtime_log_refused}")
    return t.machine.run_stream(command.argv(tail_lines, since), timeout=600)


def scan_log_file(t: Transport, path: str, pythons: Iterator[list[str]]) -> LogFacts:
    if t.remote and t.file_size(path) >= REMOTE_FILTER_MIN_BYTES:
        # Filter where the log lies: only the lines that matter cross the network.
        for python in pythons:
            argv = [*python, "-c", script_source(LOG_FILTER), t.command_path(path)]
            try:
                return read_filter_output(t.run_stream(argv, timeout=600), path)
            except (FactError, FileMissing, PermissionDenied):
                raise
            except DoctorError as e:
                # The filter's own words for a missing or unreadable log (its stderr).
                if "no such file" in str(e).lower() or "permission denied" in str(e).lower():
                    raise
                continue  # no usable Python there: try the next, then stream the file
    return scan_log(t.stream_file(path), path)


def filter_pythons(
    t: Transport, run_as: HostExec, launch_python: str | None, pid: int | None
) -> Iterator[list[str]]:
    """Interpreters that may run the stdlib log filter, each as a safe argv prefix; the
    next one is vetted only when the one before could not run it."""
    with contextlib.suppress(DoctorError):
        # A recorded tree's pid names no live process: our stdlib script then runs as
        # the doctor's own user, under a system Python that host_exec found safe.
        yield run_as.system_python(pid=None if t.live_refused else pid)
    with contextlib.suppress(DoctorError):
        yield [*run_as.prefix(launch_python, pid=pid), "-I"]
