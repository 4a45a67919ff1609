"""The apply journal: what `fix --apply` did to one launch file, kept where its owner cannot
write (issue 22 items 5 and 7).

The doctor runs as root; the launch file's directory is its owner's. Nothing the rollback
trusts lives there: per launch file (its resolved path) a directory under STATE_ROOT on the
host, mode 0700 and the doctor's own, holds

- `lock`: made exclusively, holding who took it (the doctor's pid, machine and stamp): one
  apply or rollback at a time; a lock whose process is gone (killed, SIGKILL) is cleared
  by `--rollback`, which then recovers;
- `journal.json`: every apply, newest last: its stamp, the doctor's pid, the step it reached
  (locked, backed_up, written, stopping, stopped, started, healthy, done; rolling_back,
  rolled_back, failed), the backup made beside the file, and the copy of the original kept
  here; `--rollback` restores only such a copy, never a `*.bak` name found in the owner's
  directory (one the owner planted could be a link to a root-only file);
- `<stamp>.orig`: the launch file's bytes before that apply.

A doctor that is not root on the host cannot write STATE_ROOT: its state sits in
`.dflash-doctor/` beside the launch file (then it edits only what its own user may write,
and nothing crosses a privilege boundary).

Test hook: when the doctor's own environment sets DFLASH_DOCTOR_TEST_PAUSE_AT to a step
name, the apply stops right after recording that step, creates the file named by
DFLASH_DOCTOR_TEST_PAUSE_FILE and sleeps (at most PAUSE_S), so that a fault test can send
SIGINT, SIGTERM or SIGKILL at exactly that step (tests/test_apply_faults.py). Unset, it
does nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import posixpath
import re
import socket
import time
from dataclasses import dataclass, field
from typing import Any

from dflash_doctor.errors import DoctorError, FileExists, TransportError
from dflash_doctor.host_exec import HostExec
from dflash_doctor.hosts import HostSpec
from dflash_doctor.transport.base import FileId, Transport

STATE_ROOT = "/var/lib/dflash-doctor"
PAUSE_ENV = "DFLASH_DOCTOR_TEST_PAUSE_AT"
PAUSE_FILE_ENV = "DFLASH_DOCTOR_TEST_PAUSE_FILE"
PAUSE_S = 60.0
MAX_JOURNAL_BYTES = 1 << 20
MAX_ENTRIES = 64
# The steps after which the old server may be down: an apply that stopped at one of them
# left work for `--rollback` (restore, relaunch).
SERVER_TOUCHED = ("stopping", "stopped", "started", "healthy", "rolling_back")
FINISHED = ("done", "rolled_back", "failed", "recovered", "refused")


def _key(source: str) -> str:
    """The state directory's name for a launch file: a hash of its path, and its name."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", posixpath.basename(source))[:40]
    return f"{hashlib.sha256(source.encode()).hexdigest()[:16]}-{name}"


def state_dir(t: Transport, spec: HostSpec, source: str) -> str:
    """The launch file's private state directory on the host, made when missing."""
    try:
        root = HostExec(t, spec).doctor_uid() == 0
    except DoctorError:
        root = False
    if root:
        _exists(t, "/var")
        _exists(t, "/var/lib")
        t.private_dir(STATE_ROOT)
        base = STATE_ROOT
    else:
        base = posixpath.join(posixpath.dirname(source) or ".", ".dflash-doctor")
        t.private_dir(base)
    here = posixpath.join(base, _key(source))
    t.private_dir(here)
    return here


def _exists(t: Transport, path: str) -> None:
    """A parent of the state root: a real directory (made where a recorded tree lacks it)."""
    try:
        kind = t.file_id(path).kind
    except DoctorError:
        kind = ""
    if kind != "dir":
        t.private_dir(path)


def _alive(pid: int) -> bool:
    """Whether a doctor process of this machine still runs (a reused pid that is not a
    dflash-doctor counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"dflash" in f.read(1 << 16)
    except OSError:
        return True


@dataclass
class Journal:
    """One launch file's lock and journal on one host."""

    t: Transport
    source: str
    dir: str
    stamp: str
    entries: list[dict[str, Any]] = field(default_factory=list)
    entry: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def lock_path(self) -> str:
        """The lock file (made exclusively; holds who took it)."""
        return posixpath.join(self.dir, "lock")

    @property
    def path(self) -> str:
        """The journal file."""
        return posixpath.join(self.dir, "journal.json")

    # -- the lock ---------------------------------------------------------------------------

    def lock(self, *, recover: bool) -> None:
        """Take the lock. A lock whose doctor is gone is cleared by a rollback (`recover`);
        an apply is refused with what the journal says and how to recover."""
        me = {"pid": os.getpid(), "machine": socket.gethostname(), "stamp": self.stamp}
        data = json.dumps(me).encode()
        try:
            self.t.create_file(self.lock_path, data, mode=0o600)
            return
        except FileExists:
            pass
        holder = self._holder()
        pid, machine = holder.get("pid"), holder.get("machine")
        gone = machine == socket.gethostname() and isinstance(pid, int) and not _alive(pid)
        if not gone:
            who = f"pid {pid} on {machine}" if pid else "an unknown process"
            raise TransportError(
                f"another dflash-doctor apply or rollback ({who}) holds {self.lock_path}; "
                "if none runs, remove that file and retry"
            )
        self.load()
        last = self.entries[-1] if self.entries else {}
        if not recover:
            raise TransportError(
                f"a previous apply (pid {pid}, {last.get('stamp', '?')}) ended at step "
                f"{last.get('step', '?')} without finishing; run `fix --rollback` to recover"
            )
        self.t.remove_file(self.lock_path)
        self.notes.append(
            f"cleared the lock of pid {pid} (no longer running; its apply stopped at step "
            f"{last.get('step', '?')})"
        )
        self.t.create_file(self.lock_path, data, mode=0o600)

    def _holder(self) -> dict[str, Any]:
        try:
            raw = json.loads(self.t.read_file(self.lock_path, max_bytes=4096))
        except (DoctorError, ValueError, UnicodeDecodeError):
            return {}
        return raw if isinstance(raw, dict) else {}

    def unlock(self) -> None:
        """Remove the lock when this process holds it."""
        with contextlib.suppress(DoctorError):
            if self._holder().get("pid") == os.getpid():
                self.t.remove_file(self.lock_path)

    # -- the journal ------------------------------------------------------------------------

    def load(self) -> list[dict[str, Any]]:
        """Every apply recorded for this file (none when there is no journal yet)."""
        try:
            raw = json.loads(self.t.read_file(self.path, max_bytes=MAX_JOURNAL_BYTES))
        except (DoctorError, ValueError, UnicodeDecodeError):
            raw = {}
        got = raw.get("applies") if isinstance(raw, dict) else None
        self.entries = [e for e in got if isinstance(e, dict)] if isinstance(got, list) else []
        return self.entries

    def _save(self) -> None:
        # Bounded: the newest applies only (each names a copy of at most 1 MiB beside it).
        del self.entries[:-MAX_ENTRIES]
        body = {"version": 1, "source": self.source, "applies": self.entries}
        self.t.write_file(self.path, json.dumps(body, indent=1).encode(), mode=0o600)

    def begin(self, **fields: Any) -> None:
        """A new apply entry (step `locked`), or this run's own one again (several hosts
        of one inventory sharing a launch file)."""
        self.load()
        for e in self.entries:
            if e.get("stamp") == self.stamp and e.get("pid") == os.getpid():
                self.entry = e
                break
        else:
            self.entry = {"stamp": self.stamp, "pid": os.getpid(), "source": self.source}
            self.entries.append(self.entry)
        self.entry.update(fields)
        self.step("locked")

    def step(self, name: str, **fields: Any) -> None:
        """Record that the apply reached `name` (then the test hook may pause)."""
        if self.entry is not None:
            self.entry.update(fields, step=name, at=time.time())
            self._save()
        _maybe_pause(name)

    def keep_copy(self, data: bytes) -> str:
        """The original bytes, kept in the state directory (once per stamp)."""
        name = posixpath.join(self.dir, f"{self.stamp}.orig")
        try:
            self.t.create_file(name, data, mode=0o600)
        except FileExists:
            if self.t.read_file(name, max_bytes=MAX_JOURNAL_BYTES) != data:
                raise TransportError(f"{name}: a different copy is kept for this run") from None
        return name

    def copies(self) -> list[tuple[dict[str, Any], bytes]]:
        """(entry, original bytes) of every apply with a kept copy, newest first."""
        out = []
        for e in reversed(self.load()):
            copy = e.get("copy")
            if not isinstance(copy, str) or posixpath.dirname(copy) != self.dir:
                continue
            try:
                data = self.t.read_file(copy, max_bytes=MAX_JOURNAL_BYTES)
            except DoctorError:
                continue
            if hashlib.sha256(data).hexdigest() == e.get("sha256"):
                out.append((e, data))
        return out

    def unfinished(self) -> dict[str, Any] | None:
        """The last apply, when it never reached a finished step."""
        last = self.entries[-1] if self.entries else None
        return last if last is not None and last.get("step") not in FINISHED else None

    def mark(self, entry: dict[str, Any], step: str) -> None:
        """Record a finished step on an earlier apply (a rollback recovered it)."""
        entry.update(step=step, at=time.time())
        with contextlib.suppress(DoctorError):
            self._save()


def open_journal(t: Transport, spec: HostSpec, source: str, stamp: str) -> Journal:
    """The journal of launch file `source` (a resolved path) on this host."""
    return Journal(t, source, state_dir(t, spec, source), stamp)


def known_backup(entry: dict[str, Any], found: FileId) -> bool:
    """A backup name that exists is this doctor's own when the journal recorded that very
    inode (never a name the owner made or swapped)."""
    ident = entry.get("backup_id")
    return isinstance(ident, list) and ident == [found.dev, found.ino] and found.kind == "file"


def _maybe_pause(step: str) -> None:
    """The test hook (module docstring): pause at `step` when the environment asks."""
    if os.environ.get(PAUSE_ENV) != step:
        return
    marker = os.environ.get(PAUSE_FILE_ENV)
    if marker:
        with open(marker, "w") as f:
            f.write(f"{os.getpid()} {step}\n")
    deadline = time.monotonic() + PAUSE_S
    while time.monotonic() < deadline:
        time.sleep(0.05)
