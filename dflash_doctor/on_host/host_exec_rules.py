"""When a host-provided interpreter may run, and how: the rules, on either side of the wire.

Stdlib only, Python 3.8+, imports nothing from dflash_doctor: `host_exec.py` applies these
rules through the transport (one command per question), and the bundle that gathers a
remote host in one execution (`on_host/bundle_script.py`) ships this file and applies the
same rules on the host, asking the same questions with the same argv in the same order. So
the bundle runs an interpreter only where the doctor itself would, and every answer it
records is the one the doctor's own question would get (`transport/prefetch.py` replays
them by exact argv). Why the rules are what they are: see `host_exec.py`.

The questions go through a `HostQuestions`: `run(argv, timeout)` gives (exit status,
stdout); `status(pid)` gives the text of /proc/PID/status. What they raise when the host
cannot answer is the caller's (`failures`); a refusal raises `Refused` with the reason.
"""

from __future__ import annotations

import posixpath
import re

# Not `typing.TYPE_CHECKING`: importing typing would cost every host a few milliseconds.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

# Interpreters that are the host's own (the health wait and log filter need no SGLang).
SYSTEM_PYTHONS = ("python3", "/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3")
CLEAN_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Environment names the doctor may pass on; values are the server's own (or none).
PASSED_ENV = ("PYTHONPATH", "VIRTUAL_ENV", "HOME")
MAX_PATH_CHARS = 4096
# A bare interpreter name (`python3`, `python3.11`): looked up on the host's PATH.
BARE_PYTHON = re.compile(r"python[0-9.]{0,8}")
MAX_IMPORT_ENTRIES = 32
MAX_GROUPS = 65536  # NGROUPS_MAX on Linux
ID_ARGV = ["id", "-u"]
# Every interpreter starts in `/` with stdin from /dev/null: sys.path[0] of `python -c` is
# the current directory (a `json.py` where root runs the doctor would import), and nothing
# it runs may wait on, or read, the doctor's stdin. The command stays positional words.
NEUTRAL_SCRIPT = 'cd / || exit 125; exec "$@" </dev/null'
# -P where the interpreter knows it (3.11+: PYTHONSAFEPATH, ignored before): the owner's
# PYTHONPATH is kept (SGLang lives there), so -I is not an option for these.
SAFE_PATH = "PYTHONSAFEPATH=1"


class Refused(Exception):
    """The interpreter must not run (or a question about it had no usable answer)."""


def which_argv(name: str) -> list[str]:
    # The name goes in as `$1`: never a shell word.
    return ["sh", "-c", 'command -v -- "$1"', "sh", name]


def resolve_argv(path: str) -> list[str]:
    return ["readlink", "-f", "--", path]


def stat_argv(paths: list[str]) -> list[str]:
    return ["stat", "-L", "-c", "%u %a %F", "--", *paths]


def parse_status_ids(text: str) -> tuple[int, int]:
    """(uid, gid) of a process from `/proc/PID/status`: the least privileged of each set.

    Real, effective, saved and filesystem ids can differ (setuid programs, dropped
    privileges); the non-root one is what the process may be, so it is what we run as.
    """
    ids: dict[str, list[int]] = {}
    for line in text.splitlines()[:256]:
        key, _, rest = line.partition(":")
        if key in ("Uid", "Gid"):
            words = rest.split()[:4]
            if not words or not all(w.isascii() and w.isdigit() and len(w) <= 10 for w in words):
                raise Refused(f"/proc status {key} line is malformed")
            ids[key] = [int(w) for w in words]
    if "Uid" not in ids or "Gid" not in ids:
        raise Refused("/proc status has no Uid or Gid line")

    def least(values: list[int]) -> int:
        nonroot = [v for v in values if v != 0]
        return nonroot[0] if nonroot else 0

    return least(ids["Uid"]), least(ids["Gid"])


def parse_status_groups(text: str) -> tuple[int, ...]:
    """The supplementary groups of a process from the `Groups:` line of `/proc/PID/status`."""
    for line in text.splitlines()[:256]:
        key, _, rest = line.partition(":")
        if key == "Groups":
            words = rest.split()[:MAX_GROUPS]
            if not all(w.isascii() and w.isdigit() and len(w) <= 10 for w in words):
                raise Refused("/proc status Groups line is malformed")
            return tuple(int(w) for w in words)
    raise Refused("/proc status has no Groups line")


def as_user(uid: int, gid: int, groups: tuple[int, ...] | None = None) -> list[str]:
    """argv prefix that runs the rest as `uid`/`gid` (util-linux setpriv), with exactly
    `groups` as supplementary groups; None or empty: none at all (`--clear-groups`)."""
    argv = ["setpriv", f"--reuid={uid}", f"--regid={gid}"]
    if groups:
        argv.append("--groups=" + ",".join(str(g) for g in groups))
    else:
        argv.append("--clear-groups")
    return [*argv, "--"]


def ancestors(path: str) -> list[str]:
    out = []
    p = posixpath.dirname(path.rstrip("/") or "/")
    while True:
        out.append(p)
        if p == "/":
            return out
        p = posixpath.dirname(p)


class HostQuestions:
    """How the rules ask a host; `failures`: what its methods raise when it cannot answer."""

    failures: tuple[type[BaseException], ...] = ()

    def run(self, argv: list[str], timeout: float) -> tuple[int, bytes]:
        raise NotImplementedError

    def status(self, pid: int) -> str:
        raise NotImplementedError


class Rules:
    """Decides, once per host, how an interpreter found on that host may be run."""

    def __init__(self, host: HostQuestions) -> None:
        self.host = host
        self._self_uid: int | None = None

    def _caught(self) -> tuple[type[BaseException], ...]:
        return (Refused, ValueError, *self.host.failures)

    # -- who ------------------------------------------------------------------------------

    def doctor_uid(self) -> int:
        """The uid the doctor's commands run as on the host."""
        if self._self_uid is None:
            rc, out = self.host.run(ID_ARGV, 10)
            text = out.decode("ascii", "replace").strip()
            if rc != 0 or not (text.isascii() and text.isdigit() and len(text) <= 10):
                raise Refused("cannot tell which user the doctor runs as (`id -u` failed)")
            self._self_uid = int(text)
        return self._self_uid

    def owner(self, pid: int) -> tuple[int, int]:
        return parse_status_ids(self.host.status(pid))

    def which(self, name: str) -> str | None:
        """A bare `python3` as the host's PATH finds it."""
        try:
            rc, out = self.host.run(which_argv(name), 10)
        except self._caught():
            return None
        found = out.decode("utf-8", "replace").strip()
        return found if rc == 0 and found.startswith("/") and "\n" not in found else None

    # -- what -----------------------------------------------------------------------------

    def _resolve(self, path: str) -> str:
        rc, out = self.host.run(resolve_argv(path), 10)
        real = out.decode("utf-8", "replace").strip()
        if rc != 0 or not real.startswith("/") or "\n" in real:
            raise Refused(f"{path} does not exist")
        return real

    def _stat(self, paths: list[str]) -> list[tuple[int, int, str]]:
        rc, out = self.host.run(stat_argv(paths), 10)
        lines = out.decode("utf-8", "replace").splitlines()
        if rc != 0 or len(lines) != len(paths):
            raise Refused(f"cannot stat {paths[-1] if paths else '?'}")
        found = []
        for line in lines:
            uid, mode, kind = line.split(" ", 2)
            found.append((int(uid), int(mode, 8), kind))
        return found

    def unsafe(self, path: str, allowed: set[int], want: str) -> str | None:
        """Why `path` (a `want`: regular file or directory) may not be trusted, or None."""
        if not path.startswith("/") or len(path) > MAX_PATH_CHARS or "\n" in path:
            return f"{path!r} is not an absolute path"
        try:
            real = self._resolve(path)
            chain = [real, *ancestors(real)]
            chain += [p for p in ancestors(path) if p not in chain]
            stats = self._stat(chain)
        except self._caught() as e:
            return str(e)
        who = " or ".join("root" if u == 0 else f"uid {u}" for u in sorted(allowed))
        for i, (p, (uid, mode, kind)) in enumerate(zip(chain, stats)):  # noqa: B905 (3.8: no strict=)
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
        self, python: str | None, pid: int | None, env: Mapping[str, str] | None
    ) -> list[str]:
        """argv that starts `python` on the host safely; append its arguments.

        Raises Refused with the reason when it must not run at all.
        """
        if python and BARE_PYTHON.fullmatch(python):
            python = self.which(python)
        if not python or not python.startswith("/"):
            raise Refused(f"not run: the interpreter {python!r} is not an absolute path")
        me = self.doctor_uid()
        owner: tuple[int, int] | None = None
        if pid is not None:
            owner = self.owner(pid)
            if me not in (0, owner[0]):
                raise Refused(
                    f"not run: process {pid} belongs to uid {owner[0]}, and the doctor "
                    f"(uid {me}) can neither run as that user nor trust its interpreter"
                )
            runner = owner[0]
        else:
            runner = me
        allowed = {0, runner}
        why = self.unsafe(python, allowed, "regular file")
        if why is not None:
            raise Refused(f"not run: interpreter {why}")
        words = [CLEAN_PATH, SAFE_PATH, *self._env_words(env, owner, runner, allowed)]
        argv = ["sh", "-c", NEUTRAL_SCRIPT, "sh", "env", "-i", *words, python]
        if owner is not None and me == 0 and owner[0] != 0:
            argv = [*as_user(owner[0], owner[1]), *argv]
        return argv

    def _env_words(
        self,
        env: Mapping[str, str] | None,
        owner: tuple[int, int] | None,
        runner: int,
        allowed: set[int],
    ) -> list[str]:
        """The server's PASSED_ENV as `NAME=value` words for `env -i`.

        PYTHONPATH: with no owner, only entries nobody else can change are kept; for a
        root-owned server (run as root) an entry another user can change refuses the run
        (root would import what they put there; dropping it would ask a different
        interpreter than the server's). HOME: kept only where root or the runner owns it
        and nobody else can write it, else dropped: another user's HOME gives root their
        `~/.local` site-packages and `.pth` files."""
        words = []
        for key in PASSED_ENV:
            value = (env or {}).get(key)
            if value is None or "\0" in value:
                continue
            if key == "PYTHONPATH" and (owner is None or runner == 0):
                entries = [e for e in value.split(":")[:MAX_IMPORT_ENTRIES] if e]
                verdicts = [(e, self.unsafe(e, allowed, "directory")) for e in entries]
                bad = [(e, why) for e, why in verdicts if why is not None]
                if bad and owner is not None:
                    raise Refused(
                        f"not run: PYTHONPATH entry {bad[0][0]} of a root-owned server is "
                        f"not root's alone ({bad[0][1]})"
                    )
                value = ":".join(e for e, why in verdicts if why is None)
                if not value:
                    continue
            if key == "HOME" and self.unsafe(value, allowed, "directory") is not None:
                continue
            words.append(f"{key}={value}")
        return words

    def system_python(self, pid: int | None) -> list[str]:
        """The host's own Python (for our stdlib-only scripts), isolated from the environment."""
        reasons = []
        for candidate in SYSTEM_PYTHONS:
            try:
                return [*self.prefix(candidate, pid, None), "-I"]
            except Refused as e:
                reasons.append(str(e))
        raise Refused(f"no usable system Python ({'; '.join(reasons[:1])})")
