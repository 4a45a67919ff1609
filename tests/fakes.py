"""A fake host for unit tests, in the manner of httpx's MockTransport: the host's files,
links and command answers are given as data, and the Transport protocol answers from them
exactly as a real transport would (the same typed errors). What the tool under test asks is
recorded in `asked`, so a test can say which questions reached the host.

Process and GPU questions go through the finders (finders/pids.py, finders/gpus.py) as for
a real SSH host: the fake is asked `pgrep`, else /proc; nvidia-smi.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from dflash_doctor.errors import FileMissing, TransportError
from dflash_doctor.transport.base import (
    CHUNK_BYTES,
    CommandResult,
    FileId,
    HostKind,
    HostReach,
    StderrLines,
)
from dflash_doctor.transport.commands import HostCommands

# A command's answer: a result, or a function of the argv that returns one.
Answer = CommandResult | Callable[[list[str]], CommandResult]


def ok(stdout: bytes | str = b"", stderr: bytes | str = b"") -> CommandResult:
    return CommandResult(0, _b(stdout), _b(stderr))


def fails(stderr: bytes | str = b"", code: int = 1) -> CommandResult:
    return CommandResult(code, b"", _b(stderr))


def _b(text: bytes | str) -> bytes:
    return text.encode() if isinstance(text, str) else text


@dataclass
class FakeHost(HostCommands):
    """`files`: path -> bytes; `links`: path -> target; `commands`: argv prefix -> answer
    (the longest prefix that matches wins); an argv no answer matches fails as a missing
    command does in `sh` (exit 127)."""

    files: Mapping[str, bytes | str] = field(default_factory=dict)
    links: Mapping[str, str] = field(default_factory=dict)
    commands: Mapping[tuple[str, ...], Answer] = field(default_factory=dict)
    host: str = "fake"
    remote: bool = True
    modes: Mapping[str, int] = field(default_factory=dict)
    kind: HostKind = "ssh"
    asked: list[str] = field(default_factory=list)
    written: dict[str, bytes] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.bundles = self.remote  # as the real transports: another machine is bundled
        # As the real transports: a machine's /proc shows its containers' processes.
        self.reach = HostReach(containers=self.kind in ("local", "ssh"))

    # -- commands -------------------------------------------------------------------------

    def run(
        self, argv: list[str], *, timeout: float = 30.0, on_stderr: StderrLines | None = None
    ) -> CommandResult:
        self.asked.append("run " + " ".join(argv[:3]))
        best = max((k for k in self.commands if tuple(argv[: len(k)]) == k), key=len, default=None)
        if best is None:
            return fails(f"sh: 1: {argv[0]}: not found", 127)
        answer = self.commands[best]
        return answer(argv) if callable(answer) else answer

    def run_stream(self, argv: list[str], *, timeout: float = 300.0) -> Iterator[bytes]:
        res = self.run(argv, timeout=timeout)
        if not res.ok:
            lines = res.stderr.decode("utf-8", "replace").strip().splitlines()
            raise TransportError(f"{self.host}: {lines[-1] if lines else argv[0] + ' failed'}")
        return iter([res.stdout])

    # -- files ----------------------------------------------------------------------------

    def _data(self, path: str) -> bytes:
        self.asked.append(f"read {path}")
        target = self.links.get(path)
        if target is not None:
            path = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
        if path not in self.files:
            raise FileMissing(f"{self.host}:{path}: no such file or directory")
        return _b(self.files[path])

    def file_size(self, path: str) -> int:
        return len(self._data(path))

    def file_mode(self, path: str) -> int:
        self._data(path)
        return self.modes.get(path, 0o644)

    def read_file(self, path: str, *, max_bytes: int) -> bytes:
        data = self._data(path)
        if len(data) > max_bytes:
            raise TransportError(f"{self.host}:{path}: larger than {max_bytes} bytes")
        return data

    def stream_file(self, path: str, *, chunk_bytes: int = CHUNK_BYTES) -> Iterator[bytes]:
        data = self._data(path)
        return iter([data[i : i + chunk_bytes] for i in range(0, len(data), chunk_bytes)])

    def list_dir(self, path: str) -> list[str]:
        self.asked.append(f"list {path}")
        prefix = path.rstrip("/") + "/"
        found = sorted(
            {
                p[len(prefix) :].split("/", 1)[0]
                for p in [*self.files, *self.links]
                if p.startswith(prefix)
            }
        )
        if not found:
            raise FileMissing(f"{self.host}:{path}: no such file or directory")
        return found

    def readlink(self, path: str) -> str:
        self.asked.append(f"readlink {path}")
        if path not in self.links:
            raise TransportError(f"{self.host}:{path}: invalid argument")
        return self.links[path]

    def write_file(
        self,
        path: str,
        data: bytes,
        *,
        mode: int = 0o644,
        expect: FileId | None = None,
        owner: tuple[int, int] | None = None,
    ) -> FileId | None:
        self.written[path] = data
        return None

    def close(self) -> None:
        return None


def trusted_stat(argv: list[str]) -> CommandResult:
    """`stat -L -c '%u %a %F' -- PATHS`: each path root-owned, mode 755; the first a file."""
    paths = argv[argv.index("--") + 1 :]
    kinds = ["regular file"] + ["directory"] * (len(paths) - 1)
    return ok("".join(f"0 755 {k}\n" for k in kinds))


def same_path(argv: list[str]) -> CommandResult:
    """`readlink -f -- PATH`: the path itself (no links)."""
    return ok(argv[-1] + "\n")


# The questions host_exec asks before a host interpreter may run, answered as a root-run
# doctor on a host whose interpreters are root-owned and nobody else may change.
TRUSTING_HOST: dict[tuple[str, ...], Answer] = {
    ("id", "-u"): ok("0\n"),
    ("readlink", "-f"): same_path,
    ("stat", "-L"): trusted_stat,
}
