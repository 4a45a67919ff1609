"""`fix --apply`: back up, write, relaunch, wait for health, re-check, roll back on failure.

Everything that changes a host is here, and only runs when the user gave --apply.
"""

from __future__ import annotations

import contextlib
import posixpath
import shlex
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from dflash_doctor.checks.views import SPAN_CHECKS, span_mismatch
from dflash_doctor.errors import DoctorError, FileMissing, PermissionDenied, TransportError
from dflash_doctor.facts.models import HostFacts, LaunchArgs
from dflash_doctor.facts.runtime import server_address
from dflash_doctor.fix.edits import EDITABLE
from dflash_doctor.fix.launch_sources import source_for
from dflash_doctor.fix.plan import FixPlan
from dflash_doctor.fix.run_as import RunAs, relaunch_as
from dflash_doctor.gather import gather
from dflash_doctor.host_exec import HostExec
from dflash_doctor.hosts import HostSpec
from dflash_doctor.redact import redact_text
from dflash_doctor.runner import run_checks
from dflash_doctor.transport.base import Transport

if TYPE_CHECKING:
    from dflash_doctor.fix.bench_step import BenchStep

BACKUP_TAG = ".dflash-doctor-"
BACKUP_SUFFIX = ".bak"
LOCK_SUFFIX = ".dflash-doctor.lock"
# The health wait, run on the host: asked directly (no proxy from the environment), a
# redirect followed only on the server's own scheme, address and port, the answer read
# bounded (issue 22: urlopen followed a redirect anywhere, as the main client once did).
HEALTH_PROBE = (
    "import sys, urllib.error, urllib.parse, urllib.request\n"
    "url = sys.argv[1]\n"
    "def home(u):\n"
    "    p = urllib.parse.urlsplit(u)\n"
    "    return p.scheme, (p.hostname or '').lower(), p.port or {'https': 443}.get(p.scheme, 80)\n"
    "class Stay(urllib.request.HTTPRedirectHandler):\n"
    "    def redirect_request(self, req, fp, code, msg, headers, newurl):\n"
    "        if home(urllib.parse.urljoin(req.full_url, newurl)) != home(url):\n"
    "            raise urllib.error.HTTPError(\n"
    "                req.full_url, code, 'redirect off the server refused', headers, fp)\n"
    "        return super().redirect_request(req, fp, code, msg, headers, newurl)\n"
    "opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), Stay)\n"
    "try:\n"
    "    opener.open(url, timeout=3).read(1 << 16)\n"
    "except Exception as e:\n"
    "    sys.exit(str(e)[:200])\n"
)
STOP_WAIT_S = 30.0
# Room the backup and the rewritten file need beside the launch file, beyond their sizes.
SPACE_MARGIN_BYTES = 1 << 20
# Starts a script detached in its own session and prints that session's id ($! is its
# leader: a background child of a non-interactive sh is no group leader, so setsid does not
# fork). Every host path goes in as a positional argument, never into the shell text.
START_DETACHED = (
    'cd "$1" || exit 1; out=$2; shift 2; setsid nohup "$@" >>"$out" 2>&1 </dev/null & echo $!'
)

Status = Literal["unchanged", "written", "applied", "rolled_back", "failed"]


@dataclass
class Outcome:
    status: Status
    message: str
    backup: str | None = None
    log_tail: list[str] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)


def backup_path(source: str, stamp: str) -> str:
    return f"{source}{BACKUP_TAG}{stamp}{BACKUP_SUFFIX}"


class Applier:
    def __init__(self, spec: HostSpec, transport: Transport, health_timeout: float) -> None:
        self.spec = spec
        self.t = transport
        self.health_timeout = health_timeout
        self.steps: list[str] = []
        # The session the doctor started the server in (a script relaunch): what a rollback
        # stops, and what "has the new server exited" watches. Never "the first sglang".
        self.started_session: int | None = None
        self.stopped: int | None = None
        self.log_offset: int | None = None
        # Who the script relaunch runs as: read from the server before it is stopped, and
        # kept for the rollback's restart (the old server is gone by then).
        self.run_as: RunAs | None = None

    def owner_of(self, pid: int | None, source: str) -> RunAs:
        """Who a script relaunch runs as (fix/run_as.py), read once, before any stop."""
        if self.run_as is None:
            self.run_as = relaunch_as(self.t, self.spec, pid, source)
        return self.run_as

    def _sudo(self, argv: list[str]) -> list[str]:
        return ["sudo", "-n", *argv] if self.spec.fix.sudo else argv

    def _run(self, argv: list[str], timeout: float = 60, *, shown: bool = True) -> bytes:
        # A step is shown as a command line someone could paste, never as a Python list;
        # `shown=False`: the caller says the step itself, once (the detached start).
        if shown:
            self.steps.append(shlex.join(argv))
        res = self.t.run(argv, timeout=timeout)
        if not res.ok:
            err = res.stderr.decode("utf-8", "replace").strip().splitlines()
            raise TransportError(
                f"{self.spec.name}: {argv[0]} failed: {err[-1] if err else res.returncode}"
            )
        return res.stdout

    # -- files ----------------------------------------------------------------------------

    def real_path(self, source: str) -> str:
        """The file a symlinked launch file points to: edits go through the link."""
        return self.t.real_path(source)

    def real_dir(self, source: str) -> str:
        """`source` with only its directory resolved: equal to real_path unless the file
        itself is a link (a relative `--launch` path is not one)."""
        parent = posixpath.dirname(source) or "."
        try:
            return posixpath.join(self.t.real_path(parent), posixpath.basename(source))
        except DoctorError:
            return source

    def write(self, source: str, data: bytes, mode: int) -> None:
        self.t.write_file(source, data, mode=mode)

    def backup(self, source: str, stamp: str) -> tuple[str, bytes, int]:
        path = source
        old = self.t.read_file(path, max_bytes=1 << 20)
        mode = self.t.file_mode(path)
        bak = backup_path(source, stamp)
        try:
            # Edited twice in one run (several hosts in one inventory): keep the first state.
            self.t.file_size(bak)
            self.steps.append(f"kept the backup {bak} made earlier in this run")
        except DoctorError:
            self.write(bak, old, mode)
            self.steps.append(f"backed up {source} to {bak}")
        return bak, old, mode

    def lock(self, source: str) -> str:
        """One apply or rollback per launch file at a time: a directory made atomically."""
        lock = f"{source}{LOCK_SUFFIX}"
        try:
            self.t.make_dir(lock)
        except (FileMissing, PermissionDenied) as e:
            raise TransportError(f"{lock}: cannot lock: {e}") from None
        except TransportError:
            raise TransportError(_locked(lock)) from None
        return lock

    def unlock(self, lock: str) -> None:
        with contextlib.suppress(DoctorError):
            self.t.remove_dir(lock)

    def check_space(self, source: str, size: int) -> None:
        """Enough free space for the backup and the new file, checked before anything stops."""
        free = self.t.free_bytes(posixpath.dirname(source) or ".")
        if free is None:
            return  # the host cannot say: the atomic writes still fail cleanly
        need = 2 * size + SPACE_MARGIN_BYTES
        if free < need:
            raise TransportError(
                f"{self.spec.name}: only {free} bytes free beside {source}, {need} needed for "
                "the backup and the new file; nothing was changed"
            )

    # -- the server -----------------------------------------------------------------------

    def _alive(self, pid: int, *, group: bool = False) -> bool:
        target = f"-{pid}" if group else str(pid)
        try:
            return self.t.run(self._sudo(["kill", "-0", "--", target]), timeout=10).ok
        except DoctorError:
            return True  # cannot tell: assume it still runs

    def _stop(self, pid: int, *, group: bool = False) -> None:
        """Stop a process (or process group); one that has already exited is fine."""
        target = f"-{pid}" if group else str(pid)
        if not self._alive(pid, group=group):
            self.steps.append(f"{'session' if group else 'process'} {pid} had already exited")
            return
        res = self.t.run(self._sudo(["kill", "-TERM", "--", target]), timeout=10)
        self.steps.append(f"kill -TERM {target}")
        if not res.ok and self._alive(pid, group=group):
            err = res.stderr.decode("utf-8", "replace").strip().splitlines()
            raise TransportError(
                f"{self.spec.name}: cannot stop {target}: {err[-1] if err else res.returncode}"
            )
        deadline = time.monotonic() + STOP_WAIT_S
        while time.monotonic() < deadline:
            if not self._alive(pid, group=group):
                return
            time.sleep(0.2)
        self.t.run(self._sudo(["kill", "-KILL", "--", target]), timeout=10)
        self.steps.append(f"kill -KILL {target}")

    def start_argv(self, source: str) -> list[str]:
        """How to start a launch script; checked before anything is stopped.

        A script without the execute bit starts with the interpreter of its `#!` line
        (or /bin/sh), as the shell would if asked to source it.
        """
        path = source
        head = self.t.read_file(path, max_bytes=1 << 20)[:256]
        if self.t.file_mode(path) & 0o111:
            return [source]
        if head.startswith(b"#!"):
            words = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
            if words and words[0].startswith("/"):
                interp = words[:2]
                self._run(["test", "-x", interp[0]], timeout=10)
                return [*interp, source]
            raise TransportError(f"{self.spec.name}:{source}: not executable, bad #! line")
        return ["/bin/sh", source]

    def relaunch(self, launch: LaunchArgs, source: str, pid: int | None, log: str | None) -> None:
        budget = max(self.health_timeout, 30.0)
        if self.spec.fix.relaunch:
            self._run(["sh", "-c", self.spec.fix.relaunch], timeout=budget)
            return
        commands = source_for(launch.kind).relaunch(source, self.spec.hints.compose_service)
        if commands is not None:  # a service manager restarts it
            for i, argv in enumerate(commands):
                last = i == len(commands) - 1
                self._run(self._sudo(argv), timeout=budget if last else 60)
            return
        command = self.start_argv(source)  # can it start? before anything is stopped
        run_as = self.owner_of(pid, source)  # as whom? also before anything is stopped
        if self.started_session is not None:
            self._stop(self.started_session, group=True)
            self.started_session = None
        elif pid is not None:
            self._stop(pid)
            self.stopped = pid
        out = log or f"{source}.log"
        self.log_offset = self._size(out)
        where = posixpath.dirname(source) or "."
        started = self._run(
            [*run_as.prefix, "sh", "-c", START_DETACHED, "sh", where, out, *command], shown=False
        )
        # One step, as the command line a shell would run (what START_DETACHED does), and as
        # whom: the environment's values are never shown.
        line = (
            f"cd {shlex.quote(where)} && setsid nohup {shlex.join(command)} "
            f">>{shlex.quote(out)} 2>&1 </dev/null & ({run_as.shown})"
        )
        text = started.decode("ascii", "replace").strip()
        if text.isascii() and text.isdigit():
            self.started_session = int(text)
            self.steps.append(f"started in session {text}: {line}")
        else:
            self.steps.append(f"started (no session id came back): {line}")

    def _size(self, path: str) -> int | None:
        try:
            return self.t.file_size(path)
        except DoctorError:
            return 0

    def server_pid(self) -> int | None:
        """The SGLang server in the session the doctor started, if it is up."""
        if self.started_session is None:
            return None
        try:
            res = self.t.run(["pgrep", "-s", str(self.started_session)], timeout=10)
        except DoctorError:
            return None
        for word in res.stdout.split():
            if not word.isdigit():
                continue
            try:
                cmd = self.t.read_file((f"/proc/{int(word)}/cmdline"), max_bytes=1 << 20)
            except DoctorError:
                continue
            if b"launch_server" in cmd or b"sglang\0serve" in cmd:
                return int(word)
        return None

    def health_url(self, launch: LaunchArgs) -> str:
        if self.spec.fix.health_url:
            return self.spec.fix.health_url
        port = 30000
        for i, arg in enumerate(launch.argv):
            nxt = launch.argv[i + 1] if i + 1 < len(launch.argv) else ""
            if arg == "--port" and nxt.isascii() and nxt.isdigit() and len(nxt) <= 5:
                port = int(nxt)
            elif arg.startswith("--port=") and arg[7:].isascii() and arg[7:].isdigit():
                port = int(arg[7:12])
        return f"http://127.0.0.1:{port}/health"

    def wait_healthy(self, launch: LaunchArgs) -> str | None:
        """None when healthy, else why not; stops as soon as the started server has exited."""
        url = self.health_url(launch)
        try:
            python = HostExec(self.t, self.spec).system_python()
        except DoctorError as e:
            return f"cannot wait for {url}: {e}"
        deadline = time.monotonic() + self.health_timeout
        why = "no answer"
        while time.monotonic() < deadline:
            try:
                res = self.t.run([*python, "-c", HEALTH_PROBE, url], timeout=10)
            except DoctorError as e:
                res = None
                why = str(e)
            if res is not None:
                if res.ok:
                    self.steps.append(f"healthy: {url}")
                    return None
                why = res.stderr.decode("utf-8", "replace").strip()[-200:] or why
            if self.started_session is not None and not self._alive(
                self.started_session, group=True
            ):
                return f"the relaunched server exited before {url} answered ({why})"
            time.sleep(0.5)
        return f"{url} not healthy after {self.health_timeout:g}s ({why})"

    def log_tail(self, facts: HostFacts | None, lines: int = 20) -> list[str]:
        """The server log's last lines, only those written since the relaunch when known."""
        path = self.spec.hints.log_path or (facts.log.source if facts is not None else None)
        if not path:
            return []
        try:
            if self.log_offset is not None:
                res = self.t.run(
                    ["tail", "-c", f"+{self.log_offset + 1}", "--", self.t.command_path(path)],
                    timeout=10,
                )
                text = res.stdout[-(64 * 1024) :]
            else:
                argv = ["tail", "-n", str(lines), "--", self.t.command_path(path)]
                res = self.t.run(argv, timeout=10)
                text = res.stdout
        except DoctorError:
            return []
        return [redact_text(line) for line in text.decode("utf-8", "replace").splitlines()[-lines:]]


def _locked(lock: str) -> str:
    return (
        f"another dflash-doctor apply or rollback holds {lock}; if none runs, "
        f"remove that directory and retry"
    )


def apply_plan(
    spec: HostSpec,
    transport: Transport,
    plan: FixPlan,
    facts: HostFacts,
    *,
    stamp: str,
    health_timeout: float = 300.0,
    bench: BenchStep | None = None,
) -> Outcome:
    if not plan.changes:
        return Outcome("unchanged", "nothing to change: the launch already has every fix")
    if plan.source is None or plan.new_text is None or plan.launch is None:
        return Outcome(
            "failed", "no launch file to edit; start the server with: " + (plan.new_command or "?")
        )
    if bench is not None and transport.live_refused is None:
        bench.before()  # before any change: a failure here changes nothing
    a = Applier(spec, transport, health_timeout)
    try:
        source = a.real_path(plan.source)
        if source != a.real_dir(plan.source):
            a.steps.append(f"{plan.source} is a link: editing {source}")
        lock = a.lock(source)
    except DoctorError as e:
        return Outcome("failed", f"nothing changed: {e}", steps=a.steps)
    try:
        return _apply_locked(a, spec, plan, facts, source, stamp, bench)
    finally:
        a.unlock(lock)


def _apply_locked(
    a: Applier,
    spec: HostSpec,
    plan: FixPlan,
    facts: HostFacts,
    source: str,
    stamp: str,
    bench: BenchStep | None,
) -> Outcome:
    assert plan.new_text is not None and plan.launch is not None
    live = a.t.relaunch_refused is None
    try:
        current = a.t.read_file(source, max_bytes=1 << 20)
        if plan.old_text is not None and current.decode("utf-8", "replace") != plan.old_text:
            return Outcome(
                "failed",
                f"nothing changed: {source} changed since it was read; run fix again",
                steps=a.steps,
            )
        new = plan.new_text.encode("utf-8")
        a.check_space(source, len(current) + len(new))
        managed = source_for(plan.launch.kind).managed
        pid = spec.hints.pid or facts.server_pid()
        if live and not managed and not spec.fix.relaunch:
            a.start_argv(source)  # the relaunch must be able to start before anything stops
            a.owner_of(pid, source)  # and as the server's owner, or not at all
        bak, old, mode = a.backup(source, stamp)
        a.write(source, new, mode)
        wrong = _written_runs(a, plan, source, new, spec.hints.compose_service)
        if wrong is not None:
            a.write(source, old, mode)
            return Outcome(
                "failed", f"nothing relaunched, {source} restored: {wrong}", bak, steps=a.steps
            )
    except DoctorError as e:
        return Outcome(
            "failed", f"nothing relaunched, the server runs as before: {e}", steps=a.steps
        )
    a.steps.append(f"wrote {source}")
    if not live:
        # The steps name the file and its backup: the outcome says only what follows.
        return Outcome("written", "written; `--rollback` restores the backup", bak, steps=a.steps)
    log = facts.log.value.path if facts.log.value is not None else spec.hints.log_path
    failure, new_facts = _relaunch_verified(a, spec, plan, plan.launch, source, pid, log, bench)
    if failure is None:
        return Outcome("applied", f"applied to {source} and verified", bak, steps=a.steps)
    tail = a.log_tail(new_facts or facts)
    return _roll_back(a, plan.launch, source, bak, old, mode, pid, log, failure, tail)


def _written_runs(
    a: Applier, plan: FixPlan, source: str, new: bytes, service: str | None
) -> str | None:
    """Why the file now on the host would not run the planned command, or None: it is read
    back (the bytes written, then parsed as its runner reads it, its sourced files through
    the host), so what is judged is the file, not the old process's command line."""
    assert plan.launch is not None
    written = a.t.read_file(source, max_bytes=1 << 20)
    if written != new:
        return f"{source} does not hold what was written"
    kind = source_for(plan.launch.kind)
    if not kind.file_backed:
        return None  # the inventory: its rewrite was proved by loading it (fix/edits.py)

    def read(path: str) -> bytes:
        return a.t.read_file(path, max_bytes=1 << 20)

    runs = kind.parse(written, source=source, path=source, service=service, read=read)
    if plan.new_argv is not None and runs.argv != plan.new_argv:
        return f"{source} as written would not run the planned command"
    return None


def _followed(spec: HostSpec, launch: LaunchArgs, plan: FixPlan, new_pid: int | None) -> HostSpec:
    """The host as it is after a relaunch: the old pid is gone, so the server is followed by
    the pid the doctor started, else (systemd, compose, a relaunch command) by the port the
    new launch listens on, never by a stale pid nor a pick among several servers."""
    if new_pid is not None:
        return spec.override(pid=new_pid, server_port=None)
    port = server_address(launch.model_copy(update={"argv": plan.new_argv or launch.argv}))[1]
    return spec.override(pid=None, server_port=port)


def _relaunch_verified(
    a: Applier,
    spec: HostSpec,
    plan: FixPlan,
    launch: LaunchArgs,
    source: str,
    pid: int | None,
    log: str | None,
    bench: BenchStep | None,
) -> tuple[str | None, HostFacts | None]:
    """Relaunch on the written file, wait for health, re-gather and re-check: (why it failed,
    None when verified; the re-gathered facts when it got that far, for the log tail). Every
    error, Ctrl-C included, is a failure here, so the caller always rolls back on one."""
    failure: str | None = None
    new_facts: HostFacts | None = None
    try:
        a.relaunch(launch, source, pid, log)
        failure = a.wait_healthy(launch)
        new_pid = a.server_pid() if failure is None else None
        if failure is None and a.started_session is not None and new_pid is None:
            # /health answered, but not from the server the doctor started: never verify
            # some other process (another server on the host) in its place.
            failure = f"the relaunched server (session {a.started_session}) is not running"
        if failure is None:
            new_facts = gather(_followed(spec, launch, plan, new_pid), a.t)
            # Still failing: a check that still asks for a launch edit (an upgrade it also
            # asks for is a manual step the edit never claimed to do).
            still = [
                r.check_id
                for r in run_checks(new_facts, plan.check_ids)
                if any(x.action in EDITABLE for f in r.findings for x in f.fixes)
            ]
            if still:
                failure = f"after the relaunch {', '.join(still)} still fail"
            elif set(plan.check_ids) & set(SPAN_CHECKS):
                # Success means the re-gathered served spans equal the trained ones
                # (version, flag and the new log together), not merely compact_cache=True.
                mismatch = span_mismatch(new_facts)
                if mismatch is not None:
                    failure = f"after the relaunch the served spans differ: {mismatch}"
            if failure is None and bench is not None:
                failure = bench.after()
    except DoctorError as e:
        failure = str(e)
    except KeyboardInterrupt:
        failure = "interrupted (Ctrl-C)"
    return failure, new_facts


def _roll_back(
    a: Applier,
    launch: LaunchArgs,
    source: str,
    bak: str,
    old: bytes,
    mode: int,
    pid: int | None,
    log: str | None,
    failure: str,
    tail: list[str],
) -> Outcome:
    """The old file, the old server; every failure says what is where and how to restore."""
    try:
        a.write(source, old, mode)
        a.steps.append(f"restored {source} from {bak}")
    except DoctorError as e:
        return Outcome(
            "failed",
            f"fix failed: {failure}; and {source} could not be restored ({e}). The original is "
            f"in {bak}: restore it with `cp -p {bak} {source}` and start the server again",
            bak,
            tail,
            a.steps,
        )
    stopped = a.stopped is not None or a.started_session is not None or bool(a.spec.fix.relaunch)
    stopped = stopped or source_for(launch.kind).managed
    back: str | None
    try:
        if stopped:
            a.relaunch(launch, source, None, log)
            back = a.wait_healthy(launch)
        else:
            back = None
            a.steps.append("the running server was never stopped: nothing to relaunch")
    except DoctorError as e:
        back = str(e)
    except KeyboardInterrupt:
        back = "interrupted (Ctrl-C) while restarting the old server"
    status: Status = "rolled_back" if back is None else "failed"
    msg = f"fix failed: {failure}; rolled back {source} from {bak}" + (
        ""
        if back is None
        else f", but the old server did not come back: {back}. Start it with {source}"
    )
    return Outcome(status, msg, bak, tail, a.steps)


def describe_relaunch(
    spec: HostSpec, launch: LaunchArgs | None, source: str | None, refused: str | None
) -> str:
    """What `fix --apply` does after the write; `refused`: the transport's relaunch_refused."""
    if refused is not None:
        return "nothing is relaunched (offline or recorded host): only the file is written"
    if spec.fix.relaunch:
        return f"run the configured relaunch command: {spec.fix.relaunch}"
    if launch is None or source is None:
        return "no launch file: restart the server with the new command yourself"
    return source_for(launch.kind).describe(source, spec.hints.compose_service)


def backups(transport: Transport, spec: HostSpec, source: str) -> list[str]:
    """This launch file's backups, oldest first (stamps sort by time)."""
    directory = posixpath.dirname(source) or "."
    name = posixpath.basename(source)
    try:
        entries = transport.list_dir(directory)
    except DoctorError:
        return []
    ours = sorted(
        e for e in entries if e.startswith(name + BACKUP_TAG) and e.endswith(BACKUP_SUFFIX)
    )
    return [posixpath.join(directory, e) for e in ours]


def latest_backup(transport: Transport, spec: HostSpec, source: str) -> str | None:
    found = backups(transport, spec, source)
    return found[-1] if found else None


def rollback(
    spec: HostSpec,
    transport: Transport,
    source: str,
    facts: HostFacts,
    launch: LaunchArgs,
    health_timeout: float,
) -> Outcome:
    """Restore the newest backup that differs from the file now, and relaunch.

    A backup equal to the current file (an apply that ran over an already fixed file) is
    skipped: restoring it would change nothing.
    """
    a = Applier(spec, transport, health_timeout)
    try:
        real = a.real_path(source)
        lock = a.lock(real)
    except DoctorError as e:
        return Outcome("failed", f"nothing changed: {e}")
    try:
        current = transport.read_file(real, max_bytes=1 << 20)
        chain = backups(transport, spec, source)
        bak = data = None
        for candidate in reversed(chain):
            content = transport.read_file(candidate, max_bytes=1 << 20)
            if content != current:
                bak, data = candidate, content
                break
        if bak is None or data is None:
            why = "found" if not chain else "differs from the current file"
            return Outcome("failed", f"no dflash-doctor backup of {source} {why}")
        a.check_space(real, len(data))
        pid = spec.hints.pid or facts.server_pid()
        live = transport.relaunch_refused is None
        if live and not source_for(launch.kind).managed and not spec.fix.relaunch:
            try:
                a.owner_of(pid, real)  # as whom the old server comes back, before any change
            except DoctorError as e:
                return Outcome("failed", f"nothing changed: {e}", steps=a.steps)
        a.write(real, data, transport.file_mode(bak))
        a.steps.append(f"restored {real} from {bak}")
        if transport.relaunch_refused is not None:
            return Outcome(
                "written",
                "rolled back (offline or recorded host: nothing relaunched)",
                bak,
                steps=a.steps,
            )
        log = facts.log.value.path if facts.log.value is not None else spec.hints.log_path
        a.relaunch(launch, real, pid, log)
        why_not = a.wait_healthy(launch)
    finally:
        a.unlock(lock)
    if why_not is not None:
        return Outcome(
            "failed",
            f"rolled back the file, but the old server did not come back: {why_not}; "
            f"start it with {source}",
            bak,
            a.log_tail(facts),
            a.steps,
        )
    return Outcome("applied", "rolled back and relaunched", bak, steps=a.steps)
