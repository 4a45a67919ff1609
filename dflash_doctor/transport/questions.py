"""Host questions asked through a transport's own `run` and `list_dir`: shared by the
transports that run commands (transport/commands.py) and by the bundle, which answers the
same commands from its one round trip (transport/prefetch.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dflash_doctor.errors import DoctorError, TransportError

if TYPE_CHECKING:
    from dflash_doctor.transport.base import Transport

MAX_PROCESSES = 65536
NVIDIA_SMI = "nvidia-smi"
# The candidate servers' question; the bundle asks the same argv (prefetch_plan).
PGREP_ARGV = ("pgrep", "-f", "sglang")


def pgrep_or_proc(t: Transport) -> list[int]:
    """Candidate server pids: `pgrep -f sglang`, else every pid /proc lists."""
    try:
        res = t.run(list(PGREP_ARGV), timeout=10)
        # pgrep exits 1 when nothing matches: then there is no server process.
        if res.returncode in (0, 1):
            return [int(x) for x in res.stdout.split() if x.isascii() and x.isdigit()]
    except DoctorError:
        pass
    return proc_pids(t.list_dir("/proc"))


def proc_pids(entries: list[str]) -> list[int]:
    # ASCII digits only: str.isdigit accepts '²', which int() refuses.
    return [int(e) for e in entries[:MAX_PROCESSES] if e.isascii() and e.isdigit()]


def nvidia_smi_table(t: Transport) -> bytes:
    """nvidia-smi's CSV, run on the host; TransportError with its first stderr line."""
    from dflash_doctor.facts.gpus import NVIDIA_SMI_ARGV

    res = t.run(NVIDIA_SMI_ARGV, timeout=20)
    if not res.ok:
        first = res.stderr.decode("utf-8", "replace").strip().splitlines()[:1]
        raise TransportError(
            f"{t.host}: nvidia-smi failed: {first[0] if first else res.returncode}"
        )
    return res.stdout
