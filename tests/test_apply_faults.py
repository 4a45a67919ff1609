"""A signal at any step of `fix --apply` never leaves the host down (issue 22 item 7).

`fix --apply` runs as a subprocess against a stand-in server on this machine and pauses
at one journaled step (fix/journal.py's test hook: DFLASH_DOCTOR_TEST_PAUSE_AT); the test
then sends SIGINT, SIGTERM or SIGKILL. After SIGINT and SIGTERM the doctor itself must
have put the old launch file back with its server running and released the lock; after
SIGKILL (which nothing can catch) its lock stays, a new apply is refused with the way
out, and `fix --rollback` clears the lock and brings the old server back.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dflash_doctor.fix.journal import PAUSE_ENV, PAUSE_FILE_ENV, open_journal
from dflash_doctor.hosts import HostSpec
from dflash_doctor.transport.open import open_transport
from fixtures.stand_in import healthy
from tests.cli_helper import DOCTOR, doctor_env
from tests.conftest import REPO
from tests.test_apply_safety import fix, servers  # noqa: F401 - a fixture
from tests.test_fix import server_info
from tests.test_relaunch_owner import host, ids, owner, server_on  # noqa: F401 - fixtures

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or os.geteuid() != 0, reason="stand-in servers, root's journal"
)
STEPS = ["backed_up", "written", "stopping", "stopped", "started", "healthy"]
SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGKILL]


def _paused_apply(inventory: Path, step: str, marker: Path) -> subprocess.Popen[str]:
    env = doctor_env(200, env={PAUSE_ENV: step, PAUSE_FILE_ENV: str(marker)})
    argv = [*DOCTOR, "fix", "--health-timeout", "120"]
    return subprocess.Popen(
        [*argv, "-I", str(inventory), "--apply", "--yes"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        cwd=REPO,
        env=env,
    )


def _wait_for(marker: Path, p: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 180
    while not marker.exists():
        if p.poll() is not None:
            out = p.stdout.read() if p.stdout else ""
            raise AssertionError(f"the apply ended before its step: {out}")
        assert time.monotonic() < deadline, "the apply never reached its step"
        time.sleep(0.05)


def _lock(script: Path) -> Path:
    spec = HostSpec.of(name="local", offline=True)
    return Path(open_journal(open_transport(spec), spec, str(script), "x").lock_path)


@pytest.mark.parametrize("step", STEPS)
@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_a_signal_at_each_step_leaves_the_server_running_or_recoverable(
    servers: Any,  # noqa: F811
    tmp_path: Path,
    step: str,
    sig: int,
) -> None:
    s = servers("s")
    s.write()
    original = s.script.read_bytes()
    pid = s.start()
    lock = _lock(s.script)
    marker = tmp_path / "paused"
    try:
        p = _paused_apply(s.inventory(pid=pid), step, marker)
        _wait_for(marker, p)
        os.kill(p.pid, sig)
        out, _ = p.communicate(timeout=300)
        if sig != signal.SIGKILL:
            assert p.returncode not in (0, -sig), out
            assert "interrupted (Ctrl-C or SIGTERM)" in out, out
        else:
            assert lock.exists()  # the killed doctor's lock stays
            if step == "backed_up":  # the file is as it was: a new apply is refused
                again = fix("-I", str(s.inventory()), "--apply", "--yes")
                assert again.returncode != 0 and "fix --rollback" in again.stdout, again.stdout
            else:
                assert s.script.read_bytes() != original
            r = fix("-I", str(s.inventory()), "--rollback", "--yes")
            out = r.stdout + r.stderr
            assert r.returncode == 0 or step == "backed_up", out
        assert s.script.read_bytes() == original, out
        assert healthy(s.port), out
        assert server_info(s.port)["speculative_draft_window_size"] is None, out
        assert not lock.exists(), out
    finally:
        shutil.rmtree(lock.parent, ignore_errors=True)


def test_rollback_after_sigkill_brings_an_owners_server_back_as_that_owner(
    host: dict[str, Any],  # noqa: F811
    tmp_path: Path,
) -> None:
    """The server belongs to an unprivileged user; the doctor is killed once it stopped
    it. `--rollback` clears the lock and starts the old script as that user, and the file
    stays the owner's."""
    h = host
    original = h["script"].read_bytes()
    lock = _lock(h["script"])
    marker = tmp_path / "paused"
    try:
        p = _paused_apply(h["inventory"], "stopped", marker)
        _wait_for(marker, p)
        os.kill(p.pid, signal.SIGKILL)
        p.communicate(timeout=60)
        assert not healthy(h["port"]) and lock.exists()  # down, and locked by the dead
        r = fix("-I", str(h["inventory"]), "--rollback", "--yes")
        assert r.returncode == 0, r.stdout + r.stderr
        assert "cleared the lock of pid" in r.stdout, r.stdout
        assert h["script"].read_bytes() == original and not lock.exists()
        st = h["script"].stat()
        assert (st.st_uid, st.st_gid) == (h["uid"], h["gid"])
        now = ids(server_on(h["port"], h["script"].parent))
        assert now["Uid"] == [str(h["uid"])] * 4, now
    finally:
        shutil.rmtree(lock.parent, ignore_errors=True)
