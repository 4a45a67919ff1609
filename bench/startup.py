"""Start-up cost: `dflash-doctor --help`, `checks`, `check --demo` against `python -c pass`.

    python -m bench.startup [--runs 15]

Each command runs in a fresh interpreter (as a user runs it), interleaved with the peer so
that load changes hit both alike; the median of the runs is compared. Target (issue 15):
`--help` and `checks` at most 5x `python -c pass`. The load average is printed with every
ratio: on a shared machine the ratio moves with it.
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
}
TARGETS = {"--help": 5.0, "checks": 5.0}


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
        print(f"{name:>14}: {t * 1000:5.0f} ms, {t / base:5.1f}x python -c pass{target}, {load()}")


if __name__ == "__main__":
    main()
