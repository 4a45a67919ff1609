"""Issue 22: `gate` refuses a `.dflash-doctor.yaml` symlink that leaves the repository and a
waiver or baseline file that is not a regular file (a FIFO would block it forever), in one
line, exit 2."""

from __future__ import annotations

import os
from pathlib import Path

from tests.test_gate import gate, repo  # noqa: F401  (the fixture)

WAIVE_ALL = "waivers:\n  - check: DFD103\n    reason: planted\n  - check: DFD131\n    reason: x\n"


def test_a_waiver_symlink_out_of_the_repository_is_refused(repo: Path, tmp_path: Path) -> None:  # noqa: F811
    outside = tmp_path.parent / f"{tmp_path.name}-outside.yaml"
    outside.write_text(WAIVE_ALL)
    try:
        (repo / ".dflash-doctor.yaml").symlink_to(outside)
        p = gate(repo)
        assert p.returncode == 2, p.stdout + p.stderr
        assert "symlink out of the repository" in p.stderr and "Traceback" not in p.stderr
        assert len(p.stderr.strip().splitlines()) == 1
    finally:
        outside.unlink()


def test_a_waiver_symlink_inside_the_repository_is_read(repo: Path) -> None:  # noqa: F811
    (repo / "policy").mkdir()
    (repo / "policy/waivers.yaml").write_text(WAIVE_ALL)
    (repo / ".dflash-doctor.yaml").symlink_to("policy/waivers.yaml")
    p = gate(repo)
    assert p.returncode == 0, p.stdout + p.stderr


def test_a_fifo_waiver_or_baseline_file_is_refused_without_blocking(repo: Path) -> None:  # noqa: F811
    os.mkfifo(repo / ".dflash-doctor.yaml")
    p = gate(repo)  # times out (120 s) when it blocks on the FIFO
    assert p.returncode == 2 and "not a regular file" in p.stderr, p.stdout + p.stderr
    os.unlink(repo / ".dflash-doctor.yaml")
    p = gate(repo, "--baseline", "/dev/zero")
    assert p.returncode == 2 and "not a regular file" in p.stderr, p.stdout + p.stderr
