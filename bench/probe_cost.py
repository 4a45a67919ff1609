"""The attention probe's CPU time and memory on the seed drafter, against its targets.

    python -m bench.probe_cost [--contexts 512,2048,...] [--device cpu] [--repeat 1]

One probe run with the default contexts (or `--contexts`) on the seed drafter (6 layers, 5
sliding with window 2048, Kimi-K2.6-class shape, TP 8 and page size 64 as on the demo
host, SGLang 0.5.13: trained, served and fix scenarios), exactly as `dflash-doctor probe
--demo` runs it: a separate Python process. Measured from outside: the child's CPU seconds
(user + system) and its peak RSS, beside the same for the peer `python -c "import torch"`
(the floor any probe pays) run in the same session, and the load average at start and end
(this machine's 2 cores are shared, so CPU seconds are the figure to read, not wall time).
Prints each ratio to its target: 10 s of CPU and 0.6 GB of RSS (issue 15, item 4).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

from dflash_doctor.demo import DEMO_DIR
from dflash_doctor.facts.launch import parse_cmdline
from dflash_doctor.facts.model_config import parse_drafter_config
from dflash_doctor.probes.runner import DEFAULT_AGREEMENT_TOKENS, probe_spec
from dflash_doctor.shipped import script_source

CPU_TARGET_S = 10.0
RSS_TARGET_BYTES = 0.6e9


def child(argv: list[str]) -> tuple[float, float, int, bytes]:
    """Run one child to completion: (wall s, CPU s, peak RSS bytes, stdout)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.PIPE, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    # ru_maxrss of children is the largest child so far: run the small peer first.
    return wall, cpu, after.ru_maxrss * 1024, proc.stdout


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:.2f} (1 min) {five:.2f} (5 min) on {os.cpu_count()} CPUs"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--contexts", default=None, help="default: the probe's own defaults")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--agreement-tokens", type=int, default=DEFAULT_AGREEMENT_TOKENS)
    args = ap.parse_args()
    path = DEMO_DIR / "models/Kimi-K2.6-DFlash/config.json"
    drafter = parse_drafter_config(path.read_bytes(), str(path))
    launch = parse_cmdline((DEMO_DIR / "proc/4242/cmdline").read_bytes(), source="demo")
    spec = probe_spec(
        drafter,
        json.loads(path.read_text()),
        honours_layer_types=False,
        draft_window=None,
        version="0.5.13",
        contexts=[int(x) for x in args.contexts.split(",")] if args.contexts else None,
        tp_size=launch.tp_size,
        page_size=launch.page_size or 1,
        kv_cache_dtype=launch.kv_cache_dtype,
        device=args.device,
        agreement_tokens=args.agreement_tokens,
    )
    print(f"load at start: {load()}")
    _, peer_cpu, peer_rss, _ = child([sys.executable, "-c", "import torch"])
    argv = [sys.executable, "-c", script_source("on_host/attention_probe.py"), json.dumps(spec)]
    wall, cpu, rss, out = child(argv)
    result = json.loads(out.decode().strip().splitlines()[-1])
    if result.get("error") or result.get("refused"):
        raise SystemExit(f"probe did not run: {result.get('error') or result.get('refused')}")
    print(
        f"seed drafter, TP {spec['tp_size']}, contexts {spec['contexts']}, "
        f"{len(spec['scenarios'])} scenarios, {result['agreement_tokens']} draft tokens each"
    )
    print("context  probe s")
    for c in result["contexts"]:
        print(f"{c['context']:>7}  {c['time_s']:7.2f}")
    print(f"peer `python -c 'import torch'`: {peer_cpu:.2f} s CPU, {peer_rss / 1e9:.3f} GB RSS")
    print(
        f"probe: {cpu:.2f} s CPU ({wall:.2f} s wall), {rss / 1e9:.3f} GB peak RSS; "
        f"{cpu / peer_cpu:.1f}x and {rss / peer_rss:.1f}x the peer"
    )
    print(
        f"ratio to target: CPU {cpu / CPU_TARGET_S:.2f} (target {CPU_TARGET_S:g} s), "
        f"RSS {rss / RSS_TARGET_BYTES:.2f} (target {RSS_TARGET_BYTES / 1e9:g} GB); "
        "at most 1.00 meets it"
    )
    print(f"load at end: {load()}")


if __name__ == "__main__":
    main()
