"""File questions answered by commands run inside a container (`docker exec`, `kubectl exec`).

Each question is a fixed POSIX sh script whose host path arrives as a positional parameter
(`"$1"`), never as a shell word or an option (`--` before it where the tool takes options).
The scripts run as the container's own user, with that user's view of its mount namespace:
symlinks resolve inside the container, so a link to /etc/shadow is the container's file.
Exit codes 3-5 say why a file could not be read, so that the errors read as the local and SSH
transports' do (FileMissing, PermissionDenied, not a regular file).
"""

from __future__ import annotations

from collections.abc import Iterator

from dflash_doctor.errors import FileMissing, PermissionDenied, TransportError
from dflash_doctor.transport.base import (
    CHUNK_BYTES,
    NO_SUCH_FILE,
    PERMISSION_DENIED,
    CommandResult,
)

MAX_LIST_ENTRIES = 65536
# `$1` the path; exits 3 (missing), 4 (not a regular file), 5 (unreadable) before reading.
_REGULAR = '[ -e "$1" ] || exit 3; [ -f "$1" ] || exit 4; [ -r "$1" ] || exit 5; '
READ_SCRIPT = _REGULAR + 'exec head -c "$2" -- "$1"'
CAT_SCRIPT = _REGULAR + 'exec cat -- "$1"'
SIZE_SCRIPT = _REGULAR + 'exec stat -L -c %s -- "$1"'
MODE_SCRIPT = '[ -e "$1" ] || exit 3; exec stat -L -c %a -- "$1"'
# Every entry, dot files too, NUL-terminated (a name may hold a newline).
LIST_SCRIPT = (
    '[ -e "$1" ] || exit 3; [ -d "$1" ] || exit 4; cd -- "$1" 2>/dev/null || exit 5; '
    'for f in * .[!.]* ..?*; do if [ -e "$f" ] || [ -L "$f" ]; then printf "%s\\0" "$f"; fi; '
    "done"
)
LINK_SCRIPT = '[ -L "$1" ] || { [ -e "$1" ] || exit 3; exit 4; }; exec readlink -- "$1"'


class ExecFiles:
    """Mixin: file access through `self.run` inside the container (its argv runs there)."""

    host: str

    def run(
        self, argv: list[str], *, timeout: float = 30.0, on_stderr: None = None
    ) -> CommandResult:
        raise NotImplementedError

    def run_stream(self, argv: list[str], *, timeout: float = 300.0) -> Iterator[bytes]:
        raise NotImplementedError

    def _sh(self, script: str, *args: str, timeout: float = 30.0) -> CommandResult:
        return self.run(["sh", "-c", script, "sh", *args], timeout=timeout)

    def _check(self, res: CommandResult, path: str, what: str) -> None:
        if res.ok:
            return
        if res.returncode == 3:
            raise FileMissing(f"{self.host}:{path}: {NO_SUCH_FILE}")
        if res.returncode == 4:
            raise TransportError(f"{self.host}:{path}: not a {what}")
        if res.returncode == 5:
            raise PermissionDenied(f"{self.host}:{path}: {PERMISSION_DENIED}")
        lines = res.stderr.decode("utf-8", "replace").strip().splitlines()
        raise TransportError(
            f"{self.host}:{path}: {lines[-1][:200] if lines else f'exit {res.returncode}'}"
        )

    def file_size(self, path: str) -> int:
        res = self._sh(SIZE_SCRIPT, path)
        self._check(res, path, "regular file")
        text = res.stdout.decode("ascii", "replace").strip()
        if not (text.isascii() and text.isdigit()):
            raise TransportError(f"{self.host}:{path}: stat gave no size")
        return int(text)

    def file_mode(self, path: str) -> int:
        res = self._sh(MODE_SCRIPT, path)
        self._check(res, path, "file")
        text = res.stdout.decode("ascii", "replace").strip()
        try:
            return int(text, 8) & 0o7777
        except ValueError:
            raise TransportError(f"{self.host}:{path}: stat gave no mode") from None

    def read_file(self, path: str, *, max_bytes: int) -> bytes:
        res = self._sh(READ_SCRIPT, path, str(max_bytes + 1), timeout=60)
        self._check(res, path, "regular file")
        if len(res.stdout) > max_bytes:
            raise TransportError(f"{self.host}:{path}: larger than {max_bytes} bytes")
        return res.stdout

    def stream_file(self, path: str, *, chunk_bytes: int = CHUNK_BYTES) -> Iterator[bytes]:
        # Checked first, so that a missing file raises the same typed error as a read.
        self._check(self._sh(SIZE_SCRIPT, path), path, "regular file")
        return self.run_stream(["sh", "-c", CAT_SCRIPT, "sh", path], timeout=600)

    def list_dir(self, path: str) -> list[str]:
        res = self._sh(LIST_SCRIPT, path)
        self._check(res, path, "directory")
        names = [n.decode("utf-8", "surrogateescape") for n in res.stdout.split(b"\0") if n]
        return sorted(names[:MAX_LIST_ENTRIES])

    def readlink(self, path: str) -> str:
        res = self._sh(LINK_SCRIPT, path)
        self._check(res, path, "link")
        return res.stdout.decode("utf-8", "surrogateescape").removesuffix("\n")
