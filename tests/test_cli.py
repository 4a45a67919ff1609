from __future__ import annotations

import json
import subprocess

import pytest

from tests.cli_helper import doctor
from tests.conftest import FIXTURE_HOSTS


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return doctor(*args)


def test_demo_reports_seed_finding_and_exits_1() -> None:
    p = run("check", "--demo")
    assert p.returncode == 1, p.stderr
    # the seed on 0.5.13: dflash.py 0.5.13:116-122 ignores layer_types, decided from the
    # host's own installed file; two fixes (upgrade, or the window at 2048)
    assert "DFD103" in p.stdout and "draft_window_size=None" in p.stdout
    assert "upgrade SGLang to 0.5.14" in p.stdout
    assert "--speculative-draft-window-size 2048" in p.stdout
    assert "srt/models/dflash.py" in p.stdout
    assert "sk-fixture" not in p.stdout + p.stderr and "hf_FAKE" not in p.stdout + p.stderr


def test_json_schema_is_stable() -> None:
    p = run("check", "--demo", "--format", "json")
    report = json.loads(p.stdout)
    assert report["schema_version"] == 1 and report["exit_code"] == p.returncode == 1
    host = report["hosts"][0]
    assert set(host) >= {"host", "reachable", "error", "facts", "fact_errors", "results"}
    result = next(r for r in host["results"] if r["check_id"] == "DFD103")
    # `unjudged` (issue 26): added in schema 1, a skip's kind (report.wanted_facts)
    assert set(result) == {
        "check_id", "name", "severity", "status", "reason", "findings", "unjudged"
    }  # fmt: skip
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
        "action": "upgrade_sglang",
        "flag": None,
        "value": "0.5.14",
        "replaces": None,
        "note": None,
    }
    window_fix = dict(finding["fixes"][1], note=None)
    assert window_fix == {
        "action": "set_flag",
        "flag": "--speculative-draft-window-size",
        "value": "2048",
        "replaces": None,
        "note": None,
    }
    assert "full_attention layer(s) 5" in finding["fixes"][1]["note"]
    assert "sk-fixture" not in p.stdout


@pytest.mark.parametrize(
    ("select", "fail_on", "code"),
    [
        # v0511: DFD131 fires at info, DFD107 at warning, nothing at error; each level is told
        # apart from the one above it by the exit code.
        ("DFD131", "error", 0),
        ("DFD131", "warning", 0),
        ("DFD131", "info", 1),
        ("DFD107,DFD131", "error", 0),
        ("DFD107,DFD131", "warning", 1),
        ("DFD107,DFD131", "info", 1),
    ],
)
def test_fail_on_levels(select: str, fail_on: str, code: int) -> None:
    host = str(FIXTURE_HOSTS / "v0511")
    p = run("check", "--host-dir", host, "--select", select, "--fail-on", fail_on)
    assert p.returncode == code, p.stdout + p.stderr


def test_fail_on_error_on_demo() -> None:
    # the demo's seed finding (DFD103) is an error: it fails at the strictest level too
    assert run("check", "--demo", "--fail-on", "error").returncode == 1


def test_fail_on_warning_only_host() -> None:
    # v0511: DFD107 and DFD130 (warnings), DFD131 (info); select one warning alone.
    host = str(FIXTURE_HOSTS / "v0511")
    assert run("check", "--host-dir", host, "--select", "DFD107").returncode == 0
    assert (
        run("check", "--host-dir", host, "--select", "DFD107", "--fail-on", "warning").returncode
        == 1
    )


def test_tuned_host_passes_and_output_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """tuned: 0.5.23 (dflash.py 0.5.23:166-190 honours layer_types), no window flag, the
    draft's own fp8 KV cache (server_args.py 0.5.18:2187-2200)."""
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
    p = run("explain", "dfd103")
    assert p.returncode == 0 and "How to fix" in p.stdout and "Versions" in p.stdout
    p = run("explain", "dfd101")  # retired ids say so, and name what replaced them
    assert p.returncode == 0 and "retired" in p.stdout and "DFD103" in p.stdout
    p = run("checks")
    for cid in ("DFD102", "DFD103", "DFD104", "DFD105", "DFD106", "DFD107", "DFD130", "DFD131"):
        assert cid in p.stdout


def test_second_demo_host_on_0523_gives_the_opposite_advice() -> None:
    """The same launch on 0.5.23 serves every layer as trained (dflash.py 0.5.23:166-190):
    nothing at warning or above; only the draft KV lever (info)."""
    p = run("check", "--demo-host", "v0523", "--format", "json")
    assert p.returncode == 0, p.stdout
    findings = [f for r in json.loads(p.stdout)["hosts"][0]["results"] for f in r["findings"]]
    assert [(f["check_id"], f["severity"]) for f in findings] == [("DFD131", "info")]
    assert run("check", "--demo-host", "nope").returncode == 2
