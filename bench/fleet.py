"""Fleet check wall time: 20 hosts with --jobs 20 vs --jobs 1, in one run.

    python -m bench.fleet [--hosts 20] [--delay-ms 10]

The hosts are aliases of one real OpenSSH server on 127.0.0.1, each serving the recorded
seed host. Measured twice: straight over loopback (no network latency: the 2 cores of
this machine are the limit), and through a relay that holds each byte `--delay-ms` each
way (a 20 ms round trip, like a fleet in another datacenter). Target ratio: below 0.25.
"""

from __future__ import annotations

import argparse
import getpass
import tempfile
import time
from pathlib import Path

from dflash_doctor.demo import DEMO_DIR
from dflash_doctor.hosts import load_recorded_host
from dflash_doctor.pipeline import check_hosts
from dflash_doctor.transport.ssh import SSHOptions
from fixtures.latency_proxy import LatencyProxy
from fixtures.sshd import start_sshd


def timed(specs: list, opts: SSHOptions, jobs: int) -> float:  # type: ignore[type-arg]
    start = time.perf_counter()
    reports = check_hosts(specs, ssh=opts, jobs=jobs, timeout=300)
    elapsed = time.perf_counter() - start
    bad = [r.error for r in reports if not r.reachable]
    if bad:
        raise SystemExit(f"unreachable hosts: {bad[:3]}")
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=20)
    ap.add_argument("--delay-ms", type=float, default=10.0)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="dflash-fleet-"))
    server = start_sshd(work)
    proxy = LatencyProxy(server.port, args.delay_ms / 1000)
    try:
        pub = (work / "host_key.pub").read_text().split()
        known = work / "known_hosts_all"
        known.write_text(
            server.known_hosts.read_text() + f"[127.0.0.1]:{proxy.port} {pub[0]} {pub[1]}\n"
        )
        config = work / "ssh_config_fleet"
        config.write_text(
            f"Host direct-*\n    HostName 127.0.0.1\n    Port {server.port}\n"
            f"Host wan-*\n    HostName 127.0.0.1\n    Port {proxy.port}\n"
            f"Host *\n    User {getpass.getuser()}\n    IdentityFile {server.client_key}\n"
        )
        opts = SSHOptions(known_hosts=str(known), ssh_config=str(config), interactive=False)
        base = load_recorded_host(str(DEMO_DIR))
        print(f"{args.hosts} hosts, each the recorded seed host over SSH")
        for kind, label in (
            ("direct", "loopback, no latency"),
            ("wan", f"{2 * args.delay_ms:g} ms round trip"),
        ):
            specs = [
                base.model_copy(update={"name": f"{kind}-{i}", "address": f"{kind}-{i}"})
                for i in range(args.hosts)
            ]
            timed(specs[:2], opts, 2)  # warm up imports and sshd
            serial = timed(specs, opts, 1)
            parallel = timed(specs, opts, args.hosts)
            print(
                f"{label:>24}: --jobs 1 {serial:6.2f} s, --jobs {args.hosts} {parallel:6.2f} s, "
                f"ratio {parallel / serial:.2f} (target < 0.25)"
            )
    finally:
        proxy.close()
        server.stop()


if __name__ == "__main__":
    main()
