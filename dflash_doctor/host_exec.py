"""Whether and how a host-provided interpreter may run: never with more privilege than its owner.

The doctor usually runs as root, on hosts where other users start processes. Whoever starts a
process that looks like an SGLang server chooses its interpreter (argv[0]) and its import path
(PYTHONPATH). Asking that interpreter anything (SGLang's own parser, its version, the probe, the
health wait, the log filter) runs that user's code, so it is run:

- as the server process's owner (uid and gid from `/proc/PID/status`, `setpriv --reuid --regid
  --clear-groups`), when the doctor is root and the owner is not;
- as the doctor's own user when that already is the owner (or root runs a root server);
- not at all otherwise (the fact then says why).

With no server process there is no owner to take: the interpreter then runs as the doctor's
user only when nobody else can change it. In every case the interpreter must be an absolute path
to a regular file owned by root or by the user it runs as, and neither it nor a directory above
it may be writable by anyone else (sticky directories such as /tmp excepted). Import-path
entries pass the same test when the process's owner is not the one running them. No host string
becomes a shell word or an option: argv is passed as a list, `env -i` gets only `NAME=value`
words and the interpreter is an absolute path (it cannot start with `-`).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass

from dflash_doctor.errors import DoctorError, FactError
from dflash_doctor.facts.models import LaunchArgs
from dflash_doctor.hosts import HostSpec
from dflash_doctor.transport.base import Transport

# Interpreters that are the host's own (the health wait and log filter need no SGLang).
SYSTEM_PYTHONS = ("python3", "/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3")
CLEAN_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Environment names the doctor may pass on; values are the server's own (or none).
PASSED_ENV = ("PYTHONPATH", "VIRTUAL_ENV", "HOME")
MAX_PATH_CHARS = 4096
# A bare interpreter name (`python3`, `python3.11`): looked up on the host's PATH.
BARE_PYTHON = re.compile(r"python[0-9.]{0,8}")
MAX_IMPORT_ENTRIES = 32


@dataclass(frozen=True)
class Owner:
    uid: int
    gid: int


def process_pid(launch: LaunchArgs | None) -> int | None:
    """The pid a launch fact was read from (`process N`), else None."""
    if launch is None or launch.kind != "process":
        return None
    last = launch.source.split()[-1]
    return int(last) if last.isascii() and last.isdigit() else None


def parse_status_ids(text: str) -> Owner:
    """Uid and gid of a process from `/proc/PID/status`: the least privileged of each set.

    Real, effective, saved and filesystem ids can differ (setuid programs, dropped
    privileges); the non-root one is what the process may be, so it is what we run as.
    """
    ids: dict[str, list[int]] = {}
    for line in text.splitlines()[:256]:
        key, _, rest = line.partition(":")
        if key in ("Uid", "Gid"):
            words = rest.split()[:4]
            if not words or not all(w.isascii() and w.isdigit() and len(w) <= 10 for w in words):
                raise FactError(f"/proc status {key} line is malformed")
            ids[key] = [int(w) for w in words]
    if "Uid" not in ids or "Gid" not in ids:
        raise FactError("/proc status has no Uid or Gid line")

    def least(values: list[int]) -> int:
        nonroot = [v for v in values if v != 0]
        return nonroot[0] if nonroot else 0

    return Owner(least(ids["Uid"]), least(ids["Gid"]))


class HostExec:
    """Decides, once per host, how an interpreter found on that host may be run."""

    def __init__(self, transport: Transport, spec: HostSpec) -> None:
        self.t = transport
        self.spec = spec
        self._self_uid: int | None = None

    # -- who ------------------------------------------------------------------------------

    def doctor_uid(self) -> int:
        """The uid the doctor's commands run as on the host."""
        if self._self_uid is None:
            res = self.t.run(["id", "-u"], timeout=10)
            text = res.stdout.decode("ascii", "replace").strip()
            if not res.ok or not (text.isascii() and text.isdigit() and len(text) <= 10):
                raise FactError("cannot tell which user the doctor runs as (`id -u` failed)")
            self._self_uid = int(text)
        return self._self_uid

    def owner(self, pid: int) -> Owner:
        data = self.t.read_file(self.spec.path(f"/proc/{pid}/status"), max_bytes=64 * 1024)
        return parse_status_ids(data.decode("ascii", "replace"))

    def which(self, name: str) -> str | None:
        """A bare `python3` as the host's PATH finds it (the name goes in as `$1`)."""
        try:
            res = self.t.run(["sh", "-c", 'command -v -- "$1"', "sh", name], timeout=10)
        except DoctorError:
            return None
        found = res.stdout.decode("utf-8", "replace").strip()
        return found if res.ok and found.startswith("/") and "\n" not in found else None

    # -- what -----------------------------------------------------------------------------

    def _resolve(self, path: str) -> str:
        res = self.t.run(["readlink", "-f", "--", path], timeout=10)
        real = res.stdout.decode("utf-8", "replace").strip()
        if not res.ok or not real.startswith("/") or "\n" in real:
            raise FactError(f"{path} does not exist")
        return real

    def _stat(self, paths: list[str]) -> list[tuple[int, int, str]]:
        res = self.t.run(["stat", "-L", "-c", "%u %a %F", "--", *paths], timeout=10)
        lines = res.stdout.decode("utf-8", "replace").splitlines()
        if not res.ok or len(lines) != len(paths):
            raise FactError(f"cannot stat {paths[-1] if paths else '?'}")
        out = []
        for line in lines:
            uid, mode, kind = line.split(" ", 2)
            out.append((int(uid), int(mode, 8), kind))
        return out

    def unsafe(self, path: str, allowed: set[int], *, want: str) -> str | None:
        """Why `path` (a `want`: regular file or directory) may not be trusted, or None."""
        if not path.startswith("/") or len(path) > MAX_PATH_CHARS or "\n" in path:
            return f"{path!r} is not an absolute path"
        try:
            real = self._resolve(path)
            chain = [real, *_ancestors(real)]
            chain += [p for p in _ancestors(path) if p not in chain]
            stats = self._stat(chain)
        except (DoctorError, ValueError) as e:
            return str(e)
        who = " or ".join("root" if u == 0 else f"uid {u}" for u in sorted(allowed))
        for i, (p, (uid, mode, kind)) in enumerate(zip(chain, stats, strict=True)):
            if i == 0 and kind != want:
                return f"{real} is not a {want}"
            if uid not in allowed:
                return f"{p} is owned by uid {uid}, not {who}"
            sticky_dir = kind == "directory" and mode & 0o1000
            if mode & 0o022 and not (i > 0 and sticky_dir):
                return f"{p} is writable by users other than its owner (mode {mode & 0o7777:o})"
        return None

    # -- how ------------------------------------------------------------------------------

    def prefix(
        self, python: str | None, *, pid: int | None, env: Mapping[str, str] | None = None
    ) -> list[str]:
        """argv that starts `python` on the host safely; append its arguments.

        Raises FactError with the reason when it must not run at all.
        """
        if python and BARE_PYTHON.fullmatch(python):
            python = self.which(python)
        if not python or not python.startswith("/"):
            raise FactError(f"not run: the interpreter {python!r} is not an absolute path")
        me = self.doctor_uid()
        if pid is not None:
            owner = self.owner(pid)
            if me not in (0, owner.uid):
                raise FactError(
                    f"not run: process {pid} belongs to uid {owner.uid}, and the doctor "
                    f"(uid {me}) can neither run as that user nor trust its interpreter"
                )
            runner = owner.uid
        else:
            owner = None
            runner = me
        allowed = {0, runner}
        why = self.unsafe(python, allowed, want="regular file")
        if why is not None:
            raise FactError(f"not run: interpreter {why}")
        words = [CLEAN_PATH]
        for key in PASSED_ENV:
            value = (env or {}).get(key)
            if value is None or "\0" in value:
                continue
            if key == "PYTHONPATH" and owner is None:
                # No owner runs it: only entries nobody else can change are kept.
                value = ":".join(
                    e
                    for e in value.split(":")[:MAX_IMPORT_ENTRIES]
                    if e and self.unsafe(e, allowed, want="directory") is None
                )
                if not value:
                    continue
            words.append(f"{key}={value}")
        argv = ["env", "-i", *words, python]
        if owner is not None and me == 0 and owner.uid != 0:
            argv = [
                "setpriv",
                f"--reuid={owner.uid}",
                f"--regid={owner.gid}",
                "--clear-groups",
                "--",
                *argv,
            ]
        return argv

    def system_python(self, *, pid: int | None = None) -> list[str]:
        """The host's own Python (for our stdlib-only scripts), isolated from the environment."""
        reasons = []
        for candidate in SYSTEM_PYTHONS:
            try:
                return [*self.prefix(candidate, pid=pid), "-I"]
            except FactError as e:
                reasons.append(str(e))
        raise FactError(f"no usable system Python ({'; '.join(reasons[:1])})")


def _ancestors(path: str) -> list[str]:
    out = []
    p = posixpath.dirname(path.rstrip("/") or "/")
    while True:
        out.append(p)
        if p == "/":
            return out
        p = posixpath.dirname(p)
