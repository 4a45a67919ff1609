"""Log-scan throughput: dflash-doctor's streaming parser vs `grep -c` on the same 1 GB log.

    python -m bench.log_scan [--size 1e9] [--dir /tmp]

Writes a generated SGLang log, warms the page cache, then times in one run:
- `grep -c -F -e DFLASH -e "accept len: "`: the same markers the parser looks for;
- `grep -c -F "accept len: "`: grep's best case, one fixed string;
- the parser (LocalTransport.stream_file + scan_log), as `check` runs it.
Prints the ratios parser/grep (target: no worse than 3x). Best of --repeat runs each.
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from pathlib import Path

from bench.gen_log import write_log
from dflash_doctor.facts.server_log import scan_log
from dflash_doctor.transport.local import LocalTransport


def best(fn: object, repeat: int) -> float:
    assert callable(fn)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=float, default=1e9)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    path = Path(args.dir) / "dflash-doctor-bench.log"
    try:
        write_log(path, int(args.size))
        size = path.stat().st_size
        grep_same = ["grep", "-c", "-F", "-e", "DFLASH", "-e", "accept len: ", str(path)]
        grep_one = ["grep", "-c", "-F", "accept len: ", str(path)]
        subprocess.run(grep_one, capture_output=True, check=True)  # warm the page cache
        t_same = best(
            lambda: subprocess.run(grep_same, capture_output=True, check=True), args.repeat
        )
        t_one = best(lambda: subprocess.run(grep_one, capture_output=True, check=True), args.repeat)
        transport = LocalTransport("bench")
        result = {}

        def parse() -> None:
            result["facts"] = scan_log(transport.stream_file(str(path)), str(path))

        t_parse = best(parse, args.repeat)
        facts = result["facts"]
        print(
            f"log: {size / 1e9:.2f} GB, {facts.lines} lines, "
            f"{facts.decode.count} decode lines parsed"
        )
        print(f"grep -c (same markers):  {t_same:6.2f} s  {size / t_same / 1e9:5.2f} GB/s")
        print(f"grep -c (one string):    {t_one:6.2f} s  {size / t_one / 1e9:5.2f} GB/s")
        print(f"dflash-doctor scan_log:  {t_parse:6.2f} s  {size / t_parse / 1e9:5.2f} GB/s")
        print(f"ratio parser / grep (same markers): {t_parse / t_same:.2f}x  (target <= 3x)")
        print(f"ratio parser / grep (one string):   {t_parse / t_one:.2f}x")
    finally:
        path.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
