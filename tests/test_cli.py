from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import FIXTURE_HOSTS, REPO


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dflash_doctor", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        env={"COLUMNS": "120", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)},
    )


def test_demo_reports_seed_finding_and_exits_1() -> None:
    p = run("check", "--demo")
    assert p.returncode == 1, p.stderr
    assert "DFD101" in p.stdout and "draft_window_size=None" in p.stdout
    assert "--speculative-draft-window-size 2048" in p.stdout
    assert "sk-fixture" not in p.stdout + p.stderr and "hf_FAKE" not in p.stdout + p.stderr


def test_json_schema_is_stable() -> None:
    p = run("check", "--demo", "--format", "json")
    report = json.loads(p.stdout)
    assert report["schema_version"] == 1 and report["exit_code"] == p.returncode == 1
    host = report["hosts"][0]
    assert set(host) >= {"host", "reachable", "error", "facts", "fact_errors", "results"}
    result = next(r for r in host["results"] if r["check_id"] == "DFD101")
    assert set(result) == {"check_id", "name", "severity", "status", "reason", "findings"}
    finding = result["findings"][0]
    assert set(finding) == {
        "check_id",
        "severity",
        "title",
        "message",
        "evidence",
        "impact",
        "fixes",
        "suppressed",
        "waiver",
    }
    assert finding["fixes"][0] == {
        "action": "set_flag",
        "flag": "--speculative-draft-window-size",
        "value": "2048",
        "replaces": None,
        "note": None,
    }
    assert "sk-fixture" not in p.stdout


@pytest.mark.parametrize(("fail_on", "code"), [("error", 1), ("warning", 1), ("info", 1)])
def test_fail_on_levels_on_demo(fail_on: str, code: int) -> None:
    assert run("check", "--demo", "--fail-on", fail_on).returncode == code


def test_fail_on_warning_only_host() -> None:
    # v0511: DFD103 (error) and DFD107 (warning); select the warning alone.
    host = str(FIXTURE_HOSTS / "v0511")
    assert run("check", "--host-dir", host, "--select", "DFD107").returncode == 0
    assert (
        run("check", "--host-dir", host, "--select", "DFD107", "--fail-on", "warning").returncode
        == 1
    )


def test_tuned_host_passes_and_output_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "r.json"
    p = run("check", "--host-dir", str(FIXTURE_HOSTS / "tuned"), "--output", str(out))
    assert p.returncode == 0, p.stdout
    assert json.loads(out.read_text())["summary"]["failed"] == 0


def test_usage_errors_exit_2_without_traceback() -> None:
    for args in (
        ("check",),
        ("check", "--select", "DFD999", "--demo"),
        ("check", "--host-dir", "/nonexistent"),
        ("explain", "X1"),
        ("check", "--bogus"),
    ):
        p = run(*args)
        assert p.returncode == 2, args
        assert "Traceback" not in p.stderr + p.stdout


def test_explain_and_catalog() -> None:
    p = run("explain", "dfd101")
    assert p.returncode == 0 and "How to fix" in p.stdout
    p = run("checks")
    for i in range(101, 109):
        assert f"DFD{i}" in p.stdout
