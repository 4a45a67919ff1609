"""Fleet cost at a 20 ms round trip: per host serially, against Ansible, and 200 hosts at once.

    python -m bench.fleet [--hosts 10] [--fleet 200] [--jobs 64] [--delay-ms 10]
                          [--no-peer | --one-task-peer]

The hosts are aliases of one real OpenSSH server on 127.0.0.1, each serving the recorded
seed host, reached through a relay that holds each byte `--delay-ms` each way (a 20 ms
round trip, like a fleet in another datacenter); the relay runs in its own process, so
the CPU measured here is the tool's own. Printed, each with the load average:

1. Serial cost per host (`--jobs 1`), and the same reads done by Ansible with pipelining
   (ansible-core, when installed: `pip install .[bench]`) over the same hosts in the same
   run: one task per read the gatherer makes (slurp a file, find a directory, stat a link),
   read from a trace of the gatherer itself. Targets: at most 0.3 s per host, at most 0.3x
   Ansible.
   Issue 28's peer too: ONE Ansible shell task doing the same reads (`cat`, `ls`, `stat`,
   each command as it is); `--one-task-peer` runs only that one (the task-per-read play
   takes minutes).
2. A live host the same way: the stand-in SGLang server (fixtures/fake_sglang) running
   here, checked over SSH serially, so its check also asks SGLang's own parser (the
   server's Python, vetted by host_exec's rules) and the server's HTTP API: remote commands
   and SFTP requests per host, seconds per host, and the ratio to one Ansible shell task
   doing the same reads and commands (the native parse and the HTTP client included).
   Target: at most 0.3x.
3. `--jobs 64` over 200 host aliases: wall time and CPU per host, from which a 1,000-host
   fleet's cost is read off.
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import json
import multiprocessing
import os
import resource
import shutil
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from dflash_doctor.demo import DEMO_DIR
from dflash_doctor.gather import gather
from dflash_doctor.hosts import HostSpec, load_recorded_host
from dflash_doctor.pipeline import check_hosts
from dflash_doctor.transport.base import CHUNK_BYTES, CommandResult
from dflash_doctor.transport.local import LocalTransport
from dflash_doctor.transport.recorded import RecordedTransport
from dflash_doctor.transport.ssh import SSHOptions, SSHTransport
from fixtures.sshd import SshServer, start_sshd


def load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


class StandIn:
    """The stand-in SGLang server (fixtures/fake_sglang) as a real process here."""

    def __init__(self, work: Path) -> None:
        import sys

        from fixtures.sshd import free_port
        from fixtures.stand_in import copy_models

        models = copy_models(work / "models")
        self.log = work / "stand_in.log"
        argv = [sys.executable, "-m", "sglang.launch_server"]
        argv += ["--model-path", str(models / "target"), "--speculative-algorithm", "DFLASH"]
        argv += ["--port", str(free_port())]
        argv += ["--speculative-draft-model-path", str(models / "drafter")]
        repo = Path(__file__).resolve().parent.parent
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(repo / "fixtures/fake_sglang")}
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 30
        while b"ready to roll" not in self.log.read_bytes():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"stand-in server did not start:\n{self.log.read_text()}")
            time.sleep(0.1)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def _serve_proxy(target_port: int, delay_s: float, conn: Connection) -> None:
    from fixtures.latency_proxy import LatencyProxy

    proxy = LatencyProxy(target_port, delay_s)
    conn.send(proxy.port)
    conn.recv()  # until told to stop
    proxy.close()


class ProxyProcess:
    """fixtures.latency_proxy in a child process: its CPU is not the tool's."""

    def __init__(self, target_port: int, delay_s: float) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve_proxy, args=(target_port, delay_s, child))
        self._proc.start()
        self.port = int(self._conn.recv())

    def close(self) -> None:
        self._conn.send("stop")
        self._proc.join(10)
        if self._proc.is_alive():
            self._proc.terminate()


class Tracing(LocalTransport):
    """The local transport, noting every read the gatherer makes (for Ansible's playbook)."""

    def __init__(self) -> None:
        super().__init__("trace")
        self.ops: list[tuple[str, str]] = []

    def read_file(self, path: str, *, max_bytes: int) -> bytes:
        self.ops.append(("slurp", path))
        return super().read_file(path, max_bytes=max_bytes)

    def stream_file(self, path: str, *, chunk_bytes: int = CHUNK_BYTES) -> Iterator[bytes]:
        self.ops.append(("slurp", path))
        return super().stream_file(path, chunk_bytes=chunk_bytes)

    def file_size(self, path: str) -> int:
        self.ops.append(("stat", path))
        return super().file_size(path)

    def list_dir(self, path: str) -> list[str]:
        self.ops.append(("find", path))
        return super().list_dir(path)

    def readlink(self, path: str) -> str:
        self.ops.append(("stat", path))
        return super().readlink(path)

    def run(self, argv: list[str], *, timeout: float = 30.0, **kw: Any) -> CommandResult:
        self.ops.append(("command", json.dumps(argv)))
        return super().run(argv, timeout=timeout, **kw)


def ansible_tasks(spec: HostSpec) -> list[dict[str, Any]]:
    """One Ansible task per distinct read that gathering this host makes."""
    tracer = Tracing()
    # The recorded tree's own transport maps each host path under the tree, as over SSH;
    # a live host (the stand-in here) is read where it is.
    gather(spec, RecordedTransport(tracer, spec.root) if spec.recorded else tracer)
    tasks: list[dict[str, Any]] = []
    for op, arg in dict.fromkeys(tracer.ops):
        if op == "slurp":
            tasks.append({"ansible.builtin.slurp": {"src": arg}})
        elif op == "stat":
            tasks.append({"ansible.builtin.stat": {"path": arg, "follow": False}})
        elif op == "find":
            tasks.append({"ansible.builtin.find": {"paths": arg, "file_type": "any"}})
        else:
            tasks.append({"ansible.builtin.command": {"argv": json.loads(arg)}})
    for task in tasks:
        task["ignore_errors"] = True
    return tasks


def one_task(tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same reads as ONE Ansible shell task (issue 28's peer): `cat` for a file, `ls`
    for a directory, `stat` for a link, each command as it is, every one quoted."""
    import shlex

    lines = []
    for task in tasks:
        if "ansible.builtin.slurp" in task:
            lines.append(f"cat -- {shlex.quote(task['ansible.builtin.slurp']['src'])}")
        elif "ansible.builtin.stat" in task:
            lines.append(f"stat -- {shlex.quote(task['ansible.builtin.stat']['path'])}")
        elif "ansible.builtin.find" in task:
            lines.append(f"ls -a -- {shlex.quote(task['ansible.builtin.find']['paths'])}")
        else:
            lines.append(shlex.join(task["ansible.builtin.command"]["argv"]))
    script = "\n".join(f"{line} </dev/null 2>&1" for line in lines) + "\ntrue\n"
    return [{"ansible.builtin.shell": {"cmd": script}}]


def run_ansible(
    work: Path, hosts: list[str], tasks: list[dict[str, Any]], server: SshServer, known: Path
) -> float | None:
    playbook_bin = shutil.which("ansible-playbook")
    if playbook_bin is None:
        return None
    inventory = work / "ansible_hosts.ini"
    inventory.write_text("[fleet]\n" + "\n".join(hosts) + "\n")
    import yaml

    play = [{"hosts": "fleet", "gather_facts": False, "tasks": tasks}]
    playbook = work / "ansible_play.yml"
    playbook.write_text(yaml.safe_dump(play))
    control = work / "cp"
    control.mkdir(exist_ok=True)
    env = dict(
        os.environ,
        ANSIBLE_CONFIG=str(work / "none.cfg"),
        ANSIBLE_HOME=str(work / "ansible_home"),
        ANSIBLE_LOCAL_TEMP=str(work / "ansible_tmp"),
        ANSIBLE_PIPELINING="True",
        ANSIBLE_HOST_KEY_CHECKING="True",
        ANSIBLE_PYTHON_INTERPRETER="/usr/bin/python3",
        ANSIBLE_RETRY_FILES_ENABLED="False",
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_SSH_CONTROL_PATH_DIR=str(control),
        ANSIBLE_SSH_ARGS=(
            f"-F {work / 'ssh_config_fleet'} -o UserKnownHostsFile={known} "
            f"-o StrictHostKeyChecking=yes -o IdentityFile={server.client_key} "
            "-o ControlMaster=auto -o ControlPersist=30s"
        ),
    )
    start = time.perf_counter()
    p = subprocess.run(
        [playbook_bin, "-i", str(inventory), str(playbook), "-f", "1"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.perf_counter() - start
    if p.returncode != 0 or "unreachable=0" not in p.stdout:
        raise SystemExit(f"ansible-playbook failed:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return elapsed


AnsibleRun = Callable[[Path, list[str], list[dict[str, Any]]], float | None]


def execs_per_host(specs: list[HostSpec], opts: SSHOptions) -> Counter[str]:
    """Remote commands and SFTP requests one check of each host makes (on the real client)."""
    import paramiko

    seen: Counter[str] = Counter()
    open_channel = SSHTransport._open_channel
    request = paramiko.SFTPClient._request

    def counted_open(self: SSHTransport, argv: list[str], timeout: float, *rest: Any) -> Any:
        seen["remote commands"] += 1  # `rest`: the stdin of a file write
        return open_channel(self, argv, timeout, *rest)

    def counted_request(self: paramiko.SFTPClient, *args: Any) -> Any:
        seen["SFTP requests"] += 1
        return request(self, *args)

    SSHTransport._open_channel = counted_open  # type: ignore[method-assign]
    paramiko.SFTPClient._request = counted_request  # type: ignore[method-assign]
    try:
        timed(specs, opts, 1)
    finally:
        SSHTransport._open_channel = open_channel  # type: ignore[method-assign]
        paramiko.SFTPClient._request = request  # type: ignore[method-assign]
    return Counter({k: v // len(specs) for k, v in seen.items()})


def timed(specs: list[HostSpec], opts: SSHOptions, jobs: int) -> float:
    start = time.perf_counter()
    reports = check_hosts(specs, ssh=opts, jobs=jobs, timeout=300)
    elapsed = time.perf_counter() - start
    bad = [r.error for r in reports if not r.reachable]
    if bad:
        raise SystemExit(f"unreachable hosts: {bad[:3]}")
    return elapsed


def live_host(
    work: Path, opts: SSHOptions, hosts: int, rtt: float, peer: AnsibleRun | None
) -> None:
    """The stand-in server checked over SSH as a live host, serially: its check also runs
    SGLang's own parse and asks the server over HTTP (both inside the one bundle)."""
    stand_in = StandIn(work)
    try:
        live = [
            HostSpec.of(name=f"live-{i}", address=f"wan-{i}", pid=stand_in.proc.pid)
            for i in range(hosts)
        ]
        timed(live[:1], opts, 1)
        trips = execs_per_host(live[:2], opts)
        with bundle_seconds() as on_host:
            per = timed(live, opts, 1) / hosts
        print(
            f"live stand-in server at a {rtt:g} ms round trip (SGLang's own parse and its "
            f"HTTP API too): {per:.3f} s per host, {dict(trips)}, of which "
            f"{sum(on_host) / len(on_host):.3f} s the bundle on the host (the server's Python "
            f"importing its sglang), {load()}"
        )
        if peer is not None:
            tasks = ansible_tasks(HostSpec.of(name="trace", pid=stand_in.proc.pid))
            took = peer(work, [f"wan-{i}" for i in range(hosts)], one_task(tasks))
            if took is not None:
                print(
                    f"  Ansible, one shell task doing its {len(tasks)} reads, pipelining, "
                    f"forks 1: {took / hosts:.3f} s per host; ratio {per / (took / hosts):.2f}x "
                    f"(target <= 0.3), {load()}"
                )
    finally:
        stand_in.close()


@contextlib.contextmanager
def bundle_seconds() -> Iterator[list[float]]:
    """The seconds each bundle says it worked on its host (after sshd, the login shell and
    the interpreter's start), collected while the block runs."""
    from dflash_doctor.transport import prefetch

    seen: list[float] = []
    real = prefetch.fetch_answers

    def counted(*a: Any, **kw: Any) -> prefetch.Answers:
        answers = real(*a, **kw)
        seen.append(answers.seconds)
        return answers

    prefetch.fetch_answers = counted
    try:
        yield seen
    finally:
        prefetch.fetch_answers = real


def cpu_seconds() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=10, help="hosts for the serial comparison")
    ap.add_argument("--fleet", type=int, default=200, help="host aliases checked at once")
    ap.add_argument("--jobs", type=int, default=64)
    ap.add_argument("--delay-ms", type=float, default=10.0, help="each way")
    ap.add_argument("--login-rc", action="store_true", help="let bash read root's ~/.bashrc")
    ap.add_argument("--no-peer", action="store_true", help="skip Ansible and per-file SFTP")
    ap.add_argument(
        "--one-task-peer",
        action="store_true",
        help="Ansible as one shell task only (not also one task per read, minutes per run)",
    )
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="dflash-fleet-"))
    # Root's ~/.bashrc on this machine runs `pyenv init` (about 0.4 s) for every remote
    # command, as bash does when sshd starts it; a stock root's returns at once. The test
    # sshd makes bash skip it (SHLVL=1), for both tools alike; `--login-rc` keeps it.
    server = start_sshd(work, extra="SetEnv SHLVL=0" if args.login_rc else "")
    proxy = ProxyProcess(server.port, args.delay_ms / 1000)
    rtt = 2 * args.delay_ms
    try:
        pub = (work / "host_key.pub").read_text().split()
        known = work / "known_hosts_all"
        known.write_text(f"[127.0.0.1]:{proxy.port} {pub[0]} {pub[1]}\n")
        config = work / "ssh_config_fleet"
        config.write_text(
            f"Host wan-*\n    HostName 127.0.0.1\n    Port {proxy.port}\n"
            f"    User {getpass.getuser()}\n    IdentityFile {server.client_key}\n"
        )
        opts = SSHOptions(known_hosts=str(known), ssh_config=str(config), interactive=False)
        base = load_recorded_host(str(DEMO_DIR))

        def specs(n: int) -> list[HostSpec]:
            return [
                base.model_copy(update={"name": f"wan-{i}", "address": f"wan-{i}"})
                for i in range(n)
            ]

        serial_specs = specs(args.hosts)
        timed(serial_specs[:2], opts, 2)  # warm up imports and sshd
        trips = execs_per_host(serial_specs[:2], opts)
        print(
            f"the recorded seed host over SSH at a {rtt:g} ms round trip (relay process), "
            f"~/.bashrc {'read' if args.login_rc else 'skipped'}; per host: {dict(trips)}"
        )
        cpu = cpu_seconds()
        with bundle_seconds() as on_host:
            serial = timed(serial_specs, opts, 1) / args.hosts
        cpu = (cpu_seconds() - cpu) / args.hosts
        print(
            f"dflash-doctor --jobs 1: {serial:.3f} s per host (target <= 0.3 s), of which "
            f"{cpu * 1000:.0f} ms the tool's CPU and {sum(on_host) / len(on_host) * 1000:.0f} ms "
            f"the bundle's own work on the host, {load()}"
        )
        # The same hosts 100 ms further away: the growth counts the round trips per host,
        # whatever the load; the rest of the cost is CPU, here the hosts' own too (every
        # host's sshd and bundle share this machine's cores with the tool).
        far = ProxyProcess(server.port, args.delay_ms / 1000 + 0.05)
        try:
            known.write_text(known.read_text() + f"[127.0.0.1]:{far.port} {pub[0]} {pub[1]}\n")
            config.write_text(
                config.read_text() + f"Host far-*\n    HostName 127.0.0.1\n    Port {far.port}\n"
                f"    User {getpass.getuser()}\n    IdentityFile {server.client_key}\n"
            )
            far_specs = [s.model_copy(update={"address": "far" + s.name[3:]}) for s in serial_specs]
            slow = timed(far_specs[:5], opts, 1) / 5
            near = timed(serial_specs[:5], opts, 1) / 5
        finally:
            far.close()
        print(
            f"  round trips per host: {(slow - near) / 0.1:.1f} "
            f"({near:.3f} s at {rtt:g} ms, {slow:.3f} s at {rtt + 100:g} ms), "
            f"so {near - (slow - near) / 0.1 * rtt / 1000:.3f} s of it is CPU and processes "
            f"at this load, {load()}"
        )

        def ansible(at: Path, names: list[str], tasks: list[dict[str, Any]]) -> float | None:
            return run_ansible(at, names, tasks, server, known)

        live_host(work, opts, args.hosts, rtt, None if args.no_peer else ansible)
        if args.no_peer:
            serial_specs = []
        # The gatherer's own reads without the bundle (per-file SFTP, as before issue 15).
        from dflash_doctor import gather as gather_module

        bundled = gather_module.prefetching
        gather_module.prefetching = lambda spec, transport: transport
        try:
            if serial_specs:
                plain_trips = execs_per_host(serial_specs[:2], opts)
                plain = timed(serial_specs[:5], opts, 1) / 5
                print(
                    f"  without the bundle (per-file SFTP): {plain:.3f} s per host, "
                    f"{dict(plain_trips)}; ratio {serial / plain:.2f}, {load()}"
                )
        finally:
            gather_module.prefetching = bundled
        tasks = ansible_tasks(base)
        peer = None
        if not args.no_peer and not args.one_task_peer:
            peer = run_ansible(work, [s.name for s in serial_specs], tasks, server, known)
        if args.no_peer:
            print("--no-peer: Ansible not run")
        elif shutil.which("ansible-playbook") is None:
            print("ansible-playbook not installed (pip install .[bench]): no Ansible peer")
        if peer is not None:
            per = peer / args.hosts
            print(
                f"Ansible, pipelining, {len(tasks)} tasks (the same reads), forks 1: "
                f"{per:.3f} s per host; ratio {serial / per:.2f}x Ansible (target <= 0.3), "
                f"{load()}"
            )
        if not args.no_peer:
            one = run_ansible(work, [s.name for s in serial_specs], one_task(tasks), server, known)
            if one is not None:
                print(
                    f"  Ansible, one shell task doing the same reads: {one / args.hosts:.3f} s "
                    f"per host; ratio {serial / (one / args.hosts):.2f}x, {load()}"
                )
        fleet = specs(args.fleet)
        if not fleet:
            return
        cpu = cpu_seconds()
        wall = timed(fleet, opts, args.jobs)
        cpu = cpu_seconds() - cpu
        print(
            f"--jobs {args.jobs} over {args.fleet} hosts: {wall:.2f} s wall, "
            f"{cpu / args.fleet * 1000:.1f} ms CPU per host "
            f"(1,000 hosts: about {wall * 1000 / args.fleet:.0f} s, {cpu * 1000 / args.fleet:.0f} "
            f"CPU s on this machine), {load()}"
        )
    finally:
        proxy.close()
        server.stop()


if __name__ == "__main__":
    main()
