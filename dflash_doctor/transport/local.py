"""The local machine as a host: files through the OS, commands through subprocess."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import stat
import subprocess
import threading
from collections.abc import Callable, Iterator
from typing import IO, BinaryIO

from dflash_doctor.errors import FileMissing, PermissionDenied, TimedOut, TransportError
from dflash_doctor.on_host import safe_files
from dflash_doctor.transport.base import (
    CHUNK_BYTES,
    MAX_OUTPUT_BYTES,
    CommandResult,
    FileId,
    HostKind,
    HostReach,
    LineSplitter,
    StderrLines,
)
from dflash_doctor.transport.commands import HostCommands, safe_error


def _os_error(host: str, path: str, e: OSError) -> TransportError:
    """The TransportError kind an OS error stands for, naming host and path."""
    reason = e.strerror or type(e).__name__
    kind: type[TransportError] = TransportError
    if e.errno == errno.ENOENT:
        kind = FileMissing
    elif e.errno in (errno.EACCES, errno.EPERM):
        kind = PermissionDenied
    return kind(f"{host}:{path}: {reason.lower()}")


# remove_file answers no identity: a placeholder FileId.of accepts.
_EMPTY_ID: dict[str, object] = dict.fromkeys(("dev", "ino", "uid", "gid", "mode", "size"), 0)


class _Ended:
    """Why a command was ended early (first reason wins); ends its whole process group."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.why: str | None = None
        self._lock = threading.Lock()

    def end(self, why: str) -> None:
        with self._lock:
            if self.why is None:
                self.why = why
        # The command leads a session of its own: its children (which may hold the pipes
        # open) go with it. The leader is not reaped yet, so its pid is still its group's.
        with contextlib.suppress(OSError):
            if self.proc.poll() is None:
                os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            self.proc.kill()


def _drain(
    stream: IO[bytes],
    into: bytearray,
    cap: int,
    ended: _Ended,
    name: str,
    lines: LineSplitter | None = None,
) -> None:
    """Read `stream` to its end into `into`, keeping at most `cap` bytes; past that the
    command is ended (`name` says which output) and the rest read and dropped."""
    fd = stream.fileno()
    for chunk in iter(lambda: os.read(fd, CHUNK_BYTES), b""):
        if len(into) + len(chunk) > cap:
            ended.end(name)
            continue
        into += chunk
        if lines is not None:
            lines.feed(chunk)
    if lines is not None:
        lines.close()


class LocalTransport(HostCommands):
    """This machine as a host; the commands that answer facts come from HostCommands."""

    remote = False
    kind: HostKind = "local"
    # A machine: its /proc shows the processes of the containers its engine runs.
    reach = HostReach(containers=True)

    def __init__(self, host: str = "localhost", *, max_output: int = MAX_OUTPUT_BYTES) -> None:
        self.host = host
        self.max_output = max_output
        self.relaunch_refused: str | None = None

    def run(
        self, argv: list[str], *, timeout: float = 30.0, on_stderr: StderrLines | None = None
    ) -> CommandResult:
        """Run argv without a shell; a missing command, a timeout and an OS error are typed.

        Stdin is /dev/null and the command starts a session of its own (no controlling
        terminal): what it runs (an owner's interpreter, a host's script) can neither read
        the doctor's terminal nor push input into it (TIOCSTI). Each output is bounded by
        `max_output` bytes: past it the command is ended and the read fails with one line.
        """
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except FileNotFoundError:
            raise TransportError(f"{self.host}: command not found: {argv[0]}") from None
        except OSError as e:
            raise _os_error(self.host, argv[0], e) from None
        return self._collect(proc, argv, timeout, on_stderr)

    def _collect(
        self,
        proc: subprocess.Popen[bytes],
        argv: list[str],
        timeout: float,
        on_stderr: StderrLines | None,
    ) -> CommandResult:
        """Read both outputs of `proc` (bounded), handing stderr lines over as they come."""
        stdout, stderr = proc.stdout, proc.stderr
        assert stdout is not None and stderr is not None
        ended = _Ended(proc)
        out = bytearray()
        reader = threading.Thread(
            target=_drain, args=(stdout, out, self.max_output, ended, "stdout"), daemon=True
        )
        reader.start()
        killer = threading.Timer(timeout, ended.end, args=("timeout",))
        killer.start()
        err = bytearray()
        lines = LineSplitter(on_stderr) if on_stderr is not None else None
        try:
            _drain(stderr, err, self.max_output, ended, "stderr", lines)
            proc.wait()  # the killer timer bounds this wait
        except BaseException:
            ended.end("interrupted")  # on_stderr raised, or Ctrl-C: leave nothing behind
            proc.wait()
            raise
        finally:
            killer.cancel()
            reader.join()
            stdout.close()
            stderr.close()
        if ended.why == "timeout":
            raise TimedOut(f"{self.host}: {argv[0]} timed out after {timeout:g}s")
        if ended.why is not None:
            raise TransportError(
                f"{self.host}: {argv[0]} wrote more than {self.max_output} bytes on "
                f"{ended.why}: stopped, the rest cut"
            )
        return CommandResult(proc.returncode, bytes(out), bytes(err))

    def run_stream(self, argv: list[str], *, timeout: float = 300.0) -> Iterator[bytes]:
        """Run argv to the end, then hand its stdout over as one chunk."""
        res = self.run(argv, timeout=timeout)
        if not res.ok:
            lines = res.stderr.decode("utf-8", "replace").strip().splitlines()
            raise TransportError(f"{self.host}: {lines[-1] if lines else argv[0] + ' failed'}")
        return iter([res.stdout])

    def _regular(self, path: str) -> None:
        """Refuse anything but a regular file."""
        # Never open a FIFO or device: the read could block forever or never end.
        try:
            mode = os.stat(path).st_mode
        except OSError as e:
            raise _os_error(self.host, path, e) from None
        if not stat.S_ISREG(mode):
            raise TransportError(f"{self.host}:{path}: not a regular file")

    def file_size(self, path: str) -> int:
        """The size of a regular file."""
        self._regular(path)
        return os.stat(path).st_size

    def file_mode(self, path: str) -> int:
        """The permission bits of a path."""
        try:
            return stat.S_IMODE(os.stat(path).st_mode)
        except OSError as e:
            raise _os_error(self.host, path, e) from None

    def read_file(self, path: str, *, max_bytes: int) -> bytes:
        """A whole regular file, refused when larger than max_bytes."""
        self._regular(path)
        try:
            with open(path, "rb") as f:
                data = f.read(max_bytes + 1)
        except OSError as e:
            raise _os_error(self.host, path, e) from None
        if len(data) > max_bytes:
            raise TransportError(f"{self.host}:{path}: larger than {max_bytes} bytes")
        return data

    def stream_file(self, path: str, *, chunk_bytes: int = CHUNK_BYTES) -> Iterator[bytes]:
        """A regular file in chunks, opened now so that a missing file fails here."""
        self._regular(path)
        try:
            f = open(path, "rb")  # noqa: SIM115 - closed by the generator below
        except OSError as e:
            raise _os_error(self.host, path, e) from None
        return self._chunks(f, path, chunk_bytes)

    def _chunks(self, f: BinaryIO, path: str, chunk_bytes: int) -> Iterator[bytes]:
        """Read an open file to its end, then close it."""
        with f:
            while True:
                try:
                    chunk = f.read(chunk_bytes)
                except OSError as e:
                    raise _os_error(self.host, path, e) from None
                if not chunk:
                    return
                yield chunk

    def list_dir(self, path: str) -> list[str]:
        """The names in a directory, sorted."""
        try:
            return sorted(os.listdir(path))
        except OSError as e:
            raise _os_error(self.host, path, e) from None

    def readlink(self, path: str) -> str:
        """Where a symbolic link points, as written in the link."""
        try:
            return os.readlink(path)
        except OSError as e:
            raise _os_error(self.host, path, e) from None

    def _safely(self, path: str, change: Callable[[], dict[str, object]]) -> FileId:
        """A safe_files change, its refusals and OS errors as one typed line."""
        try:
            return FileId.of(change())
        except safe_files.Unsafe as e:
            raise safe_error(self.host, path, "unsafe", str(e)) from None
        except OSError as e:
            kind = safe_files.kind_of(e)
            raise safe_error(self.host, path, kind, e.strerror or type(e).__name__) from None

    def write_file(
        self,
        path: str,
        data: bytes,
        *,
        mode: int = 0o644,
        expect: FileId | None = None,
        owner: tuple[int, int] | None = None,
    ) -> FileId:
        """Write atomically through descriptors (on_host/safe_files.py): the file keeps
        its owner and group, a change since `expect` is refused, and no link is followed
        (a caller that writes through one resolves it first, with real_path)."""
        want = expect.expected() if expect is not None else None
        return self._safely(path, lambda: safe_files.replace_file(path, data, mode, want, owner))

    def create_file(
        self, path: str, data: bytes, *, mode: int = 0o600, owner: tuple[int, int] | None = None
    ) -> FileId:
        """Make a new file, refused (FileExists) where the name exists, a link included."""
        return self._safely(path, lambda: safe_files.create_file(path, data, mode, owner))

    def file_id(self, path: str) -> FileId:
        """What is at `path`, not following a link."""
        return self._safely(path, lambda: safe_files.file_id(path))

    def remove_file(self, path: str) -> None:
        """Remove one name, never what a link points to."""

        def gone() -> dict[str, object]:
            safe_files.remove_file(path)
            return _EMPTY_ID

        self._safely(path, gone)

    def private_dir(self, path: str) -> None:
        """A directory only the doctor's user can write."""
        self._safely(path, lambda: safe_files.private_dir(path))

    def real_path(self, path: str) -> str:
        """The path with every symbolic link resolved."""
        return os.path.realpath(path)

    def make_dir(self, path: str) -> None:
        """Create one directory (not its parents)."""
        try:
            os.mkdir(path)
        except OSError as e:
            raise _os_error(self.host, path, e) from None

    def remove_dir(self, path: str) -> None:
        """Remove one empty directory."""
        try:
            os.rmdir(path)
        except OSError as e:
            raise _os_error(self.host, path, e) from None

    def free_bytes(self, path: str) -> int | None:
        """Free bytes on the file system that holds path; None when it cannot be asked."""
        try:
            return shutil.disk_usage(path).free
        except OSError:
            return None

    def close(self) -> None:
        """Nothing to close: no connection is held."""
        return None
