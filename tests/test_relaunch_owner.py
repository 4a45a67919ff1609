"""`fix --apply` and `--rollback` relaunch another user's server as that user, never as root
(issue 22 item 1). Run as root with a real unprivileged user made for the test: marker files
written by the owner's launch script and the relaunched server's /proc entry prove which uid
ran the owner's code; a server whose owner cannot be read is refused before anything stops.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from dflash_doctor.errors import FileMissing
from dflash_doctor.facts.launch import parse_launch_file
from dflash_doctor.fix.apply import apply_plan
from dflash_doctor.fix.plan import plan_fixes
from dflash_doctor.gather import gather
from dflash_doctor.hosts import HostSpec
from dflash_doctor.runner import run_checks
from dflash_doctor.transport.local import LocalTransport
from fixtures.sshd import free_port
from fixtures.stand_in import copy_models, end_servers_under, healthy, install_stand_in
from tests.test_apply_safety import fix
from tests.test_fix import server_info

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or os.geteuid() != 0 or shutil.which("useradd") is None,
    reason="needs Linux, root and useradd (a real unprivileged server owner)",
)
# The owner's interpreter must be one that user can reach (the test's may sit under /root).
HOST_PYTHON = "/usr/bin/python3"
SECRET = "hf_" + "s3cr3tvalue" * 3


@pytest.fixture
def owner() -> Iterator[tuple[str, int, int]]:
    name = "dfd" + secrets.token_hex(4)
    subprocess.run(
        ["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True
    )
    try:
        uid = int(subprocess.run(["id", "-u", name], capture_output=True, text=True).stdout)
        gid = int(subprocess.run(["id", "-g", name], capture_output=True, text=True).stdout)
        yield name, uid, gid
    finally:
        subprocess.run(["userdel", name], check=False, capture_output=True)


@pytest.fixture
def host(request: pytest.FixtureRequest, owner: tuple[str, int, int]) -> Iterator[dict[str, Any]]:
    """A server directory owned by the user, its script, and a server started as that user
    (with a supplementary group and the service's own environment, a secret included, and
    the variables a test passes as its param)."""
    _name, uid, gid = owner
    root = Path(tempfile.mkdtemp(prefix="dfd-owner-", dir="/tmp"))
    root.chmod(0o755)
    d = root / "srv"
    d.mkdir()
    models = copy_models(d / "models")
    site = install_stand_in(d / "site", "0.5.13")
    port = free_port()
    script, log, marker = d / "serve.sh", d / "server.log", d / "marker"
    script.write_text(
        "#!/bin/sh\n# stand-in DFlash server\n"
        f'echo "$(id -u) $(id -G) $DFD_SERVICE_MARK" >> {marker}\n'
        f"export PYTHONPATH={site}\n"
        f"exec {HOST_PYTHON} -m sglang.launch_server \\\n"
        f"  --model-path {models / 'target'} \\\n  --speculative-algorithm DFLASH \\\n"
        f"  --speculative-draft-model-path {models / 'drafter'} \\\n"
        f"  --context-length 131072 \\\n  --port {port}\n"
    )
    script.chmod(0o755)
    subprocess.run(["chown", "-R", f"{uid}:{gid}", str(d)], check=True)
    env = {"PATH": "/usr/bin:/bin", "DFD_SERVICE_MARK": "from-the-service", "HF_TOKEN": SECRET}
    env.update(getattr(request, "param", {}))
    started = subprocess.run(
        ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--groups=100", "--", "sh", "-c",
         'setsid nohup "$0" >>"$1" 2>&1 </dev/null & echo $!', str(script), str(log)],
        check=True, capture_output=True, text=True, env=env,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not healthy(port):
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)
    inv = d / "inventory.yaml"
    entry = {"launch_file": str(script), "log_path": str(log), "sglang_version": "0.5.13"}
    inv.write_text(yaml.safe_dump({"hosts": {"local": entry}}))
    yield {
        "uid": uid, "gid": gid, "script": script, "marker": marker, "port": port,
        "pid": int(started.stdout), "inventory": inv, "log": log,
    }  # fmt: skip
    end_servers_under(root)
    shutil.rmtree(root, ignore_errors=True)


def server_on(port: int, under: Path) -> int:
    """The stand-in server listening on `port` whose command line names `under`."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        mine = b"sglang.launch_server" in cmd and str(under).encode() in cmd
        if mine and b"--port\0%d\0" % port in cmd:
            return int(entry)
    raise AssertionError(f"no server on {port}")


def ids(pid: int) -> dict[str, list[str]]:
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    pairs = (ln.partition(":") for ln in lines)
    return {k: v.split() for k, _, v in pairs if k in ("Uid", "Gid", "Groups")}


def environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(e.decode().split("=", 1) for e in raw if b"=" in e)


def last_mark(marker: Path) -> list[str]:
    return marker.read_text().splitlines()[-1].split()


def assert_runs_as_owner(h: dict[str, Any], old: dict[str, list[str]]) -> int:
    pid = server_on(h["port"], h["script"].parent)
    now = ids(pid)
    assert now["Uid"] == [str(h["uid"])] * 4, now
    assert now["Gid"] == [str(h["gid"])] * 4, now
    assert now["Groups"] == old["Groups"], (now, old)  # the supplementary groups it had
    env = environ(pid)
    assert env.get("DFD_SERVICE_MARK") == "from-the-service" and env.get("HF_TOKEN") == SECRET
    mark = last_mark(h["marker"])
    assert mark[0] == str(h["uid"]) and mark[-1] == "from-the-service", mark
    return pid


def test_apply_and_rollback_relaunch_as_the_servers_owner(host: dict[str, Any]) -> None:
    h = host
    old = ids(server_on(h["port"], h["script"].parent))
    assert old["Uid"][0] == str(h["uid"]) and last_mark(h["marker"])[0] == str(h["uid"])
    original = h["script"].read_bytes()
    p = fix("-I", str(h["inventory"]), "--apply", "--yes")
    assert p.returncode == 0, p.stdout + p.stderr
    assert server_info(h["port"])["speculative_draft_window_size"] == 2048
    assert SECRET not in p.stdout + p.stderr  # the service's environment is never shown
    assert_runs_as_owner(h, old)
    assert "0" not in [line.split()[0] for line in h["marker"].read_text().splitlines()]
    p = fix("-I", str(h["inventory"]), "--rollback", "--yes")
    assert p.returncode == 0, p.stdout + p.stderr
    assert h["script"].read_bytes() == original
    assert server_info(h["port"])["speculative_draft_window_size"] is None
    assert SECRET not in p.stdout + p.stderr
    assert_runs_as_owner(h, old)
    assert "0" not in [line.split()[0] for line in h["marker"].read_text().splitlines()]


def test_rollback_of_an_exited_server_runs_as_the_launch_files_owner(host: dict[str, Any]) -> None:
    """No server runs to take the owner from: the launch file's owner starts it, not root."""
    h = host
    p = fix("-I", str(h["inventory"]), "--apply", "--yes")
    assert p.returncode == 0, p.stdout + p.stderr
    os.kill(server_on(h["port"], h["script"].parent), 9)
    deadline = time.monotonic() + 30
    while healthy(h["port"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    p = fix("-I", str(h["inventory"]), "--rollback", "--yes")
    assert p.returncode == 0, p.stdout + p.stderr
    assert server_info(h["port"])["speculative_draft_window_size"] is None
    now = ids(server_on(h["port"], h["script"].parent))
    assert now["Uid"] == [str(h["uid"])] * 4 and now["Gid"] == [str(h["gid"])] * 4, now
    assert now["Groups"] == [], now
    assert last_mark(h["marker"])[0] == str(h["uid"])


@pytest.mark.parametrize("host", [{"FAKE_SGLANG_OOM_WITH_WINDOW": "1"}], indirect=True)
def test_a_failed_relaunch_brings_the_old_server_back_as_its_owner(host: dict[str, Any]) -> None:
    """The service's environment makes the fixed server fail at startup (so it did reach the
    relaunch); the rollback's restart of the old server runs as the owner too."""
    h = host
    old = ids(server_on(h["port"], h["script"].parent))
    original = h["script"].read_bytes()
    p = fix("-I", str(h["inventory"]), "--apply", "--yes")
    assert p.returncode == 4 and "rolled back" in p.stdout, p.stdout + p.stderr
    assert "CUDA out of memory (stand-in failure)" in p.stdout
    assert h["script"].read_bytes() == original and healthy(h["port"])
    assert SECRET not in p.stdout + p.stderr
    assert_runs_as_owner(h, old)
    assert "0" not in [line.split()[0] for line in h["marker"].read_text().splitlines()]
    assert len(h["marker"].read_text().splitlines()) == 3  # started, relaunched, restored


class _HiddenStatus(LocalTransport):
    """The host will not show the server's /proc status (hidepid, or a process that is
    gone): whose server it is cannot be told. Everything else is real."""

    hidden = 0

    def read_file(self, path: str, *, max_bytes: int) -> bytes:
        if path == f"/proc/{self.hidden}/status":
            raise FileMissing(f"{path}: hidden")
        return super().read_file(path, max_bytes=max_bytes)


def test_unknown_owner_is_refused_and_nothing_stops(host: dict[str, Any]) -> None:
    h = host
    spec = HostSpec.of(
        name="local", launch_file=str(h["script"]), log_path=str(h["log"]), sglang_version="0.5.13"
    ).model_copy(update={"pid": h["pid"]})
    t = _HiddenStatus("local")
    facts = gather(spec, t)
    text = h["script"].read_text()
    plan = plan_fixes(
        "local",
        run_checks(facts),
        source=str(h["script"]),
        source_text=text,
        source_launch=parse_launch_file(
            text.encode(), source=str(h["script"]), path=str(h["script"]), service=None
        ),
        running=facts.launch.value,
    )
    assert plan.changes
    original = h["script"].read_bytes()
    marks = h["marker"].read_text()
    t.hidden = server_on(h["port"], h["script"].parent)
    out = apply_plan(spec, t, plan, facts, stamp="1", health_timeout=120)
    assert out.status == "failed" and "\n" not in out.message, out.message
    assert "owner" in out.message and "nothing" in out.message, out.message
    assert h["script"].read_bytes() == original and h["marker"].read_text() == marks
    assert server_on(h["port"], h["script"].parent) == t.hidden and healthy(h["port"])
    assert not any(a.startswith("kill") for a in out.steps), out.steps


def test_groups_line_and_setpriv_words() -> None:
    """The Groups line is read as digits only (a hostile or truncated line is refused), and
    the words run the rest with exactly those groups, or none."""
    from dflash_doctor.on_host import host_exec_rules as rules

    assert rules.parse_status_groups("Uid:\t1\nGroups:\t100 27 \n") == (100, 27)
    assert rules.parse_status_groups("Groups:\t\n") == ()
    for bad in ("Groups:\t100 -5\n", "Groups:\t\u0661\n", "Uid:\t1\n"):
        with pytest.raises(rules.Refused):
            rules.parse_status_groups(bad)
    assert rules.as_user(1001, 1002, (100, 27)) == [
        "setpriv", "--reuid=1001", "--regid=1002", "--groups=100,27", "--",
    ]  # fmt: skip
    assert rules.as_user(1001, 1002)[-2:] == ["--clear-groups", "--"]
