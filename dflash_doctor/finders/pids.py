"""Which pids may run a server: the host's process table as its transport offers it
(`Transport.reach.processes`), asked through `run` and `list_dir` only."""

from __future__ import annotations

from dflash_doctor.errors import DoctorError, OutOfReach
from dflash_doctor.transport.base import Transport

MAX_PROCESSES = 65536
# The candidate SGLang servers' question; the bundle asks the same argv (prefetch_plan), so
# a prefetched transport answers it from its one round trip.
PGREP_ARGV = ("pgrep", "-f", "sglang")


def process_ids(t: Transport) -> list[int]:
    """Candidate server pids: `pgrep -f sglang` run on the host, else every
    pid its /proc lists; only /proc's listing where pgrep would see another machine (a
    recorded tree's own /proc); OutOfReach where the host has no process table (offline)."""
    reach = t.reach
    if reach.processes == "none":
        raise OutOfReach(reach.processes_refused)
    if reach.processes == "pgrep":
        try:
            res = t.run(list(PGREP_ARGV), timeout=10)
            # pgrep exits 1 when nothing matches: then there is no server process.
            if res.returncode in (0, 1):
                return [int(x) for x in res.stdout.split() if x.isascii() and x.isdigit()]
        except DoctorError:
            pass
    return proc_pids(t.list_dir("/proc"))


def proc_pids(entries: list[str]) -> list[int]:
    """The pids among a /proc listing's names."""
    # ASCII digits only: str.isdigit accepts '²', which int() refuses.
    return [int(e) for e in entries[:MAX_PROCESSES] if e.isascii() and e.isdigit()]
