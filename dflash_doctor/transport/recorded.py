"""A recorded host tree as a host: a host's files copied under one folder (`fixtures/hosts/`).

Every host path maps under the tree's root and never leaves it: on this machine symlinks and
`..` resolve inside the tree as under chroot (a link to /etc/passwd means the tree's
etc/passwd); a tree on a remote machine is joined under its root, and a path whose `..`
climbs out of it is refused. nvidia-smi's answer is the tree's `_captured/nvidia-smi.csv`;
the process table is the tree's own /proc (no pgrep: nothing runs there); it has no live
server to ask and is never relaunched. Commands still run, on the machine that holds the
tree (the log filter, as the doctor's own user), with tree paths from `command_path`.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterator
from typing import Any

from dflash_doctor.errors import FactError, Refused
from dflash_doctor.transport.base import CHUNK_BYTES, FileId, HostKind, HostReach, Transport
from dflash_doctor.transport.chroot import resolve_inside
from dflash_doctor.transport.wrapped import Delegating

# Recorded host trees keep command outputs here (`fixtures/README.md`).
CAPTURE_DIR = "/_captured"
GPU_CAPTURE = f"{CAPTURE_DIR}/nvidia-smi.csv"


def tree_path(root: str, host_path: str, *, follow: bool = True) -> str:
    """`host_path` resolved inside `root` (chroot semantics: no symlink or `..` leaves it).
    `follow=False` leaves a final symlink unresolved (to read the link itself)."""

    def readlink(inside: str) -> str | None:
        candidate = os.path.join(root, inside.lstrip("/"))
        if not os.path.islink(candidate):
            return None
        try:
            return os.readlink(candidate)
        except OSError:
            return None

    parts = resolve_inside(host_path, readlink, follow=follow)
    if parts is None:
        raise FactError(f"{host_path}: too many levels of symbolic links")
    return os.path.join(root, *parts)


class RecordedTransport(Delegating):
    kind: HostKind = "recorded"

    def __init__(self, inner: Transport, root: str) -> None:
        super().__init__(inner)
        # A tree on this machine resolves as under chroot; one elsewhere is only joined.
        self.here = os.path.isdir(root)
        # Absolute: commands given a tree path (the log filter) run in `/` (host_exec_rules).
        self.root = os.path.abspath(root) if self.here else root
        self.relaunch_refused = f"{self.host}: a recorded host tree is never relaunched"
        self.live_refused = f"{self.host}: a recorded host tree has no live server"
        # The tree's own /proc: what ran when it was recorded (pgrep would see this
        # machine); its GPUs: the nvidia-smi answer captured with it.
        self.reach = HostReach(
            processes="proc",
            gpus="file",
            gpu_source=GPU_CAPTURE,
            runtime_log_refused="a recorded tree's log is a file, found through /proc/PID/fd",
        )
        self.machine = None

    def map(self, path: str, *, follow: bool = True) -> str:
        """Where the tree keeps the host path `path`."""
        if self.here:
            return tree_path(self.root, path, follow=follow)
        joined = posixpath.join(self.root, path.lstrip("/"))
        if not _inside(self.root, posixpath.normpath(joined)):
            raise Refused(f"{self.host}:{path}: leaves the recorded tree {self.root}")
        return joined

    def file_size(self, path: str) -> int:
        return self.inner.file_size(self.map(path))

    def file_mode(self, path: str) -> int:
        return self.inner.file_mode(self.map(path))

    def read_file(self, path: str, *, max_bytes: int) -> bytes:
        return self.inner.read_file(self.map(path), max_bytes=max_bytes)

    def stream_file(self, path: str, *, chunk_bytes: int = CHUNK_BYTES) -> Iterator[bytes]:
        return self.inner.stream_file(self.map(path), chunk_bytes=chunk_bytes)

    def list_dir(self, path: str) -> list[str]:
        return self.inner.list_dir(self.map(path))

    def readlink(self, path: str) -> str:
        return self.inner.readlink(self.map(path, follow=False))

    def real_path(self, path: str) -> str:
        """The host path `path` names once every link is resolved; Refused outside the tree."""
        if self.here:
            root = os.path.realpath(self.root)
            real = os.path.realpath(self.map(path))
        else:
            root = self.root.rstrip("/") or "/"
            real = self.inner.real_path(self.map(path))
        if not _inside(root, real):
            raise Refused(f"{self.host}:{path}: links outside the host tree")
        return "/" + posixpath.relpath(real, root) if real != root else "/"

    def write_file(
        self,
        path: str,
        data: bytes,
        *,
        mode: int = 0o644,
        expect: FileId | None = None,
        owner: tuple[int, int] | None = None,
    ) -> FileId | None:
        return self.inner.write_file(self.map(path), data, mode=mode, expect=expect, owner=owner)

    def create_file(
        self, path: str, data: bytes, *, mode: int = 0o600, owner: tuple[int, int] | None = None
    ) -> FileId:
        return self.inner.create_file(self.map(path), data, mode=mode, owner=owner)

    def file_id(self, path: str) -> FileId:
        return self.inner.file_id(self.map(path))

    def remove_file(self, path: str) -> None:
        self.inner.remove_file(self.map(path))

    def private_dir(self, path: str) -> None:
        self.inner.private_dir(self.map(path))

    def make_dir(self, path: str) -> None:
        self.inner.make_dir(self.map(path))

    def remove_dir(self, path: str) -> None:
        self.inner.remove_dir(self.map(path))

    def free_bytes(self, path: str) -> int | None:
        return self.inner.free_bytes(self.map(path))

    def command_path(self, path: str) -> str:
        # The one place a tree path leaves the transport: as an argument of a command that
        # runs on the machine holding the tree (the log filter, the probe's weights).
        return self.map(path)

    def bundle_settings(self, config: dict[str, Any]) -> dict[str, Any]:
        # The bundle maps paths under the same root; nothing in a tree runs or is asked.
        return {
            **config,
            "root": self.root,
            "recorded": True,
            "pgrep": None,
            "nvidia_smi": None,
            "commands": [],
            "gpu_capture": GPU_CAPTURE,
            "native": None,
            "server_http": None,
            "version_query": None,
            "modules": {k: v for k, v in config["modules"].items() if k != "server_http"},
        }


def _inside(root: str, path: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")
