"""Offline: no host at all, only launch and model files on this machine (the `gate`).

The files are read as the local transport reads them; every question about a running host
(its processes, its server log, its GPUs, its live server) is refused with the reason, and
nothing is ever relaunched.
"""

from __future__ import annotations

from dflash_doctor.errors import OutOfReach
from dflash_doctor.transport.base import HostKind, HostReach, Transport
from dflash_doctor.transport.wrapped import Delegating


class OfflineTransport(Delegating):
    kind: HostKind = "offline"

    def __init__(self, inner: Transport) -> None:
        super().__init__(inner)
        self.relaunch_refused = f"{self.host}: offline: nothing runs, so nothing is relaunched"
        self.live_refused = f"{self.host}: offline: no running server"
        self.log_refused = f"{self.host}: offline: no running server, no log"
        self.reach = HostReach(
            processes="none",
            processes_refused=f"{self.host}: offline: no server process (give a launch file)",
            gpus="none",
            gpus_refused=f"{self.host}: offline: no host to list GPUs of",
        )
        self.machine = None

    def _no_proc(self, path: str) -> str:
        # This machine's /proc is not the host's: no pid given or found is read here.
        if path == "/proc" or path.startswith("/proc/"):
            raise OutOfReach(f"{self.host}:{path}: offline: no process table")
        return path

    def read_file(self, path: str, *, max_bytes: int) -> bytes:
        return self.inner.read_file(self._no_proc(path), max_bytes=max_bytes)

    def readlink(self, path: str) -> str:
        return self.inner.readlink(self._no_proc(path))

    def list_dir(self, path: str) -> list[str]:
        return self.inner.list_dir(self._no_proc(path))
