"""`fix --apply` and `--rollback` never leave a host without its server (issue 10 items 2-4,
7, 9-12 and the Low items), on this machine as a local host with stand-in servers.

Every server a test starts is ended by that test, by the pids whose command lines name
its own tmp_path (the doctor relaunches them, so they are not the test's children).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from dflash_doctor.errors import TransportError
from dflash_doctor.fix.apply import HEALTH_PROBE, Applier, apply_plan
from dflash_doctor.fix.journal import open_journal
from dflash_doctor.fix.plan import FixPlan
from dflash_doctor.hosts import HostSpec
from dflash_doctor.redact import shell_with_placeholders
from dflash_doctor.transport.base import CommandResult
from dflash_doctor.transport.local import LocalTransport
from dflash_doctor.transport.open import open_transport
from fixtures.stand_in import StandIn, end_servers_under, healthy
from tests.cli_helper import doctor
from tests.conftest import DEMO_HOST
from tests.test_fix import server_info

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="stand-in servers need Linux")


class Server(StandIn):
    """A stand-in server (fixtures/stand_in.py) in tmp_path/NAME; servers share the models."""

    def __init__(self, tmp_path: Path, name: str) -> None:
        super().__init__(tmp_path / name, models=tmp_path / "models")

    def inventory(self, **extra: Any) -> Path:
        inv = self.dir / "inventory.yaml"
        entry = {
            "launch_file": str(self.script),
            "log_path": str(self.log),
            "sglang_version": "0.5.13",
            **extra,
        }
        inv.write_text(yaml.safe_dump({"hosts": {"local": entry}}))
        return inv


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Any]:
    yield lambda name: Server(tmp_path, name)
    end_servers_under(tmp_path)


def fix(*args: str) -> subprocess.CompletedProcess[str]:
    return doctor("fix", "--health-timeout", "120", *args, columns=200, timeout=600)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and b"Z" not in _state(pid)


def _state(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1][:3]
    except OSError:
        return b"Z"


def test_rollback_stops_only_the_server_it_relaunched(servers: Any) -> None:
    """Items 2 and 12: another SGLang server on the host is never touched; the wait stops
    when the relaunched server exits; only log lines since the relaunch are shown."""
    other = servers("other")
    other.write()
    other_pid = other.start()
    ours = servers("ours")
    # This server cannot start with a draft window (the stand-in fails at startup).
    ours.write(extra="export FAKE_SGLANG_OOM_WITH_WINDOW=1\n")
    our_pid = ours.start()
    with ours.log.open("a") as f:
        f.write("OLD-HISTORY-MARKER from an earlier run\n")
    original = ours.script.read_bytes()
    p = fix("-I", str(ours.inventory(pid=our_pid)), "--apply", "--yes")
    assert p.returncode == 4, p.stdout + p.stderr
    assert "exited before" in p.stdout  # no 120 s wait for a server that is gone
    assert "CUDA out of memory (stand-in failure)" in p.stdout
    assert "OLD-HISTORY-MARKER" not in p.stdout
    assert ours.script.read_bytes() == original
    assert healthy(ours.port) and not alive(our_pid)
    assert alive(other_pid) and healthy(other.port)  # the other server was never stopped
    assert f"kill -TERM -- {other_pid}" not in p.stdout


def test_non_executable_script_then_rollback_of_an_exited_server(servers: Any) -> None:
    """Items 3 and 9: a script without the execute bit starts with its #! interpreter;
    --rollback restores and starts the server even when it has already exited."""
    s = servers("s")
    s.write()
    original = s.script.read_bytes()
    pid = s.start()
    s.script.chmod(0o644)
    inv = s.inventory()
    p = fix("-I", str(inv), "--apply", "--yes")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "verified" in p.stdout
    assert server_info(s.port)["speculative_draft_window_size"] == 2048
    assert not alive(pid)
    new_pid = int(
        subprocess.run(
            ["sh", "-c", f"ss -ltnpH 'sport = :{s.port}' | grep -o 'pid=[0-9]*' | head -1"],
            capture_output=True,
            text=True,
        ).stdout.strip()[4:]
        or 0
    )
    end = new_pid or 0
    if end:
        os.kill(end, 9)
    else:
        pytest.skip("ss not available to find the relaunched server")
    deadline = time.monotonic() + 30
    while healthy(s.port) and time.monotonic() < deadline:
        time.sleep(0.1)
    p = fix("-I", str(inv), "--rollback", "--yes")
    assert p.returncode == 0, p.stdout + p.stderr
    assert s.script.read_bytes() == original
    assert server_info(s.port)["speculative_draft_window_size"] is None


def test_inventory_secrets_are_kept_in_the_file_and_hidden_on_screen(tmp_path: Path) -> None:
    """Item 4: the inventory keeps its real --api-key; the diff shown hides it."""
    shutil.copytree(DEMO_HOST / "models/Kimi-K2.6-DFlash", tmp_path / "d")
    inv = tmp_path / "inventory.yaml"
    inv.write_text(
        "defaults:\n  sglang_version: 0.5.13\n  offline: true\n"
        f"  drafter_path: {tmp_path / 'd'}\n"
        "hosts:\n  gpu-a:\n"
        "    launch: python -m sglang.launch_server --speculative-algorithm DFLASH"
        " --api-key sk-live-0123456789abcdef --speculative-draft-model-path d\n"
    )
    dry = fix("-I", str(inv))
    assert dry.returncode == 0 and "sk-live-0123456789abcdef" not in dry.stdout + dry.stderr
    assert "--speculative-draft-window-size 2048" in dry.stdout
    p = fix("-I", str(inv), "--apply", "--yes")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "sk-live-0123456789abcdef" not in p.stdout
    text = inv.read_text()
    assert "--api-key sk-live-0123456789abcdef" in text and "'***'" not in text


def test_script_secrets_are_hidden_in_diff_context(servers: Any) -> None:
    """Item 7: a secret on a context line of the diff is not printed."""
    s = servers("s")
    s.write(api_key="s3cr3t-context-value")
    p = fix("local", "--offline", "--launch", str(s.script), "--sglang-version", "0.5.13")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "--speculative-draft-window-size 2048" in p.stdout
    assert "s3cr3t-context-value" not in p.stdout and "--api-key ***" in p.stdout


def test_new_command_uses_placeholders_for_secrets() -> None:
    line, names = shell_with_placeholders(
        ["python", "-m", "sglang.launch_server", "--api-key", "***", "--hf-token=***", "--tp", "2"]
    )
    assert '--api-key "$SGLANG_API_KEY"' in line and '--hf-token="$SGLANG_HF_TOKEN"' in line
    assert names == ["SGLANG_API_KEY", "SGLANG_HF_TOKEN"] and "'***'" not in line


def offline_plan(tmp_path: Path) -> tuple[HostSpec, FixPlan, Path]:
    script = tmp_path / "serve.sh"
    script.write_text("#!/bin/sh\nexec python -m sglang.launch_server --tp 2\n")
    from dflash_doctor.facts.launch import parse_script

    launch = parse_script(script.read_bytes(), source=str(script))
    old = script.read_text()
    new = old.replace("--tp 2", "--tp 2 --page-size 64")
    plan = FixPlan(host="h", source=str(script), launch=launch, old_text=old, new_text=new)
    return HostSpec.of(name="h", offline=True), plan, script


def test_edit_between_planning_and_writing_is_not_lost(tmp_path: Path) -> None:
    spec, plan, script = offline_plan(tmp_path)
    script.write_text(script.read_text() + "# someone's edit\n")
    out = apply_plan(spec, open_transport(spec), plan, _facts(), stamp="1")
    assert out.status == "failed" and "changed since it was read" in out.message
    assert "# someone's edit" in script.read_text() and not list(tmp_path.glob("*.bak"))


def test_a_second_apply_waits_for_the_lock(tmp_path: Path) -> None:
    """The lock lives in the journal's directory (fix/journal.py), not beside the file: a
    lock held by a running doctor refuses a second apply; the owner of the launch
    directory can neither make nor remove it."""
    spec, plan, script = offline_plan(tmp_path)
    t = open_transport(spec)
    j = open_journal(t, spec, str(script), "1")
    assert not j.dir.startswith(str(tmp_path))
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)  # dflash"])
    try:
        Path(j.lock_path).write_text(
            json.dumps({"pid": holder.pid, "machine": socket.gethostname(), "stamp": "0"})
        )
        out = apply_plan(spec, t, plan, _facts(), stamp="1")
        assert out.status == "failed" and "another dflash-doctor apply" in out.message
        assert "--page-size" not in script.read_text()
    finally:
        holder.kill()
        holder.wait()
        Path(j.lock_path).unlink()
    out = apply_plan(spec, t, plan, _facts(), stamp="1")
    assert out.status == "written" and not Path(j.lock_path).exists()


def test_symlinked_launch_file_is_written_through(tmp_path: Path) -> None:
    spec, plan, script = offline_plan(tmp_path)
    link = tmp_path / "current.sh"
    link.symlink_to(script)
    plan = plan.model_copy(update={"source": str(link)})
    out = apply_plan(spec, open_transport(spec), plan, _facts(), stamp="1")
    assert out.status == "written", out.message
    assert link.is_symlink() and "--page-size 64" in script.read_text()


def test_rollback_skips_a_backup_equal_to_the_file(tmp_path: Path) -> None:
    """Two applies, then the file edited back to the first fix: the newest kept copy equals
    the file, so the older one (the original) is restored."""
    spec, plan, script = offline_plan(tmp_path)
    original = script.read_text()
    t = open_transport(spec)
    assert apply_plan(spec, t, plan, _facts(), stamp="20260101T000000").status == "written"
    fixed = script.read_text()
    again = plan.model_copy(update={"old_text": fixed, "new_text": fixed.replace("64", "128")})
    assert apply_plan(spec, t, again, _facts(), stamp="20260101T000100").status == "written"
    script.write_text(fixed)
    p = fix("--offline", "--launch", str(script), "--rollback", "--yes")
    assert p.returncode == 0, p.stdout + p.stderr
    assert script.read_text() == original


class _LowDisk(LocalTransport):
    """The host reports 100 KiB free (a full disk), everything else is real."""

    def free_bytes(self, path: str) -> int | None:
        return 100 * 1024


def test_full_disk_is_refused_before_anything_stops(tmp_path: Path) -> None:
    """Item 10: no space for the backup and the new file: nothing is stopped or written."""
    _spec, plan, script = offline_plan(tmp_path)
    live = HostSpec.of(name="h")
    a = Applier(live, _LowDisk("h"), 5)
    with pytest.raises(TransportError, match="nothing was changed"):
        a.check_space(str(script), 10)
    before = script.read_text()
    out = apply_plan(live, _LowDisk("h"), plan, _facts(), stamp="1")
    assert out.status == "failed" and "the server runs as before" in out.message
    assert script.read_text() == before and not list(tmp_path.glob("*.bak"))
    assert not list(tmp_path.glob(".serve.sh.*"))  # no temporary file left behind


class _CtrlC(LocalTransport):
    """Ctrl-C arrives during the health wait of the relaunched server."""

    fired = False

    def run(
        self,
        argv: list[str],
        *,
        timeout: float = 30.0,
        on_stderr: Callable[[bytes], None] | None = None,
    ) -> CommandResult:
        if not self.fired and HEALTH_PROBE in argv:
            self.fired = True
            raise KeyboardInterrupt
        return super().run(argv, timeout=timeout, on_stderr=on_stderr)


def test_ctrl_c_during_apply_rolls_back_and_says_so(servers: Any) -> None:
    """Item 11: an interrupt while waiting finishes the rollback and reports the state."""
    from dflash_doctor.fix.plan import plan_fixes
    from dflash_doctor.gather import gather
    from dflash_doctor.runner import run_checks

    s = servers("s")
    s.write()
    original = s.script.read_bytes()
    pid = s.start()
    spec = HostSpec.of(
        name="local", launch_file=str(s.script), log_path=str(s.log), sglang_version="0.5.13"
    ).model_copy(update={"pid": pid})
    t = _CtrlC("local")
    facts = gather(spec, t)
    from dflash_doctor.facts.launch import parse_launch_file

    text = s.script.read_text()
    plan = plan_fixes(
        "local",
        run_checks(facts),
        source=str(s.script),
        source_text=text,
        source_launch=parse_launch_file(
            text.encode(), source=str(s.script), path=str(s.script), service=None
        ),
        running=facts.launch.value,
    )
    assert plan.changes
    out = apply_plan(spec, t, plan, facts, stamp="1", health_timeout=120)
    assert out.status == "rolled_back", out.message
    assert "interrupted (Ctrl-C or SIGTERM)" in out.message
    assert s.script.read_bytes() == original and healthy(s.port)


def _facts() -> Any:
    from dflash_doctor.facts.models import Fact, HostFacts

    missing: Fact[Any] = Fact.missing("none")
    return HostFacts(
        host="h",
        sglang_version=missing,
        gpus=missing,
        launch=missing,
        drafter=missing,
        target=missing,
        log=missing,
    )
