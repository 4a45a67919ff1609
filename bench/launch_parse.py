"""Hostile launch scripts: the shell walk (facts/shell.py) against `grep -c` on the same bytes.

    python -m bench.launch_parse [--size-kb 512] [--runs 5]

Each shape is written at `--size-kb` and at a quarter of it; the walk's CPU time is printed
with the ratio to `grep -c sglang` over the same file, and the growth from the quarter to the
whole size (linear ~4x; a walk that copies its word on every character grows ~16x, which is
what made a 500 KB quoted word cost a minute of CPU on a loaded CI machine). The median of the
runs is compared; the load average is printed with every line.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable

from dflash_doctor.errors import FactError
from dflash_doctor.facts.launch import parse_script

SHAPES: dict[str, Callable[[int], str]] = {
    "quoted word": lambda n: '"' + "a" * n,
    "quoted, escapes": lambda n: 'x="' + "a\\b" * (n // 3) + '"\n',
    "unquoted word": lambda n: "python -m sglang.launch_server --model-path " + "a" * n + "\n",
    "comments in a word": lambda n: "a#" * (n // 2) + "\n",
    "dollars": lambda n: "x=" + "$" * n + "\npython -m sglang.launch_server\n",
    "backslashes": lambda n: "\\" * (n + 1),
    "expansions": lambda n: "python -m sglang.launch_server --x " + "$A" * (n // 2) + "\n",
}


def load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def walk(text: bytes) -> float:
    def read(path: str) -> bytes:
        raise FactError(f"{path}: not read in the benchmark")

    start = time.process_time()
    with contextlib.suppress(FactError):
        parse_script(text, source="bench", read=read, path="launch.sh")
    return time.process_time() - start


def grep(path: str) -> float:
    start = time.perf_counter()
    subprocess.run(["grep", "-c", "sglang", path], stdout=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-kb", type=int, default=512)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    n = args.size_kb * 1024
    with tempfile.TemporaryDirectory() as tmp:
        for name, make in SHAPES.items():
            whole, quarter = make(n).encode(), make(n // 4).encode()
            path = os.path.join(tmp, "launch.sh")
            with open(path, "wb") as f:
                f.write(whole)
            t_whole, t_quarter, t_grep = [], [], []
            for _ in range(args.runs):
                t_grep.append(grep(path))
                t_whole.append(walk(whole))
                t_quarter.append(walk(quarter))
            w, q, g = (statistics.median(v) for v in (t_whole, t_quarter, t_grep))
            print(
                f"{name:>20}: {w * 1000:7.1f} ms, {w / g:6.1f}x grep -c, "
                f"quarter->whole {w / max(q, 1e-6):4.1f}x (linear ~4x), {load()}"
            )


if __name__ == "__main__":
    main()
