"""The Transport protocol's file questions answered by running commands on the host.

Shared by every transport that can run commands (SSH, containers); the local transport
answers the file-system ones through the OS instead. All argv are fixed words plus host
paths after `--`: host text never becomes a shell word or an option.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Self, cast

from dflash_doctor.errors import (
    DoctorError,
    FileExists,
    FileMissing,
    PermissionDenied,
    Refused,
    TransportError,
    UnsafeFile,
)
from dflash_doctor.transport.base import CommandResult, FileId, HostReach

if TYPE_CHECKING:
    from dflash_doctor.transport.base import Transport

# on_host/safe_files.py's error kinds, as the TransportError each stands for.
SAFE_ERRORS: dict[str, type[TransportError]] = {
    "unsafe": UnsafeFile,
    "exists": FileExists,
    "missing": FileMissing,
    "denied": PermissionDenied,
}


def safe_error(host: str, path: str, kind: str, reason: str) -> TransportError:
    """One line naming host and path for a refused or failed safe_files change."""
    cls = SAFE_ERRORS.get(kind, TransportError)
    return cls(f"{host}:{path}: {'refused: ' if cls is UnsafeFile else ''}{reason.lower()}")


class HostCommands:
    """Mixin: needs `host`, `run` and `list_dir` from the transport it is mixed into."""

    host: str
    remote: bool
    bundles: bool = False
    relaunch_refused: str | None = None
    live_refused: str | None = None
    log_refused: str | None = None
    # A host that runs commands: pgrep and nvidia-smi are asked there (finders/pids.py,
    # finders/gpus.py), through `run`.
    reach: HostReach = HostReach()
    machine: Transport | None = None

    def run(
        self, argv: list[str], *, timeout: float = 30.0, on_stderr: None = None
    ) -> CommandResult:
        raise NotImplementedError

    def list_dir(self, path: str) -> list[str]:
        raise NotImplementedError

    def real_path(self, path: str) -> str:
        try:
            res = self.run(["readlink", "-f", "--", path], timeout=10)
        except DoctorError:
            return path
        real = res.stdout.decode("utf-8", "replace").strip()
        return real if res.ok and real.startswith("/") and "\n" not in real else path

    def make_dir(self, path: str) -> None:
        res = self.run(["mkdir", "--", path], timeout=10)
        if not res.ok:
            raise TransportError(f"{self.host}:{path}: cannot make directory (it may exist)")

    def remove_dir(self, path: str) -> None:
        self.run(["rmdir", "--", path], timeout=10)

    def free_bytes(self, path: str) -> int | None:
        try:
            res = self.run(["df", "-Pk", "--", path], timeout=20)
            return int(res.stdout.decode("ascii", "replace").splitlines()[1].split()[3]) * 1024
        except (DoctorError, ValueError, IndexError):
            return None  # no df there: the atomic writes still fail cleanly

    def create_file(
        self, path: str, data: bytes, *, mode: int = 0o600, owner: tuple[int, int] | None = None
    ) -> FileId:
        raise Refused(f"{self.host}:{path}: files are not made on this kind of host")

    def file_id(self, path: str) -> FileId:
        raise Refused(f"{self.host}:{path}: this kind of host cannot tell a file's inode")

    def remove_file(self, path: str) -> None:
        raise Refused(f"{self.host}:{path}: files are not removed on this kind of host")

    def private_dir(self, path: str) -> None:
        raise Refused(f"{self.host}:{path}: no directory is made on this kind of host")

    def command_path(self, path: str) -> str:
        return path

    def prefetched(self, config: dict[str, Any]) -> Transport:
        me = cast("Transport", self)
        if not self.bundles:
            return me
        from dflash_doctor.transport.prefetch import PrefetchTransport

        return PrefetchTransport(me, self.bundle_settings(config))

    def bundle_settings(self, config: dict[str, Any]) -> dict[str, Any]:
        """The bundle's config as this kind of host needs it (a live host: as it is)."""
        return config

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        close = getattr(self, "close", None)
        if close is not None:
            close()
