"""Start-up cost: `dflash-doctor --help`, `checks`, `check --demo` (text and JSON) against
`python -c pass`.

    python -m bench.startup [--runs 15]

Each command runs in a fresh interpreter (as a user runs it), interleaved with the peer so
that load changes hit both alike; the median of the runs is compared. Targets: `checks` at
most 5x `python -c pass` (issue 15), `--help` at most 3x (issue 28). The load average is
printed with every ratio: on a shared machine the ratio moves with it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
COMMANDS = {
    "--help": ["-m", "dflash_doctor", "--help"],
    "checks": ["-m", "dflash_doctor", "checks"],
    "check --demo": ["-m", "dflash_doctor", "check", "--demo"],
    # The whole CLI's fixed cost in bench/log_scan.py's "whole CLI" row: a JSON report.
    "check --demo --format json": ["-m", "dflash_doctor", "check", "--demo", "--format", "json"],
}
TARGETS = {"--help": 3.0, "checks": 5.0}


def once(args: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, *args], env=env, cwd=REPO, stdout=subprocess.DEVNULL, check=False
    )
    return time.perf_counter() - start


def load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="120")
    # As installed (pip compiles on install), a user's run reads .pyc files: with
    # PYTHONDONTWRITEBYTECODE set (as on the shared machine) the warm-up below would write
    # none, and every run would compile each module changed since the last cached one.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    peer: list[float] = []
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for argv in COMMANDS.values():  # warm the file cache and .pyc files
        once(argv, env)
    for _ in range(args.runs):
        for name, argv in COMMANDS.items():
            peer.append(once(["-c", "pass"], env))
            times[name].append(once(argv, env))
    base = statistics.median(peer)
    print(f"python -c pass: {base * 1000:.0f} ms (median of {len(peer)}), {load()}")
    for name, values in times.items():
        t = statistics.median(values)
        target = f" (target <= {TARGETS[name]:g}x)" if name in TARGETS else ""
        print(f"{name:>26}: {t * 1000:5.0f} ms, {t / base:5.1f}x python -c pass{target}, {load()}")


if __name__ == "__main__":
    main()
