"""`report merge` over N per-host reports against `jq -s` on the same files, in one run.

    python -m bench.merge [--reports 1000] [--runs 3] [--hosts]

One real report (`check --demo --format json`) is written once, then copied N times under a
temporary directory with its host renamed (`gpu-0001`...) and every tenth host on another
SGLang version (drift to find). Each run times `dflash-doctor report merge FILES` (text,
stdout to /dev/null; `--hosts` adds the per-host detail) and the peer `jq -s . FILES >
/dev/null`, interleaved so load hits both alike; printed: the median of each, the ratio
(target: at most 2x), the merge's peak RSS and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TARGET = 2.0


def load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def write_reports(directory: Path, n: int, env: dict[str, str]) -> list[Path]:
    """N reports of the demo host, renamed, every tenth on another SGLang version."""
    seed = directory / "seed.json"
    argv = [sys.executable, "-m", "dflash_doctor", "check", "--demo", "--output", str(seed)]
    subprocess.run(argv, env=env, cwd=REPO, stdout=subprocess.DEVNULL, check=False)
    template = json.loads(seed.read_text())
    seed.unlink()
    paths = []
    for i in range(n):
        doc = json.loads(json.dumps(template))
        name = f"gpu-{i:04d}"
        host = doc["hosts"][0]
        host["host"] = name
        if host.get("facts"):
            host["facts"]["host"] = name
            version = host["facts"]["sglang_version"]
            if i % 10 == 9:  # another release than the seed's
                version["value"] = "0.5.23" if version["value"] != "0.5.23" else "0.5.13"
        path = directory / f"{name}.json"
        path.write_text(json.dumps(doc, indent=2))
        paths.append(path)
    return paths


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (bytes) of one command, its stdout discarded."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, cwd=REPO, stdout=subprocess.DEVNULL)
    _, _, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0  # reaped above
    return time.perf_counter() - start, usage.ru_maxrss * 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reports", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--hosts", action="store_true", help="time the per-host detail too")
    args = ap.parse_args()
    if shutil.which("jq") is None:
        raise SystemExit("jq is not installed: it is the peer (apt-get install jq)")
    env = dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="120")
    with tempfile.TemporaryDirectory(prefix="merge-bench-") as tmp:
        files = [str(p) for p in write_reports(Path(tmp), args.reports, env)]
        size = sum(os.path.getsize(f) for f in files)
        merge = [sys.executable, "-m", "dflash_doctor", "report", "merge", *files]
        if args.hosts:
            merge.append("--hosts")
        peer = ["jq", "-s", ".", *files]
        timed(merge, env), timed(peer, env)  # warm the file cache and .pyc files
        ours: list[float] = []
        theirs: list[float] = []
        rss = 0
        for _ in range(args.runs):
            t, r = timed(merge, env)
            ours.append(t)
            rss = max(rss, r)
            theirs.append(timed(peer, env)[0])
    a, b = statistics.median(ours), statistics.median(theirs)
    what = "report merge --hosts" if args.hosts else "report merge"
    print(f"{args.reports} reports, {size / 1e6:.1f} MB; {load()}")
    print(f"jq -s . FILES: {b:.2f} s (median of {args.runs})")
    print(
        f"{what} (text): {a:.2f} s, {a / b:.2f}x jq -s (target <= {TARGET:g}x), "
        f"peak RSS {rss / 2**20:.0f} MiB, {load()}"
    )


if __name__ == "__main__":
    main()
