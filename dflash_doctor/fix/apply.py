"""`fix --apply`: back up, write, relaunch, wait for health, re-check, roll back on failure.

Everything that changes a host is here, and only runs when the user gave --apply.
"""

from __future__ import annotations

import hashlib
import posixpath
import shlex
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

from dflash_doctor.checks.views import SPAN_CHECKS, span_mismatch
from dflash_doctor.errors import DoctorError, FileExists, TransportError, UnsafeFile
from dflash_doctor.facts.models import HostFacts, LaunchArgs
from dflash_doctor.facts.runtime import server_address
from dflash_doctor.facts.vllm_launch import (
    VLLM_DEFAULT_PORT,
    parse_vllm_argv,
    runs_vllm,
    unix_socket_line,
    vllm_address,
)
from dflash_doctor.fix import signals
from dflash_doctor.fix.edits import EDITABLE
from dflash_doctor.fix.journal import Journal, known_backup, open_journal
from dflash_doctor.fix.launch_sources import LaunchSource, runs_vllm_launch, source_of
from dflash_doctor.fix.plan import FixPlan
from dflash_doctor.fix.run_as import RunAs, relaunch_as
from dflash_doctor.gather import gather
from dflash_doctor.host_exec import HostExec
from dflash_doctor.hosts import HostSpec
from dflash_doctor.launch_edits import VLLM_EDITABLE
from dflash_doctor.launch_edits import describe_relaunch as describe_relaunch
from dflash_doctor.redact import redact_text
from dflash_doctor.runner import run_checks
from dflash_doctor.transport.base import FileId, Transport

if TYPE_CHECKING:
    from dflash_doctor.fix.bench_step import BenchStep

BACKUP_TAG = ".dflash-doctor-"
BACKUP_SUFFIX = ".bak"
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
    def __init__(
        self,
        spec: HostSpec,
        transport: Transport,
        health_timeout: float,
        launch_source: LaunchSource | None = None,
    ) -> None:
        self.spec = spec
        self.t = transport
        # The launch source that relaunches (a container's compose file names its project
        # and files: fix/containers.py); None: the one of the launch's kind.
        self.launch_source = launch_source
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
        # The launch file's lock and journal (fix/journal.py), once locked.
        self.j: Journal | None = None
        # Relaunch steps are journaled during the apply, not during its own rollback.
        self.journaling = True

    def kind(self, launch: LaunchArgs) -> LaunchSource:
        """The launch source `launch` is relaunched and described by."""
        return self.launch_source or source_of(launch)

    def step(self, name: str, **fields: object) -> None:
        """Record an apply step in the journal (nothing before the lock is taken)."""
        if self.j is not None and self.journaling:
            self.j.step(name, **fields)

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

    def write(
        self, source: str, data: bytes, mode: int, expect: FileId | None = None
    ) -> FileId | None:
        """Replace the file through descriptors; its owner and group stay (transport)."""
        return self.t.write_file(source, data, mode=mode, expect=expect)

    def current(self, source: str) -> tuple[bytes, FileId]:
        """The launch file's bytes and identity, read together: a link in its place or a
        file changing under the read is refused."""
        ident = self.t.file_id(source)
        data = self.t.read_file(source, max_bytes=1 << 20)
        if ident.kind != "file" or hashlib.sha256(data).hexdigest() != ident.sha256:
            raise UnsafeFile(f"{self.spec.name}:{source}: changed while it was read")
        return data, ident

    def backup(self, source: str, stamp: str, old: bytes, ident: FileId) -> str:
        """Back `old` up twice: a copy in the journal's directory (what --rollback
        restores) and `FILE.dflash-doctor-STAMP.bak` beside the file for people, made
        exclusively with the file's owner and mode. A name already there is this run's own
        only when the journal recorded its inode; anything else stops the apply."""
        assert self.j is not None
        entry = self.j.entry or {}
        bak = backup_path(source, stamp)
        if "copy" in entry:
            # Edited twice in one run (several hosts in one inventory): keep the first state.
            if not known_backup(entry, self.t.file_id(bak)):
                raise UnsafeFile(f"{self.spec.name}:{bak}: not the backup this run made")
            self.steps.append(f"kept the backup {bak} made earlier in this run")
            return bak
        copy = self.j.keep_copy(old)
        try:
            made = self.t.create_file(bak, old, mode=ident.mode, owner=(ident.uid, ident.gid))
        except FileExists:
            raise UnsafeFile(
                f"{self.spec.name}:{bak}: exists and is not a backup dflash-doctor made "
                "(a link or another file): move it away and retry"
            ) from None
        self.step(
            "backed_up",
            backup=bak,
            backup_id=[made.dev, made.ino],
            copy=copy,
            sha256=ident.sha256,
            mode=ident.mode,
        )
        self.steps.append(f"backed up {source} to {bak} (and kept a copy in {copy})")
        return bak

    def lock(self, source: str, stamp: str, *, recover: bool = False) -> Journal:
        """One apply or rollback per launch file at a time: the journal's lock, in a
        directory the file's owner cannot write (fix/journal.py)."""
        try:
            j = open_journal(self.t, self.spec, source, stamp)
            j.lock(recover=recover)
        except FileExists:
            raise TransportError(_locked(source)) from None
        self.j = j
        self.steps.extend(j.notes)
        return j

    def unlock(self) -> None:
        """Release the lock this run took (never another doctor's)."""
        if self.j is not None:
            self.j.unlock()

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
        self.step("stopping", stopping=target)
        deadline = time.monotonic() + STOP_WAIT_S
        while time.monotonic() < deadline:
            if not self._alive(pid, group=group):
                self.step("stopped")
                return
            time.sleep(0.2)
        self.t.run(self._sudo(["kill", "-KILL", "--", target]), timeout=10)
        self.steps.append(f"kill -KILL {target}")
        self.step("stopped")

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
            self.step("stopping", stopping="the configured relaunch command")
            self._run(["sh", "-c", self.spec.fix.relaunch], timeout=budget)
            self.step("started")
            return
        commands = self.kind(launch).relaunch(source, self.spec.hints.compose_service)
        if commands is not None:  # a service manager restarts it
            self.step("stopping", stopping="the service manager")
            for i, argv in enumerate(commands):
                last = i == len(commands) - 1
                self._run(self._sudo(argv), timeout=budget if last else 60)
            self.step("started")
            return
        command = self.start_argv(source)  # can it start? before anything is stopped
        run_as = self.owner_of(pid, source)  # as whom? also before anything is stopped
        if self.started_session is not None:
            self._stop(self.started_session, group=True)
            self.started_session = None
        elif pid is not None:
            # Marked before the stop: an interrupt while it is stopping must still bring
            # the server back (the rollback then finishes the stop and starts it again).
            self.stopped = pid
            self._stop(pid)
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
        self.step("started", session=self.started_session)

    def _size(self, path: str) -> int | None:
        try:
            return self.t.file_size(path)
        except DoctorError:
            return 0

    def server_pid(self) -> int | None:
        """The server (SGLang's or vLLM's) in the session the doctor started, if it is up."""
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
            if b"launch_server" in cmd or b"sglang\0serve" in cmd or _runs_vllm(cmd):
                return int(word)
        return None

    def health_url(self, launch: LaunchArgs) -> str:
        if self.spec.fix.health_url:
            return self.spec.fix.health_url
        # vLLM answers `/health` 200, 503 once its engine is dead
        # (vllm/entrypoints/serve/instrumentator/health.py 0.27.1:22-33, 0.34.0:22-33), where
        # the check asks it (its --host and --port: facts/vllm_launch.py vllm_address).
        host, port = (
            _vllm_address(launch.argv) if runs_vllm_launch(launch) else server_address(launch)
        )
        return f"http://{host}:{port}/health"

    def wait_healthy(self, launch: LaunchArgs, served: Transport | None = None) -> str | None:
        """None when healthy, else why not; stops as soon as the started server has exited.
        `served`: where the server runs, when not where the launch is written (a container)."""
        url = self.health_url(launch)
        t = served or self.t
        try:
            python = HostExec(t, self.spec).system_python()
        except DoctorError as e:
            return f"cannot wait for {url}: {e}"
        deadline = time.monotonic() + self.health_timeout
        why = "no answer"
        while time.monotonic() < deadline:
            try:
                res = t.run([*python, "-c", HEALTH_PROBE, url], timeout=10)
            except DoctorError as e:
                res = None
                why = str(e)
            if res is not None:
                if res.ok:
                    self.steps.append(f"healthy: {url}")
                    self.step("healthy")
                    return None
                why = res.stderr.decode("utf-8", "replace").strip()[-200:] or why
            if self.started_session is not None and not self._alive(
                self.started_session, group=True
            ):
                return f"the relaunched server exited before {url} answered ({why})"
            time.sleep(0.5)
        return f"{url} not healthy after {self.health_timeout:g}s ({why})"

    def answers(self, launch: LaunchArgs) -> bool:
        """Whether anything answers the health URL right now (one probe)."""
        try:
            python = HostExec(self.t, self.spec).system_python()
            return self.t.run([*python, "-c", HEALTH_PROBE, self.health_url(launch)]).ok
        except DoctorError:
            return False

    def back_up_and_ours(self, launch: LaunchArgs, served: Transport | None = None) -> str | None:
        """None when the server the doctor started answers health; an answer on the port
        while that server is not running (a stale pid, another process) is not success."""
        why = self.wait_healthy(launch, served)
        if why is None and self.started_session is not None and self.server_pid() is None:
            why = f"the relaunched server (session {self.started_session}) is not running"
        return why

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


def _locked(source: str) -> str:
    return f"another dflash-doctor apply or rollback holds the lock of {source}; retry later"


INTERRUPTED = "interrupted (Ctrl-C or SIGTERM)"


class Site(Protocol):
    """One launch as the apply loop sees it: where the launch is written and how the server
    comes back from it. A launch file on the host (FileSite, below: a script, a systemd unit,
    a compose file, the inventory) or a container's own launch (fix/containers.py: the compose
    file of a compose-managed container, a `docker run` container's settings). The loop
    below (apply_plan) is the only apply -> verify -> roll back there is."""

    a: Applier  # its steps, journal and health wait
    live: bool  # False: only written (an offline or recorded host), never relaunched
    changed: bool  # whether write() changed anything that restore() must put back

    @property
    def where(self) -> str:
        """The launch in messages: its file, or `container NAME`."""
        ...

    @property
    def done(self) -> str:
        """What a verified apply did, in words."""
        ...

    def lock(self, stamp: str) -> None:
        """One apply or rollback of this launch at a time; nothing is changed yet."""
        ...

    def unlock(self) -> None:
        """Release the lock this run took (never another doctor's)."""
        ...

    def write(self, plan: FixPlan, stamp: str, pid: int | None) -> str:
        """Check the launch is still the one planned from and can be relaunched, back it up,
        write the new one; nothing is stopped yet. Returns the backup's name."""
        ...

    def restore(self) -> None:
        """The old launch back in place (nothing when write() changed nothing)."""
        ...

    def relaunch(self, launch: LaunchArgs, pid: int | None, log: str | None) -> None:
        """Start the server on the launch as written now, stopping the running one."""
        ...

    def relaunch_old(self, launch: LaunchArgs, log: str | None) -> bool:
        """After restore(): the old server back; False when it was never stopped."""
        ...

    def served(self) -> AbstractContextManager[Transport]:
        """Where the relaunched server is asked for health and gathered again."""
        ...

    def commit(self) -> None:
        """After verification: drop what was kept only for a rollback."""
        ...

    def log_tail(self, facts: HostFacts | None) -> list[str]:
        """The relaunched server's last log lines, for a failure."""
        ...

    def way_out(self, bak: str) -> str:
        """How to put the old launch back by hand when restore() failed."""
        ...

    def start_hint(self) -> str:
        """How to start the old server by hand when it did not come back."""
        ...


class FileSite:
    """A launch file on the host: locked and journaled (fix/journal.py), backed up beside
    the file and in the journal, written through descriptors, relaunched by its source (a
    script detached as its owner, systemd, compose, a configured command)."""

    def __init__(self, a: Applier, link: str) -> None:
        self.a = a
        self.link = link  # the launch file as named; edits go through a link to its file
        self.source = link
        self.live = a.t.relaunch_refused is None
        self.changed = False
        self.old = b""
        self.mode = 0o644

    @property
    def where(self) -> str:
        return self.source

    @property
    def done(self) -> str:
        return f"applied to {self.source}"

    def lock(self, stamp: str) -> None:
        a = self.a
        self.source = a.real_path(self.link)
        if self.source != a.real_dir(self.link):
            a.steps.append(f"{self.link} is a link: editing {self.source}")
        a.lock(self.source, stamp).begin(link=self.link)

    def unlock(self) -> None:
        self.a.unlock()

    def write(self, plan: FixPlan, stamp: str, pid: int | None) -> str:
        assert plan.new_text is not None and plan.launch is not None
        a, source, spec = self.a, self.source, self.a.spec
        old, ident = a.current(source)
        self.old, self.mode = old, ident.mode
        if plan.old_text is not None and old.decode("utf-8", "replace") != plan.old_text:
            raise UnsafeFile(f"{source} changed since it was read; run fix again")
        new = plan.new_text.encode("utf-8")
        a.check_space(source, len(old) + len(new))
        if self.live and not a.kind(plan.launch).managed and not spec.fix.relaunch:
            a.start_argv(source)  # the relaunch must be able to start before anything stops
            a.owner_of(pid, source)  # and as the server's owner, or not at all
        bak = a.backup(source, stamp, old, ident)
        # The bytes and inode read above, checked again just before the rename: an edit
        # made meanwhile is refused, never overwritten (the backup holds the read state).
        a.write(source, new, self.mode, expect=ident)
        self.changed = True
        a.step("written", written_sha256=hashlib.sha256(new).hexdigest())
        wrong = _written_runs(a, plan, source, new, spec.hints.compose_service)
        if wrong is not None:
            raise TransportError(wrong)
        a.steps.append(f"wrote {source}")
        return bak

    def restore(self) -> None:
        if self.changed:
            self.a.write(self.source, self.old, self.mode)

    def relaunch(self, launch: LaunchArgs, pid: int | None, log: str | None) -> None:
        self.a.relaunch(launch, self.source, pid, log)

    def relaunch_old(self, launch: LaunchArgs, log: str | None) -> bool:
        a = self.a
        stopped = a.stopped is not None or a.started_session is not None
        if not (stopped or bool(a.spec.fix.relaunch) or a.kind(launch).managed):
            return False
        # An old server still stopping (interrupted mid-stop) is stopped first.
        still = a.stopped if a.stopped is not None and a._alive(a.stopped) else None
        self.relaunch(launch, still, log)
        return True

    def served(self) -> AbstractContextManager[Transport]:
        return nullcontext(self.a.t)

    def commit(self) -> None:
        return None

    def log_tail(self, facts: HostFacts | None) -> list[str]:
        return self.a.log_tail(facts)

    def way_out(self, bak: str) -> str:
        return (
            "Run `fix --rollback` (it restores the copy the journal kept), or restore "
            f"{bak} with `cp -p {bak} {self.source}` and start the server again"
        )

    def start_hint(self) -> str:
        return f"start it with {self.source}"


def apply_plan(
    spec: HostSpec,
    transport: Transport,
    plan: FixPlan,
    facts: HostFacts,
    *,
    stamp: str,
    health_timeout: float = 300.0,
    bench: BenchStep | None = None,
    site: Site | None = None,
) -> Outcome:
    """Back up, write, relaunch, verify; roll back on any failure. SIGTERM counts as Ctrl-C
    (fix/signals.py) and every step is journaled beside the lock (fix/journal.py). `site`:
    where the launch is written and how the server comes back (default: the plan's launch
    file on `transport`)."""
    if not plan.changes:
        return Outcome("unchanged", "nothing to change: the launch already has every fix")
    if site is None:
        if plan.source is None or plan.new_text is None or plan.launch is None:
            return Outcome(
                "failed",
                "no launch file to edit; start the server with: " + (plan.new_command or "?"),
            )
        site = FileSite(Applier(spec, transport, health_timeout), plan.source)
    if bench is not None and transport.live_refused is None:
        bench.before()  # before any change: a failure here changes nothing
    a = site.a
    with signals.interruptible():
        try:
            site.lock(stamp)
        except DoctorError as e:
            site.unlock()
            return Outcome("failed", f"nothing changed: {e}", steps=a.steps)
        except KeyboardInterrupt:
            site.unlock()
            return Outcome("failed", f"nothing changed: {INTERRUPTED}", steps=a.steps)
        try:
            return _apply_locked(site, spec, plan, facts, stamp, bench)
        finally:
            with signals.shielded():
                site.unlock()


def _apply_locked(
    site: Site,
    spec: HostSpec,
    plan: FixPlan,
    facts: HostFacts,
    stamp: str,
    bench: BenchStep | None,
) -> Outcome:
    """The apply under the lock: read and check, back up, write, relaunch and verify, or
    put everything back (every step journaled)."""
    assert plan.launch is not None
    a = site.a
    if site.live and (why := _unix_socket(spec, plan.launch)):
        return Outcome("failed", f"nothing changed: {why}", steps=a.steps)
    pid = spec.hints.pid or facts.server_pid()
    try:
        bak = site.write(plan, stamp, pid)
    except (DoctorError, KeyboardInterrupt) as e:
        return _not_relaunched(site, e)
    if not site.live:
        a.step("done")
        # The steps name the file and its backup: the outcome says only what follows.
        return Outcome("written", "written; `--rollback` restores the backup", bak, steps=a.steps)
    log = facts.log.value.path if facts.log.value is not None else spec.hints.log_path
    failure, new_facts = _relaunch_verified(site, spec, plan, plan.launch, pid, log, bench)
    if failure is None:
        with signals.shielded():
            site.commit()
            a.step("done")
        return Outcome("applied", f"{site.done} and verified", bak, steps=a.steps)
    tail = site.log_tail(new_facts or facts)
    with signals.shielded():
        out = _roll_back(site, plan.launch, bak, log, failure, tail)
    if signals.held():
        out.message += f"; {INTERRUPTED} again during the rollback: held until it finished"
    return out


def _not_relaunched(site: Site, e: BaseException) -> Outcome:
    """A failure or an interrupt before anything was stopped: the launch as it was (when it
    was already written), the server untouched."""
    a = site.a
    why = INTERRUPTED if isinstance(e, KeyboardInterrupt) else str(e)
    with signals.shielded():
        if site.changed:
            try:
                site.restore()
                a.steps.append(f"restored {site.where}")
            except DoctorError as err:
                a.step("failed")
                return Outcome(
                    "failed",
                    f"nothing relaunched ({why}), but {site.where} could not be restored "
                    f"({err}); `fix --rollback` restores it",
                    steps=a.steps,
                )
        a.step("failed" if site.changed else "refused")
    return Outcome("failed", f"nothing relaunched, the server runs as before: {why}", steps=a.steps)


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
    kind = a.kind(plan.launch)
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
    new = launch.model_copy(update={"argv": plan.new_argv or launch.argv})
    if runs_vllm_launch(new):
        # A vLLM server is judged from the running process (its command line, its
        # environment, its /version), not from the file just written.
        port = _vllm_port(new.argv) if new_pid is None else None
        return spec.override(pid=new_pid, server_port=port, launch_file=None)
    if new_pid is not None:
        return spec.override(pid=new_pid, server_port=None)
    port = server_address(new)[1]
    return spec.override(pid=None, server_port=port)


def _runs_vllm(cmdline: bytes) -> bool:
    argv = [a.decode("utf-8", "replace") for a in cmdline.rstrip(b"\0").split(b"\0")]
    return runs_vllm(argv)


def _unix_socket(spec: HostSpec, launch: LaunchArgs) -> str | None:
    """Why a relaunch cannot be verified: the vLLM server would listen on a Unix socket
    (`--uds`), where the health wait (HTTP on a host and port) cannot reach it."""
    if not runs_vllm_launch(launch):
        return None
    try:
        vllm = parse_vllm_argv(launch.argv, source="", kind="process")
    except DoctorError:
        return None
    if vllm_address(vllm) is not None:
        return None
    return unix_socket_line(spec.name, vllm) + ", so its health after a relaunch cannot be awaited"


def _vllm_port(argv: list[str]) -> int:
    return _vllm_address(argv)[1]


def _vllm_address(argv: list[str]) -> tuple[str, int]:
    """Where the vLLM server `argv` starts is reached (a Unix socket: refused before any
    change, `unix_socket_refusal`)."""
    try:
        address = vllm_address(parse_vllm_argv(argv, source="", kind="process"))
    except DoctorError:
        address = None
    return address or ("127.0.0.1", VLLM_DEFAULT_PORT)


def _relaunch_verified(
    site: Site,
    spec: HostSpec,
    plan: FixPlan,
    launch: LaunchArgs,
    pid: int | None,
    log: str | None,
    bench: BenchStep | None,
) -> tuple[str | None, HostFacts | None]:
    """Relaunch on the written launch, wait for health, re-gather and re-check: (why it
    failed, None when verified; the re-gathered facts when it got that far, for the log
    tail). Every error, Ctrl-C included, is a failure here, so the caller always rolls back
    on one."""
    a = site.a
    failure: str | None = None
    new_facts: HostFacts | None = None
    try:
        site.relaunch(launch, pid, log)
        with site.served() as served:
            failure = a.wait_healthy(launch, served)
            new_pid = a.server_pid() if failure is None else None
            if failure is None and a.started_session is not None and new_pid is None:
                # /health answered, but not from the server the doctor started: never verify
                # some other process (another server on the host) in its place.
                failure = f"the relaunched server (session {a.started_session}) is not running"
            if failure is None and plan.check_ids:  # a container's rollback proves no fix
                new_facts = gather(_followed(spec, launch, plan, new_pid), served)
                failure = _still_failing(plan, new_facts)
        if failure is None and bench is not None:
            failure = bench.after(new_facts)
    except DoctorError as e:
        failure = str(e)
    except KeyboardInterrupt:
        failure = INTERRUPTED
    return failure, new_facts


def _still_failing(plan: FixPlan, new_facts: HostFacts) -> str | None:
    """Why the re-gathered host does not show the fix, or None."""
    # Still failing: a check that still asks for a launch edit (an upgrade it also asks for
    # is a manual step the edit never claimed to do).
    still = [
        r.check_id
        for r in run_checks(new_facts, plan.check_ids)
        if any(x.action in (*EDITABLE, *VLLM_EDITABLE) for f in r.findings for x in f.fixes)
    ]
    if still:
        return f"after the relaunch {', '.join(still)} still fail"
    if set(plan.check_ids) & set(SPAN_CHECKS):
        # Success means the re-gathered served spans equal the trained ones (version, flag
        # and the new log together), not merely compact_cache=True.
        mismatch = span_mismatch(new_facts)
        if mismatch is not None:
            return f"after the relaunch the served spans differ: {mismatch}"
    return None


def _roll_back(
    site: Site,
    launch: LaunchArgs,
    bak: str,
    log: str | None,
    failure: str,
    tail: list[str],
) -> Outcome:
    """The old launch, the old server; every failure says what is where and how to restore.
    Runs shielded: a signal meanwhile is held until it has finished."""
    a = site.a
    a.step("rolling_back", failure=failure[:300])
    a.journaling = False
    try:
        site.restore()
        a.steps.append(f"restored {site.where} from {bak}")
    except DoctorError as e:
        a.journaling = True
        a.step("failed")
        return Outcome(
            "failed",
            f"fix failed: {failure}; and {site.where} could not be restored ({e}). "
            + site.way_out(bak),
            bak,
            tail,
            a.steps,
        )
    back: str | None = None
    try:
        if site.relaunch_old(launch, log):
            back = _came_back(site, launch)
        else:
            a.steps.append("the running server was never stopped: nothing to relaunch")
    except DoctorError as e:
        back = str(e)
    except KeyboardInterrupt:
        back = f"{INTERRUPTED} while restarting the old server"
    a.journaling = True
    a.step("rolled_back" if back is None else "failed")
    status: Status = "rolled_back" if back is None else "failed"
    msg = f"fix failed: {failure}; rolled back {site.where} from {bak}" + (
        ""
        if back is None
        else f", but the old server did not come back: {back}. Run `fix --rollback` or "
        + site.start_hint()
    )
    return Outcome(status, msg, bak, tail, a.steps)


def _came_back(site: Site, launch: LaunchArgs) -> str | None:
    """None when the server the doctor started answers health where it runs; else why not."""
    try:
        with site.served() as served:
            return site.a.back_up_and_ours(launch, served)
    except DoctorError as e:
        return str(e)


def rollback(
    spec: HostSpec,
    transport: Transport,
    source: str,
    facts: HostFacts,
    launch: LaunchArgs,
    health_timeout: float,
    site: FileSite | None = None,
) -> Outcome:
    """Restore the newest copy the journal kept that differs from the file now, and
    relaunch; recover an apply that was killed (its lock cleared, its server started).
    `site`: how the server comes back (default: the launch file's own source on `transport`).

    Only copies the doctor made are restored (fix/journal.py): never a `*.bak` name found
    beside the file. One equal to the current file (an apply that ran over an already fixed
    file) is skipped: restoring it would change nothing.
    """
    site = site or FileSite(Applier(spec, transport, health_timeout), source)
    a = site.a
    with signals.interruptible():
        try:
            real = site.source = a.real_path(source)
            j = a.lock(real, datetime_stamp(), recover=True)
        except DoctorError as e:
            a.unlock()
            return Outcome("failed", f"nothing changed: {e}", steps=a.steps)
        except KeyboardInterrupt:
            a.unlock()
            return Outcome("failed", f"nothing changed: {INTERRUPTED}", steps=a.steps)
        try:
            return _rollback_locked(site, j, source, facts, launch)
        except KeyboardInterrupt:
            return Outcome("failed", f"{INTERRUPTED}: see the steps", steps=a.steps)
        except DoctorError as e:
            return Outcome("failed", f"rollback failed: {e}", steps=a.steps)
        finally:
            with signals.shielded():
                a.unlock()


def datetime_stamp() -> str:
    """A stamp for a rollback's own lock (journal entries keep the apply's stamps)."""
    return time.strftime("%Y%m%dT%H%M%S")


def _rollback_locked(
    site: FileSite, j: Journal, source: str, facts: HostFacts, launch: LaunchArgs
) -> Outcome:
    """The rollback under the lock: the copy to restore (or an interrupted apply's server to
    start), checked before any change, then restored and relaunched."""
    a, real, spec, live = site.a, site.source, site.a.spec, site.live
    current, cur_id = a.current(real)
    chain = j.copies()
    pending = j.unfinished()
    pick = next(((e, data) for e, data in chain if data != current), None)
    pid = spec.hints.pid or facts.server_pid()
    up = pid is not None and a._alive(pid)
    if pick is None and not (live and pending is not None and not up):
        if pending is not None:
            j.mark(pending, "recovered")
        why = "found" if not chain else "differs from the current file"
        return Outcome("failed", f"no dflash-doctor backup of {source} {why}", steps=a.steps)
    if live and not a.kind(launch).managed and not spec.fix.relaunch:
        a.owner_of(pid if up else None, real)  # as whom it comes back, before any change
        if not up and a.answers(launch):
            # No server of this file runs (a stale pid, one that exited), yet the port
            # answers: whatever holds it is not what the rollback starts, and its answer
            # would pass for the restored server's.
            return Outcome(
                "failed",
                f"nothing changed: {a.health_url(launch)} answers, but no server of {source} "
                "runs: another process holds the port; stop it, then roll back",
                steps=a.steps,
            )
    a.journaling = False
    bak: str | None = None
    with signals.shielded():
        if pick is not None:
            entry, data = pick
            bak = str(entry.get("backup") or entry.get("copy"))
            a.check_space(real, len(data))
            mode = entry.get("mode")
            a.write(real, data, mode if isinstance(mode, int) else cur_id.mode, expect=cur_id)
            a.steps.append(f"restored {real} from {bak} (the copy kept in {entry.get('copy')})")
        else:
            a.steps.append(f"an interrupted apply left no server running: starting {real}")
        if not live:
            _finish(j, pending, pick)
            return Outcome(
                "written", "rolled back (offline or recorded host: nothing relaunched)", bak,
                steps=a.steps,
            )  # fmt: skip
        log = facts.log.value.path if facts.log.value is not None else spec.hints.log_path
        site.relaunch(launch, pid if up else None, log)
    why_not = _came_back(site, launch)
    _finish(j, pending, pick)
    if why_not is not None:
        return Outcome(
            "failed",
            f"rolled back the file, but the old server did not come back: {why_not}; "
            f"start it with {source}",
            bak,
            site.log_tail(facts),
            a.steps,
        )
    return Outcome("applied", "rolled back and relaunched", bak, steps=a.steps)


def _finish(
    j: Journal, pending: dict[str, object] | None, pick: tuple[dict[str, object], bytes] | None
) -> None:
    """The journal after a rollback: the interrupted apply recovered, the restored one
    rolled back."""
    if pending is not None:
        j.mark(pending, "recovered")
    if pick is not None and pick[0] is not pending:
        j.mark(pick[0], "rolled_back")
