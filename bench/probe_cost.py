"""How the attention probe's time and memory grow with context length, so users can pick lengths.

    python -m bench.probe_cost [--contexts 512,2048,4096,8192,16384] [--device auto]

Runs the probe once per context length on the seed drafter (6 layers, 5 sliding, window
2048, Kimi-K2.6-class shape, TP 8 as on the demo host) and prints a table of the probe's own
wall time and peak memory (GPU: max allocated; CPU: RSS growth), one run per length.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from dflash_doctor.demo import DEMO_DIR
from dflash_doctor.facts.launch import parse_cmdline
from dflash_doctor.facts.model_config import parse_drafter_config
from dflash_doctor.probes.runner import probe_spec, run_probe
from dflash_doctor.transport.local import LocalTransport


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--contexts", default="512,2048,4096,8192,16384")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--budget-mib", type=int, default=8192)
    args = ap.parse_args()
    path = DEMO_DIR / "models/Kimi-K2.6-DFlash/config.json"
    drafter = parse_drafter_config(path.read_bytes(), str(path))
    launch = parse_cmdline((DEMO_DIR / "proc/4242/cmdline").read_bytes(), source="demo")
    transport = LocalTransport("bench")
    print("context  wall s   windowed s  full s   peak windowed MiB  peak full MiB  rel L2")
    for length in (int(x) for x in args.contexts.split(",")):
        spec = probe_spec(
            drafter,
            json.loads(path.read_text()),
            contexts=[length],
            launch=launch,
            device=args.device,
            budget_mib=args.budget_mib,
        )
        start = time.perf_counter()
        result = run_probe(transport, spec, python=sys.executable)
        wall = time.perf_counter() - start
        if not result.contexts:
            reason = (
                result.skipped_contexts[0].reason if result.skipped_contexts else result.refused
            )
            print(f"{length:>7}  skipped: {reason}")
            continue
        c = result.contexts[0]
        print(
            f"{length:>7}  {wall:6.2f}   {c.time_windowed_s:9.3f}  {c.time_full_s:6.3f}   "
            f"{c.peak_windowed_bytes / 2**20:17.1f}  {c.peak_full_bytes / 2**20:13.1f}  "
            f"{c.output.rel_l2:.4f}"
        )
    print(f"device: {result.device}; wall time includes process start and weight setup")


if __name__ == "__main__":
    main()
