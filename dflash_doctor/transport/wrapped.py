"""A transport that hands every question to another one: the base of the recorded-tree
and offline transports, which change only what differs for their kind of host."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any, Self

from dflash_doctor.transport.base import (
    CHUNK_BYTES,
    CommandResult,
    FileId,
    HostKind,
    StderrLines,
    Transport,
)


class Delegating:
    """Every Transport method answered by `inner`; subclasses override what they change."""

    kind: HostKind

    def __init__(self, inner: Transport) -> None:
        self.inner = inner
        self.host = inner.host
        self.remote = inner.remote
        self.bundles = inner.bundles
        self.relaunch_refused: str | None = inner.relaunch_refused
        self.live_refused: str | None = inner.live_refused
        self.log_refused: str | None = inner.log_refused
        self.reach = inner.reach
        self.machine = inner.machine

    def run(
        self, argv: list[str], *, timeout: float = 30.0, on_stderr: StderrLines | None = None
    ) -> CommandResult:
        return self.inner.run(argv, timeout=timeout, on_stderr=on_stderr)

    def run_stream(self, argv: list[str], *, timeout: float = 300.0) -> Iterator[bytes]:
        return self.inner.run_stream(argv, timeout=timeout)

    def file_size(self, path: str) -> int:
        return self.inner.file_size(path)

    def file_mode(self, path: str) -> int:
        return self.inner.file_mode(path)

    def read_file(self, path: str, *, max_bytes: int) -> bytes:
        return self.inner.read_file(path, max_bytes=max_bytes)

    def stream_file(self, path: str, *, chunk_bytes: int = CHUNK_BYTES) -> Iterator[bytes]:
        return self.inner.stream_file(path, chunk_bytes=chunk_bytes)

    def list_dir(self, path: str) -> list[str]:
        return self.inner.list_dir(path)

    def readlink(self, path: str) -> str:
        return self.inner.readlink(path)

    def real_path(self, path: str) -> str:
        return self.inner.real_path(path)

    def write_file(
        self,
        path: str,
        data: bytes,
        *,
        mode: int = 0o644,
        expect: FileId | None = None,
        owner: tuple[int, int] | None = None,
    ) -> FileId | None:
        return self.inner.write_file(path, data, mode=mode, expect=expect, owner=owner)

    def create_file(
        self, path: str, data: bytes, *, mode: int = 0o600, owner: tuple[int, int] | None = None
    ) -> FileId:
        return self.inner.create_file(path, data, mode=mode, owner=owner)

    def file_id(self, path: str) -> FileId:
        return self.inner.file_id(path)

    def remove_file(self, path: str) -> None:
        self.inner.remove_file(path)

    def private_dir(self, path: str) -> None:
        self.inner.private_dir(path)

    def make_dir(self, path: str) -> None:
        self.inner.make_dir(path)

    def remove_dir(self, path: str) -> None:
        self.inner.remove_dir(path)

    def free_bytes(self, path: str) -> int | None:
        return self.inner.free_bytes(path)

    def command_path(self, path: str) -> str:
        return self.inner.command_path(path)

    def prefetched(self, config: dict[str, Any]) -> Transport:
        # The bundle answers for the host under this wrapper: the wrapper stays on top.
        inner = self.inner.prefetched(self.bundle_settings(config))
        if inner is self.inner:
            return self
        twin = copy.copy(self)
        twin.inner = inner
        return twin

    def bundle_settings(self, config: dict[str, Any]) -> dict[str, Any]:
        """The bundle's config as this kind of host needs it (a recorded tree: its root)."""
        return config

    def close(self) -> None:
        self.inner.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
