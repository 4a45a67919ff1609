"""`fix --apply` judges the file it wrote (read back from the host), and names links only
when the launch file itself is one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dflash_doctor.facts.launch import parse_script
from dflash_doctor.fix.apply import Applier, _written_runs
from dflash_doctor.fix.edits import Edit
from dflash_doctor.fix.plan import FixPlan
from dflash_doctor.hosts import HostSpec
from dflash_doctor.transport.local import LocalTransport

SCRIPT = "python3 -m sglang.launch_server \\\n  --page-size \\\n  64 \\\n  --port 30000\n"


def _plan(path: Path) -> FixPlan:
    launch = parse_script(SCRIPT.encode(), source=str(path))
    return FixPlan(
        host="h",
        source=str(path),
        launch=launch,
        edits=[Edit("remove_flag", "--page-size")],
        old_text=SCRIPT,
        new_text="python3 -m sglang.launch_server \\\n  --port 30000\n",
        new_argv=["python3", "-m", "sglang.launch_server", "--port", "30000"],
    )


def test_the_written_file_is_what_is_judged(tmp_path: Path) -> None:
    path = tmp_path / "launch.sh"
    plan = _plan(path)
    a = Applier(HostSpec.of("h"), LocalTransport("h"), health_timeout=5)
    assert plan.new_text is not None
    path.write_text(plan.new_text)
    assert _written_runs(a, plan, str(path), plan.new_text.encode(), None) is None
    # What the old rewriter wrote: the value orphaned on its continuation line.
    broken = "python3 -m sglang.launch_server \\\n  64 \\\n  --port 30000\n"
    path.write_text(broken)
    why = _written_runs(a, plan, str(path), broken.encode(), None)
    assert why is not None and "would not run the planned command" in why
    assert _written_runs(a, plan, str(path), plan.new_text.encode(), None) is not None


def test_a_relative_launch_path_is_not_a_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "launch.sh").write_text(SCRIPT)
    os.symlink(tmp_path / "launch.sh", tmp_path / "link.sh")
    monkeypatch.chdir(tmp_path)
    a = Applier(HostSpec.of("h"), LocalTransport("h"), health_timeout=5)
    assert a.real_path("launch.sh") == a.real_dir("launch.sh")
    assert a.real_path("link.sh") != a.real_dir("link.sh")
