"""The local lab (scripts/lab.py): one command starts a real sshd and the stand-in SGLang
server, the commands it prints run `check`, `fix --apply`, `bench` and `fix --rollback`
over SSH against it, and one command stops it, leaving no process and no directory behind."""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from fixtures.sshd import find_sshd
from fixtures.stand_in import end_servers_under
from tests.cli_helper import doctor as run_doctor
from tests.conftest import REPO

LAB = REPO / "scripts" / "lab.py"
README = (REPO / "README.md").read_text(encoding="utf-8")


def lab(*args: str, path: str = "/usr/bin:/bin") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(LAB), *args],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        env={"PATH": path, "PYTHONPATH": str(REPO)},
    )


def doctor(command: str) -> subprocess.CompletedProcess[str]:
    """A command as `lab start` printed it, run with this checkout's package."""
    words = shlex.split(command)
    assert words[0] == "dflash-doctor"
    return run_doctor(*words[1:], columns=200, timeout=300)


def processes_naming(mark: Path) -> list[str]:
    """Live (not zombie) processes whose command line names `mark`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_bytes().rsplit(b")", 1)[1][:3]
        except OSError:
            continue
        if str(mark).encode() in cmdline and state != b" Z ":
            found.append(entry + ": " + cmdline.replace(b"\0", b" ").decode(errors="replace"))
    return found


@pytest.fixture
def lab_dir() -> Iterator[Path]:
    d = Path("/tmp") / f"dfd-lab-{uuid.uuid4().hex[:8]}"
    try:
        yield d
    finally:  # a failed test still leaves nothing running
        if (d / "lab.json").exists():
            lab("stop", "--dir", str(d))
        end_servers_under(d)
        shutil.rmtree(d, ignore_errors=True)


def window(port: int) -> object:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/get_server_info", timeout=2) as r:
        return json.loads(r.read())["speculative_draft_window_size"]


@pytest.mark.skipif(find_sshd() is None, reason="OpenSSH server not installed; .ci/run does")
def test_lab_runs_check_fix_bench_rollback_and_stops_clean(lab_dir: Path) -> None:
    p = lab("start", "--dir", str(lab_dir))
    assert p.returncode == 0, p.stdout + p.stderr
    check, apply, bench, rollback = [
        ln.strip() for ln in p.stdout.splitlines() if ln.startswith("  dflash-doctor ")
    ]
    state = json.loads((lab_dir / "lab.json").read_text())
    assert lab("status", "--dir", str(lab_dir)).returncode == 0
    script = lab_dir / "serve.sh"
    original = script.read_bytes()

    c = doctor(check)  # over SSH: the seed scenario on 0.5.13, DFD103's error
    assert c.returncode == 1 and "DFD103 error" in c.stdout, c.stdout + c.stderr
    assert "lab  SGLang 0.5.13" in c.stdout
    f = doctor(apply + " --yes")
    assert f.returncode == 0 and "applied to" in f.stdout, f.stdout + f.stderr
    assert window(state["server_port"]) == 2048
    b = doctor(bench)
    assert b.returncode == 0 and "accept" in b.stdout, b.stdout + b.stderr
    r = doctor(rollback + " --yes")
    assert r.returncode == 0 and "rolled back" in r.stdout, r.stdout + r.stderr
    assert script.read_bytes() == original and window(state["server_port"]) is None

    s = lab("stop", "--dir", str(lab_dir))
    assert s.returncode == 0 and "stopped and removed" in s.stdout, s.stdout + s.stderr
    assert processes_naming(lab_dir) == [] and not lab_dir.exists()
    assert lab("status", "--dir", str(lab_dir)).returncode == 1


def test_lab_says_in_one_line_what_is_missing(lab_dir: Path, tmp_path: Path) -> None:
    # A PATH without OpenSSH's client tools: no ssh-keygen to make the keys with.
    p = lab("start", "--dir", str(lab_dir), path=str(tmp_path))
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.strip().splitlines() == [
        "lab: missing ssh-keygen (apt-get install openssh-client)"
    ]
    assert not lab_dir.exists()


def test_lab_never_takes_over_a_directory_it_did_not_make(lab_dir: Path) -> None:
    lab_dir.mkdir()
    (lab_dir / "keep.txt").write_text("mine")
    p = lab("start", "--dir", str(lab_dir))
    assert p.returncode == 2 and "is not a lab directory" in p.stderr
    s = lab("stop", "--dir", str(lab_dir))
    assert s.returncode == 0 and "no lab in" in s.stdout
    assert (lab_dir / "keep.txt").read_text() == "mine"


def test_readme_walkthrough_runs_the_commands_lab_prints() -> None:
    spec = importlib.util.spec_from_file_location("lab", LAB)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for command in module.commands(module.DEFAULT_DIR):
        assert command in README, command
    assert "python3 scripts/lab.py start" in README and "python3 scripts/lab.py stop" in README
