"""A container host: `check docker://NAME` against raw `docker exec` calls on the same engine.

    python -m bench.docker [--runs 7]

Needs a running Docker engine (`docker info`); the image is built here with no registry
(fixtures/containers/docker_host.py: the stand-in SGLang 0.5.13 serving the seed scenario,
its models at paths that exist only in the container). Printed, each with the load average,
every figure the median of `--runs` runs interleaved with its peer so that load changes hit
both alike:

1. the gathering in this process, with the bundle (one `docker exec`) and without it (one
   `docker exec` per command, the doctor's way before issue 28): the `docker exec` calls
   each makes, its seconds, and the ratio of the two;
2. the whole CLI, `dflash-doctor check docker://NAME --format json`, in a fresh
   interpreter, against the peer `docker exec NAME true` (the cost of one exec on this
   engine) and `python -c pass` (the interpreter's start).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from dflash_doctor.gather import gather
from dflash_doctor.hosts import HostSpec
from dflash_doctor.transport.base import CommandResult
from dflash_doctor.transport.docker import DockerTransport
from dflash_doctor.transport.local import LocalTransport

REPO = Path(__file__).resolve().parent.parent


def load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


class Engine(LocalTransport):
    """This machine, counting the `docker exec` calls run through it (`run_stream` runs
    through `run` here)."""

    def __init__(self) -> None:
        super().__init__("engine")
        self.execs = 0

    def run(self, argv: list[str], **kw: Any) -> CommandResult:
        self.execs += argv[:2] == ["docker", "exec"]
        return super().run(argv, **kw)


def gathered(name: str, bundled: bool) -> tuple[float, int]:
    """Seconds and `docker exec` calls of one gathering of the container."""
    from dflash_doctor import gather as gather_module

    engine = Engine()
    real = gather_module.prefetching
    if not bundled:
        gather_module.prefetching = lambda spec, transport: transport
    start = time.perf_counter()
    try:
        with DockerTransport(name, engine, name) as t:
            facts = gather(HostSpec.of(name, container=name), t)
    finally:
        gather_module.prefetching = real
    elapsed = time.perf_counter() - start
    if facts.launch.value is None or facts.runtime.value is None:
        raise SystemExit(f"{name}: the gathering found no server: {facts.launch.error}")
    return elapsed, engine.execs


def once(argv: list[str]) -> float:
    start = time.perf_counter()
    env = dict(os.environ, PYTHONPATH=str(REPO), COLUMNS="120")
    subprocess.run(argv, env=env, cwd=REPO, stdout=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def measure(name: str, runs: int) -> None:
    gathered(name, True)  # warm: imports, the page cache, the engine
    gathered(name, False)
    with_b: list[float] = []
    without: list[float] = []
    execs = {True: 0, False: 0}
    for _ in range(runs):
        for bundled, out in ((True, with_b), (False, without)):
            seconds, n = gathered(name, bundled)
            out.append(seconds)
            execs[bundled] = n
    a, b = statistics.median(with_b), statistics.median(without)
    print(
        f"gathering (in process): bundled {a:.3f} s, {execs[True]} docker exec; without the "
        f"bundle {b:.3f} s, {execs[False]} docker exec; ratio {a / b:.2f}, {load()}"
    )
    cli = [sys.executable, "-m", "dflash_doctor", "check", f"docker://{name}", "--format", "json"]
    peers: dict[str, list[str]] = {
        "docker exec NAME true": ["docker", "exec", name, "true"],
        "python -c pass": [sys.executable, "-c", "pass"],
    }
    times: dict[str, list[float]] = {"cli": [], **{k: [] for k in peers}}
    once(cli)
    for _ in range(runs):
        times["cli"].append(once(cli))
        for k, argv in peers.items():
            times[k].append(once(argv))
    t = statistics.median(times["cli"])
    ratios = ", ".join(f"{t / statistics.median(times[k]):.1f}x {k}" for k in peers)
    print(f"check docker://NAME (whole CLI): {t:.3f} s, {ratios}, {load()}")
    for k in peers:
        print(f"  {k}: {statistics.median(times[k]):.3f} s")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    sys.path.insert(0, str(REPO))
    from fixtures.containers import docker_host
    from fixtures.sshd import free_port

    why = docker_host.docker_unavailable()
    if why is not None:
        raise SystemExit(f"no Docker engine: {why}")
    tag = f"dflash-doctor-bench:{os.getpid()}"
    name = f"dfd-bench-{os.getpid()}"
    docker_host.build_image(tag, "0.5.13")
    try:
        port = free_port()
        docker_host.start(name, tag, port)
        docker_host.wait_healthy(name, port)
        print(f"container {name} (stand-in SGLang 0.5.13), {load()}")
        measure(name, args.runs)
    finally:
        docker_host.remove(name)
        docker_host.remove_image(tag)


if __name__ == "__main__":
    main()
