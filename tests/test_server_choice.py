"""Several SGLang servers on one host (issue 23 item 2): no verb picks one silently, a named
pid that is gone fails closed, the plan names the process it stops, and the printed `fix`
command reaches the same server. Real stand-in servers (fixtures/fake_sglang), run as
`check local` and through the test sshd."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fixtures.sshd import free_port
from fixtures.stand_in import copy_models, end_servers_under, healthy, install_stand_in
from tests.cli_helper import doctor as run_doctor
from tests.conftest import REPO


@dataclass
class Server:
    pid: int
    port: int
    script: Path


def _script(tmp_path: Path, name: str, port: int) -> Path:
    """A launch script like a host's: the stand-in 0.5.13 serving the demo's sliding-window
    drafter without a draft window (DFD103 fires; its fix sets the window)."""
    models = copy_models(tmp_path / "models")
    install_stand_in(tmp_path / "site", "0.5.13")
    script = tmp_path / f"serve-{name}.sh"
    script.write_text(
        "#!/usr/bin/env bash\n"
        f"export PYTHONPATH={tmp_path / 'site'}\n"
        f"exec {sys.executable} -m sglang.launch_server \\\n"
        f"  --model-path {models / 'target'} \\\n  --speculative-algorithm DFLASH \\\n"
        f"  --speculative-draft-model-path {models / 'drafter'} \\\n"
        f"  --context-length 131072 \\\n  --port {port}\n"
    )
    script.chmod(0o755)
    return script


@pytest.fixture
def two_servers(tmp_path: Path) -> Iterator[list[Server]]:
    servers = []
    try:
        for name in ("a", "b"):
            port = free_port()
            script = _script(tmp_path, name, port)
            with (tmp_path / f"{name}.log").open("wb") as log:
                proc = subprocess.Popen(
                    [str(script)],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                    env={"PATH": "/usr/bin:/bin"},
                )
            servers.append(Server(proc.pid, port, script))  # the script execs the server
        deadline = time.monotonic() + 120  # generous: the machine may be loaded
        while not all(healthy(s.port) for s in servers):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        yield servers
    finally:
        end_servers_under(tmp_path)


def doctor(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return run_doctor(*args, cwd=cwd, columns=400, timeout=300)


def flat(text: str) -> str:
    """Output with the console's line wrapping undone (other tests' servers may run too,
    so the list of servers can be long)."""
    return " ".join(text.split())


def gone_pid() -> int:
    """The pid of a process that has exited (as a server relaunched since it was noted)."""
    p = subprocess.Popen(["true"])
    p.wait()
    assert not os.path.exists(f"/proc/{p.pid}")
    return p.pid


def served_pid(p: subprocess.CompletedProcess[str]) -> int:
    report = json.loads(p.stdout)
    return int(report["hosts"][0]["facts"]["server"]["value"]["pid"])


def test_no_verb_picks_one_of_several_servers(two_servers: list[Server], tmp_path: Path) -> None:
    before = {s.script: s.script.read_bytes() for s in two_servers}
    for args in (
        ("check", "local"),
        ("fix", "local"),
        ("fix", "local", "--apply", "--yes"),
        ("probe", "local"),
        ("bench", "local", "--contexts", "64", "--concurrency", "1", "--yes"),
    ):
        p = doctor(*args)
        out = " ".join((p.stdout + p.stderr).split())  # the console wraps a long list
        assert p.returncode == 2, (args, out)
        # each listed by pid, owner, port and model; the choice is named
        for s in two_servers:
            assert f"pid {s.pid} (owner root, port {s.port}, model {tmp_path}" in out, out
        assert "choose one with --pid, --port or --launch" in out
    assert {s.script: s.script.read_bytes() for s in two_servers} == before
    assert all(healthy(s.port) for s in two_servers)  # nothing was stopped


def test_pid_port_or_launch_file_choose_the_server(two_servers: list[Server]) -> None:
    a, b = two_servers
    assert served_pid(doctor("check", "local", "--pid", str(b.pid), "--format", "json")) == b.pid
    assert served_pid(doctor("check", "local", "--port", str(a.port), "--format", "json")) == a.pid
    launch = ("--launch", str(b.script))
    assert served_pid(doctor("check", "local", *launch, "--format", "json")) == b.pid
    # a port no server listens on is no choice: exit 2, the running ones listed
    p = doctor("check", "local", "--port", str(free_port()))
    assert p.returncode == 2 and f"pid {a.pid} (owner root, port {a.port}" in flat(p.stdout)


def test_a_stale_or_foreign_pid_fails_closed(two_servers: list[Server]) -> None:
    stale = gone_pid()
    for verb in (("check", "local"), ("fix", "local"), ("probe", "local"), ("bench", "local")):
        p = doctor(*verb, "--pid", str(stale))
        out = flat(p.stdout + p.stderr)
        assert p.returncode == 2, out
        assert f"local: no process {stale} runs (relaunched since?)" in out
        if verb[0] == "check":  # nothing ran on nothing: no green report of skipped checks
            assert "checks 0 passed, 0 failed, 0 skipped" in out
    p = doctor("check", "local", "--pid", str(os.getpid()))
    assert p.returncode == 2 and f"process {os.getpid()} is not an SGLang server" in p.stdout


def test_the_plan_names_the_process_it_stops(two_servers: list[Server]) -> None:
    b = two_servers[1]
    p = doctor("fix", "local", "--port", str(b.port), "--launch", str(b.script))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "+  --speculative-draft-window-size 2048" in p.stdout
    out = flat(p.stdout)
    stop = out[out.index("stop: ") : out.index(" relaunch: ")]
    assert stop.startswith(f"stop: pid {b.pid} (owner root): ")
    assert "-m sglang.launch_server --model-path" in stop and stop.endswith(f"--port {b.port}")
    assert f"relaunch: stop the running server, start {b.script} detached" in out


def test_over_ssh_the_fix_command_reaches_the_same_server(
    two_servers: list[Server], sshd: Any, tmp_path: Path
) -> None:
    a, b = two_servers
    reach = ["-i", str(sshd.client_key), "--known-hosts", str(sshd.known_hosts)]
    reach += ["--ssh-config", "/dev/null"]
    p = doctor("check", sshd.address, *reach)
    assert p.returncode == 2 and "choose one with --pid, --port or --launch" in flat(p.stdout)
    assert f"pid {a.pid} (owner root, port {a.port}" in flat(p.stdout)
    p = doctor("check", sshd.address, *reach, "--pid", str(gone_pid()))
    assert p.returncode == 2 and "runs (relaunched since?)" in p.stdout
    # an inventory's stale `pid:` too: exit 2, never a green run with every check skipped
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(
        f"hosts:\n  gpu:\n    address: {sshd.address}\n    pid: {gone_pid()}\n"
        f"    identity_file: {sshd.client_key}\n"
    )
    p = doctor("check", "-I", str(inventory), "--known-hosts", str(sshd.known_hosts))
    assert p.returncode == 2 and "runs (relaunched since?)" in p.stdout, p.stdout
    # with a choice: the fix command carries everything needed to reach that server
    chosen = ("--pid", str(b.pid), "--launch", str(b.script))
    p = doctor("check", sshd.address, *reach, *chosen, "--format", "json")
    command = json.loads(p.stdout)["hosts"][0]["fix_command"]
    words = shlex.split(command)
    assert words[:3] == ["dflash-doctor", "fix", sshd.address] and words[-1] == "--apply"
    for option, value in zip(reach[::2], reach[1::2], strict=True):
        assert words[words.index(option) + 1] == value
    for option, value in zip(chosen[::2], chosen[1::2], strict=True):
        assert words[words.index(option) + 1] == value
    # pasted (as the dry run: without --apply), it plans the fix of that very server
    dry = doctor(*words[1:-1])
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert f"stop: pid {b.pid} (owner root)" in dry.stdout
