"""The one interface every transport (local, SSH) implements."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, Protocol, Self

from dflash_doctor.errors import TransportError

CHUNK_BYTES = 1024 * 1024
# The most one command may print on stdout or stderr before it is ended and the read fails
# (an owner's interpreter, `docker exec`, `kubectl exec`, container logs: host answers).
MAX_OUTPUT_BYTES = 256 * 1024 * 1024
# How a remote transport words the two file errors a host reports most (after the host and
# path); the SSH transport and the answers of a prefetched bundle say them alike.
NO_SUCH_FILE = "no such file or directory"
PERMISSION_DENIED = "permission denied"


# Called with each line (no newline) a command writes to stderr, while it runs.
StderrLines = Callable[[bytes], None]


class LineSplitter:
    """Hands complete lines of a byte stream to a callback; `close` flushes the last one."""

    def __init__(self, on_line: StderrLines) -> None:
        self.on_line = on_line
        self.pending = b""

    def feed(self, data: bytes) -> None:
        *lines, self.pending = (self.pending + data).split(b"\n")
        for line in lines:
            self.on_line(line)

    def close(self) -> None:
        if self.pending:
            self.on_line(self.pending)
            self.pending = b""


@dataclass(frozen=True)
class FileId:
    """What a name held when it was looked at, without following a link: a file is the
    same one later only with the same device and inode (and, with a hash, the same bytes).
    `kind`: file, dir, link or other."""

    dev: int
    ino: int
    uid: int
    gid: int
    mode: int
    size: int
    kind: str
    sha256: str | None = None

    @classmethod
    def of(cls, raw: dict[str, object]) -> FileId:
        """From on_host/safe_files.py's `identity` dict (local or a host's JSON answer)."""

        def num(key: str) -> int:
            value = raw.get(key)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"bad {key}")
            return value

        digest = raw.get("sha256")
        return cls(
            num("dev"), num("ino"), num("uid"), num("gid"), num("mode"), num("size"),
            str(raw.get("kind")), digest if isinstance(digest, str) else None,
        )  # fmt: skip

    def expected(self) -> dict[str, object]:
        """The form safe_files' `expect` takes."""
        return {"dev": self.dev, "ino": self.ino, "sha256": self.sha256}


@dataclass(frozen=True)
class CommandResult:
    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def ok(self) -> bool:
        return self.returncode == 0


# What kind of host a transport reaches. Shown to the user (report headers, `fix` text);
# nothing above the transport branches on it: it asks the transport, which answers or
# raises Refused with its reason.
HostKind = Literal["local", "ssh", "recorded", "offline", "docker", "kubernetes"]


@dataclass(frozen=True)
class LogCommand:
    """The command that prints the server log a container runtime keeps (`docker logs`,
    `kubectl logs`), as words: `before`, the line bound (`tail`: a flag ending in `=` takes
    its value in the same word, else in the next), `middle`, the since bound when one is
    given (the flag of the first pattern that matches it whole), then `end`. Only the bounds
    are filled in; no other word is ever formatted."""

    before: tuple[str, ...]
    tail: str
    # (pattern, flag) pairs a `since` value is tried against, in order.
    since: tuple[tuple[str, str], ...]
    # Why a `since` that matches none is refused (after `--since VALUE: `).
    since_refused: str
    middle: tuple[str, ...] = ()
    end: tuple[str, ...] = ()

    def argv(self, tail_lines: int, since: str | None = None) -> list[str]:
        """The argv for the last `tail_lines` lines (at least one), since `since` if given;
        a TransportError for a `since` no pattern matches (it is never an option)."""
        words = [*self.before, *_flag(self.tail, str(max(int(tail_lines), 1))), *self.middle]
        if since is not None:
            flag = next((f for p, f in self.since if re.fullmatch(p, since)), None)
            if flag is None:
                raise TransportError(f"--since {since!r}: {self.since_refused}")
            words += _flag(flag, since)
        return [*words, *self.end]


def _flag(flag: str, value: str) -> list[str]:
    return [flag + value] if flag.endswith("=") else [flag, value]


@dataclass(frozen=True)
class HostReach:
    """What a host offers beyond reading files and running commands, stated as data by its
    transport: the finders (finders/pids.py, finders/gpus.py) decide from it and ask through
    `run`, `read_file` and `list_dir` alone, so the transport stays a narrow I/O seam."""

    # How the candidate server pids are listed: "pgrep" runs `pgrep -f PATTERN` through `run`
    # (else lists /proc); "proc" only lists /proc (a recorded tree's own, where pgrep would
    # see this machine); "none": the host has no process table (`processes_refused` says why).
    processes: Literal["pgrep", "proc", "none"] = "pgrep"
    processes_refused: str = ""
    # Where the GPUs are listed: "run" runs nvidia-smi through `run`; "machine" runs it on
    # the transport's `machine` (a container's engine host: the container may carry none);
    # "file" reads `gpu_source` (a recorded tree's capture); "none": `gpus_refused` says why.
    gpus: Literal["run", "machine", "file", "none"] = "run"
    # Where the GPU list comes from, as fact errors and sources name it.
    gpu_source: str = "nvidia-smi"
    gpus_refused: str = ""
    # Whether the host's process table shows the processes of the Docker containers that
    # run on it, so a server found there may be a container's (finders/containers.py): a
    # machine (local, SSH); never a container or a recorded tree (/proc shows its own only).
    containers: bool = False
    # The command that prints the server log a container runtime keeps (`docker logs`,
    # `kubectl logs`), run on the transport's `machine` by finders/log.py; None where the
    # log is a file (found through /proc/PID/fd): `runtime_log_refused` says so.
    log_command: LogCommand | None = None
    runtime_log_refused: str = "the server log is a file here, found through /proc/PID/fd"


class Transport(Protocol):
    """Run commands and read or write files on one host: the one seam between the tool and
    a host. Opened by `transport.open.open_transport` (the only place that decides the kind).

    Every path given to a transport is a path *on the host*; the transport maps it (a
    recorded tree under its root, a container under /proc/PID/root or through exec) and
    refuses to leave it. Every method raises a TransportError subclass with one line naming
    the host and path: FileMissing, PermissionDenied, TimedOut, Refused (this kind of host
    cannot answer), or plain TransportError. Transports are context managers (close on exit).
    """

    host: str
    kind: HostKind
    # True when the host is another machine: work is then pushed to it (log filtering).
    remote: bool
    # True when each question costs a round trip or an exec (another machine, a container):
    # a gathering is then answered from one bundle (`prefetched`).
    bundles: bool
    # Why this host cannot be relaunched by `fix --apply` (a recorded tree, offline), or None.
    relaunch_refused: str | None
    # Why this host has no live server to ask (its own Python, its HTTP API, a bench): a
    # recorded tree or offline; None on a live host.
    live_refused: str | None
    # Why this host has no server log at all (offline: not even a log path given is read).
    log_refused: str | None
    # What the host offers beyond file and command I/O (its process table, its GPUs).
    reach: HostReach
    # The machine this host is reached through (a Docker container's engine host, the
    # machine that runs kubectl), where `reach` sends a question there (the engine host's
    # GPUs, the runtime's log); None where the host is a machine (or a tree) itself.
    machine: Transport | None

    def run(
        self, argv: list[str], *, timeout: float = 30.0, on_stderr: StderrLines | None = None
    ) -> CommandResult: ...

    def run_stream(self, argv: list[str], *, timeout: float = 300.0) -> Iterator[bytes]: ...

    def file_size(self, path: str) -> int: ...

    def file_mode(self, path: str) -> int: ...

    def read_file(self, path: str, *, max_bytes: int) -> bytes: ...

    def stream_file(self, path: str, *, chunk_bytes: int = CHUNK_BYTES) -> Iterator[bytes]: ...

    def list_dir(self, path: str) -> list[str]: ...

    def readlink(self, path: str) -> str: ...

    def real_path(self, path: str) -> str:
        """`path` with every symlink resolved, as a host path (inside the tree/container)."""
        ...

    def write_file(
        self,
        path: str,
        data: bytes,
        *,
        mode: int = 0o644,
        expect: FileId | None = None,
        owner: tuple[int, int] | None = None,
    ) -> FileId | None:
        """Replace `path` atomically through descriptors (on_host/safe_files.py): an
        existing file keeps its owner and group (`owner`: a new file's), `mode` is set on
        the descriptor, and with `expect` a file that changed since it was read is refused
        (UnsafeFile). The new file's identity, where the host can tell."""
        ...

    def create_file(
        self, path: str, data: bytes, *, mode: int = 0o600, owner: tuple[int, int] | None = None
    ) -> FileId:
        """Make `path` only where no such name exists (FileExists), whole, never through a
        link: backups and locks."""
        ...

    def file_id(self, path: str) -> FileId:
        """What is at `path` now, without following a link (a file: with its sha256)."""
        ...

    def remove_file(self, path: str) -> None:
        """Remove one name (a file or link, never what a link points to)."""
        ...

    def private_dir(self, path: str) -> None:
        """Make (or accept) a directory only the doctor's user can write (the apply journal
        lives there); anything else at `path` is refused (UnsafeFile)."""
        ...

    def make_dir(self, path: str) -> None:
        """mkdir (atomic, fails with TransportError when it exists): `fix` locks with it."""
        ...

    def remove_dir(self, path: str) -> None: ...

    def free_bytes(self, path: str) -> int | None:
        """Free space on the file system holding `path`; None when the host cannot say."""
        ...

    def command_path(self, path: str) -> str:
        """`path` as a command run through this transport sees it: the host path itself,
        or where a recorded tree keeps it (the log filter and the probe read files there)."""
        ...

    def prefetched(self, config: dict[str, Any]) -> Transport:
        """This transport answering a gathering from one bundle (`transport/prefetch.py`)
        where the host is remote; itself where a read costs no round trip."""
        ...

    def close(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...


# A command that outlives its timeout must not keep running on the host once we stop
# waiting: coreutils/busybox `timeout` runs it in a process group of its own and ends that
# group (TERM, then KILL after the grace) a little after our own deadline. The argv stays
# positional parameters of a fixed script, never shell words; a host without `timeout` runs
# the command as before, and a missing command fails in `sh` itself (one wording, whatever
# the locale: the bundle's answers and the transport's must read the same).
BOUNDED_SCRIPT = (
    'T=$1; shift; if command -v timeout >/dev/null 2>&1 && command -v "$1" >/dev/null 2>&1; '
    'then exec timeout -k 5 "$T" "$@"; fi; exec "$@"'
)
HOST_GRACE_S = 2


def bounded_on_host(argv: list[str], timeout: float) -> list[str]:
    """`argv` wrapped so that the host ends it (and its children) after `timeout` seconds."""
    limit = int(timeout) + HOST_GRACE_S
    return ["sh", "-c", BOUNDED_SCRIPT, "sh", str(limit), *argv]
