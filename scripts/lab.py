"""The local lab: try `check`, `fix --apply`, `bench` and `fix --rollback` over SSH without a
GPU host. One command starts a real OpenSSH server on 127.0.0.1 (an unprivileged free port,
its own host key, a generated client key) and, behind it, the stand-in SGLang server of
`fixtures/fake_sglang` (its version written into the installed copy, a launch script that runs
it, the seed host's drafter and target configs); one command stops both and removes the lab.

    python3 scripts/lab.py start [--dir DIR] [--version 0.5.13]
    python3 scripts/lab.py status [--dir DIR]
    python3 scripts/lab.py stop [--dir DIR]

The lab directory (default /tmp/dflash-doctor-lab) holds `inventory.yaml` (the host `lab`:
its launch file and log), `ssh_config` (`Host lab`: address, port, user, key and the lab's own
known_hosts), the keys, the launch script `serve.sh` and the server's log. `start` prints the
commands to run. The lab needs OpenSSH's server and `ssh-keygen` (the same prerequisites as
`.ci/run`) and says in one line what is missing. It runs from a checkout: it uses the test
fixtures (fixtures/sshd.py, fixtures/stand_in.py), which the package never imports.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import yaml  # noqa: E402

from fixtures.sshd import find_sshd, start_sshd  # noqa: E402
from fixtures.stand_in import StandIn, end_servers_under, healthy, server_pids  # noqa: E402

DEFAULT_DIR = Path("/tmp/dflash-doctor-lab")
STATE = "lab.json"


class LabError(Exception):
    """One line for the user; the command exits 2."""


def missing_prerequisites() -> str | None:
    """What this machine lacks to run the lab, in one line, or None."""
    lacking = []
    if find_sshd() is None:
        lacking.append("sshd (apt-get install openssh-server)")
    if shutil.which("ssh-keygen") is None:
        lacking.append("ssh-keygen (apt-get install openssh-client)")
    return "lab: missing " + "; ".join(lacking) if lacking else None


def commands(lab: Path) -> list[str]:
    """What to run against the lab, in the order of README's walkthrough."""
    inv = f"-I {lab}/inventory.yaml --ssh-config {lab}/ssh_config"
    return [
        f"dflash-doctor check {inv}",
        f"dflash-doctor fix {inv} --apply",
        f"dflash-doctor bench lab --ssh-config {lab}/ssh_config --launch {lab}/serve.sh "
        "--contexts 512,4096 --concurrency 1,2 --max-new-tokens 32",
        f"dflash-doctor fix {inv} --rollback",
    ]


def _write_host_files(lab: Path, sshd_port: int, user: str, server: StandIn) -> None:
    keys = lab / "sshd"
    (lab / "ssh_config").write_text(
        f"Host lab\n    HostName 127.0.0.1\n    Port {sshd_port}\n    User {user}\n"
        f"    IdentityFile {keys / 'id_client'}\n"
        f"    UserKnownHostsFile {keys / 'known_hosts_sshd'}\n"
    )
    entry = {"address": "lab", "launch_file": str(server.script), "log_path": str(server.log)}
    (lab / "inventory.yaml").write_text(yaml.safe_dump({"hosts": {"lab": entry}}))


def start(lab: Path, version: str) -> dict[str, Any]:
    """Start the lab's sshd and stand-in server; the state `stop` and `status` read."""
    missing = missing_prerequisites()
    if missing:
        raise LabError(missing)
    if (lab / STATE).exists():
        raise LabError(f"lab: already running in {lab} (python3 scripts/lab.py stop)")
    if lab.exists() and any(lab.iterdir()):
        raise LabError(f"lab: {lab} exists and is not a lab directory; pass another --dir")
    lab.mkdir(parents=True, exist_ok=True)
    os.chmod(lab, 0o755)  # the doctor's host interpreter rules refuse other writers
    state: dict[str, Any] = {"dir": str(lab), "version": version}
    (lab / STATE).write_text(json.dumps(state))  # from here on, `stop` cleans up
    try:
        sshd = start_sshd(lab / "sshd", detach=True)
        state.update(sshd_pid=sshd.process.pid, sshd_port=sshd.port, user=sshd.user)
        (lab / STATE).write_text(json.dumps(state))
        server = StandIn(lab)
        server.write(version)
        state.update(server_pid=server.start(timeout=60), server_port=server.port)
        _write_host_files(lab, sshd.port, sshd.user, server)
    except (OSError, RuntimeError, ValueError) as e:
        stop(lab)
        raise LabError(f"lab: could not start: {str(e).strip().splitlines()[-1]}") from None
    (lab / STATE).write_text(json.dumps(state, indent=2))
    return state


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat.rsplit(b")", 1)[1][:3] != b" Z "  # a zombie is gone, only not reaped


def _is_our_sshd(pid: int, lab: Path) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return str(lab).encode() in cmdline  # its -f names the lab's config: never another sshd


def stop(lab: Path) -> bool:
    """End the lab's servers and sshd, remove the lab directory; False when none was there."""
    state_file = lab / STATE
    if not state_file.exists():
        return False
    state = json.loads(state_file.read_text())
    end_servers_under(lab)  # relaunched servers too: each command line names the lab
    pid = state.get("sshd_pid")
    if isinstance(pid, int) and _is_our_sshd(pid, lab):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)  # its own session: the listener and its sessions
        deadline = time.monotonic() + 10
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while server_pids(lab) and time.monotonic() < deadline:
        time.sleep(0.05)
    shutil.rmtree(lab)
    return True


def status(lab: Path) -> list[str]:
    """One line per part of the lab, or an empty list when no lab is there."""
    if not (lab / STATE).exists():
        return []
    state = json.loads((lab / STATE).read_text())
    sshd = "up" if _alive(int(state.get("sshd_pid", 0))) else "DOWN"
    port = int(state.get("server_port", 0))
    server = "up" if port and healthy(port) else "DOWN"
    return [
        f"sshd: {sshd} on 127.0.0.1:{state.get('sshd_port')} (pid {state.get('sshd_pid')})",
        f"SGLang {state['version']} stand-in: {server} on 127.0.0.1:{port}",
    ]


def main(argv: list[str] | None = None) -> int:
    """`start`, `status` or `stop`; 0 done, 1 status found the lab down, 2 could not."""
    parser = argparse.ArgumentParser(prog="scripts/lab.py", description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["start", "status", "stop"])
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="lab directory")
    parser.add_argument("--version", default="0.5.13", help="the stand-in's SGLang version")
    args = parser.parse_args(argv)
    lab = args.dir.resolve()
    try:
        if args.action == "start":
            state = start(lab, args.version)
            print(f"lab up in {lab}: sshd on 127.0.0.1:{state['sshd_port']}, SGLang {args.version}")
            print(f"stand-in on 127.0.0.1:{state['server_port']} (pid {state['server_pid']}). Try:")
            print("\n".join(f"  {c}" for c in commands(lab)))
            print(f"stop it with: python3 scripts/lab.py stop --dir {lab}")
        elif args.action == "stop":
            print(f"lab in {lab} stopped and removed" if stop(lab) else f"no lab in {lab}")
        else:
            lines = status(lab)
            print("\n".join(lines) if lines else f"no lab in {lab}")
            return 0 if lines and not any("DOWN" in ln for ln in lines) else 1
    except LabError as e:
        print(e, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
