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
words and the interpreter is an absolute path (it cannot start with `-`). It starts in `/`
with stdin from /dev/null (a fixed `sh -c` script, the command its positional words), with
PYTHONSAFEPATH=1 (-P on 3.11+): a module in the directory the doctor runs from never imports.

The rules themselves live in `on_host/host_exec_rules.py` (stdlib, shipped): the bundle that
gathers a remote host in one execution applies them there, asking the same questions, so its
recorded answers are what this module's questions get.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from dflash_doctor.errors import DoctorError, FactError
from dflash_doctor.hosts import HostSpec
from dflash_doctor.on_host import host_exec_rules as rules
from dflash_doctor.transport.base import Transport

SYSTEM_PYTHONS = rules.SYSTEM_PYTHONS
CLEAN_PATH = rules.CLEAN_PATH
PASSED_ENV = rules.PASSED_ENV


@dataclass(frozen=True)
class Owner:
    uid: int
    gid: int


def parse_status_ids(text: str) -> Owner:
    """Uid and gid of a process from `/proc/PID/status` (host_exec_rules.parse_status_ids)."""
    try:
        return Owner(*rules.parse_status_ids(text))
    except rules.Refused as e:
        raise FactError(str(e)) from None


class _Questions(rules.HostQuestions):
    """The rules' questions, each one transport call."""

    failures = (DoctorError,)

    def __init__(self, transport: Transport, spec: HostSpec) -> None:
        self.t = transport
        self.spec = spec

    def run(self, argv: list[str], timeout: float) -> tuple[int, bytes]:
        res = self.t.run(argv, timeout=timeout)
        return res.returncode, res.stdout

    def status(self, pid: int) -> str:
        data = self.t.read_file(f"/proc/{pid}/status", max_bytes=64 * 1024)
        return data.decode("ascii", "replace")


class HostExec:
    """Decides, once per host, how an interpreter found on that host may be run."""

    def __init__(self, transport: Transport, spec: HostSpec) -> None:
        self.t = transport
        self.spec = spec
        self.rules = rules.Rules(_Questions(transport, spec))

    def doctor_uid(self) -> int:
        """The uid the doctor's commands run as on the host."""
        try:
            return self.rules.doctor_uid()
        except rules.Refused as e:
            raise FactError(str(e)) from None

    def which(self, name: str) -> str | None:
        """A bare `python3` as the host's PATH finds it (the name goes in as `$1`)."""
        return self.rules.which(name)

    def unsafe(self, path: str, allowed: set[int], *, want: str) -> str | None:
        """Why `path` (a `want`: regular file or directory) may not be trusted, or None."""
        return self.rules.unsafe(path, allowed, want)

    def prefix(
        self, python: str | None, *, pid: int | None, env: Mapping[str, str] | None = None
    ) -> list[str]:
        """argv that starts `python` on the host safely; append its arguments.

        Raises FactError with the reason when it must not run at all.
        """
        try:
            return self.rules.prefix(python, pid, env)
        except rules.Refused as e:
            raise FactError(str(e)) from None

    def system_python(self, *, pid: int | None = None) -> list[str]:
        """The host's own Python (for our stdlib-only scripts), isolated from the environment."""
        try:
            return self.rules.system_python(pid)
        except rules.Refused as e:
            raise FactError(str(e)) from None
