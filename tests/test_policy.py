"""Policy (waivers, baselines) as a function of host reports, and the one identity and
gating rule that baselines, SARIF, the exit code and JUnit share."""

from __future__ import annotations

import datetime as dt
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from dflash_doctor.checks.base import CheckResult, Finding, Severity
from dflash_doctor.errors import UsageError
from dflash_doctor.exit_codes import EXIT_FINDINGS, EXIT_OK
from dflash_doctor.policy import Waiver, apply_policy, judge, load_baseline
from dflash_doctor.render.json_report import render_json
from dflash_doctor.render.junit import render_junit
from dflash_doctor.render.sarif import render_sarif
from dflash_doctor.report import HostReport, build_report, fingerprint, gates

TODAY = dt.date(2026, 6, 1)


def finding(check_id: str, severity: Severity, title: str = "t") -> Finding:
    return Finding(check_id=check_id, severity=severity, title=title, message="m")


def host(name: str, *findings: Finding) -> HostReport:
    by_check: dict[str, list[Finding]] = {}
    for f in findings:
        by_check.setdefault(f.check_id, []).append(f)
    return HostReport(
        host=name,
        results=[
            CheckResult(
                check_id=c, name=c.lower(), severity=fs[0].severity, status="failed", findings=fs
            )
            for c, fs in by_check.items()
        ],
    )


def fleet() -> list[HostReport]:
    return [
        host("a", finding("DFD103", Severity.ERROR), finding("DFD131", Severity.INFO)),
        host("b", finding("DFD103", Severity.ERROR), finding("DFD130", Severity.WARNING)),
    ]


def test_waiver_makes_new_reports_and_leaves_the_given_ones() -> None:
    given = fleet()
    before = [h.model_dump() for h in given]
    waivers = [
        Waiver(check="dfd103", reason="canary", hosts=["a"]),
        Waiver(check="DFD130", reason="known", labels=["staging"], severity=Severity.INFO),
    ]
    judged, notes = judge(given, {"b": ["staging"]}, waivers, TODAY)
    assert [h.model_dump() for h in given] == before and notes == []
    a, b = ({f.check_id: f for f in h.findings} for h in judged)
    assert a["DFD103"].suppressed == "waived: canary" and a["DFD131"].suppressed is None
    assert b["DFD103"].suppressed is None  # the waiver names host a only
    assert b["DFD130"].severity == Severity.INFO and b["DFD130"].waiver == (
        "re-graded to info: known"
    )
    assert b["DFD130"].suppressed is None


def test_expired_waiver_stops_waiving_and_says_so_once() -> None:
    old = Waiver(check="DFD103", reason="old", expires=TODAY)
    judged, notes = judge(fleet(), {}, [old, old], TODAY)
    assert all(f.suppressed is None for h in judged for f in h.findings)
    assert notes == [
        f"{h}: waiver of DFD103 expired on {TODAY} and no longer applies (old)" for h in "ab"
    ]
    live = Waiver(check="DFD103", reason="live", expires=TODAY + dt.timedelta(days=1))
    judged, notes = judge(fleet(), {}, [old, live], TODAY)
    assert {f.suppressed for h in judged for f in h.findings if f.check_id == "DFD103"} == {
        "waived: live"
    }


def test_baseline_round_trip_through_the_json_report(tmp_path: Path) -> None:
    earlier = tmp_path / "earlier.json"
    earlier.write_text(render_json(build_report(fleet()[:1])))
    now = fleet()
    now[0] = host("a", finding("DFD103", Severity.ERROR), finding("DFD103", Severity.ERROR, "new"))
    judged, notes = apply_policy(
        now, {}, today=TODAY, search_dir=str(tmp_path), baseline_file=str(earlier)
    )
    assert notes == []
    suppressed = {(h.host, f.title): f.suppressed for h in judged for f in h.findings}
    assert suppressed == {
        ("a", "t"): "in baseline",
        ("a", "new"): None,  # new title: a new finding
        ("b", "t"): None,  # the same finding on another host is not in the baseline
    }
    assert build_report(judged).exit_code == EXIT_FINDINGS


def test_apply_policy_reads_the_waiver_file_and_notes_it(tmp_path: Path) -> None:
    (tmp_path / ".dflash-doctor.yaml").write_text(
        "waivers:\n  - check: DFD103\n    reason: tracked\n"
    )
    judged, notes = apply_policy(fleet(), {}, today=TODAY, search_dir=str(tmp_path))
    assert notes == [f"1 waiver(s) from {tmp_path / '.dflash-doctor.yaml'}"]
    assert build_report(judged, fail_on=Severity.ERROR).exit_code == EXIT_OK
    with pytest.raises(UsageError, match="no such waiver file"):
        apply_policy(fleet(), {}, today=TODAY, waiver_file=str(tmp_path / "missing.yaml"))


def test_baseline_refuses_a_report_of_another_shape(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"hosts": [{"host": "a", "results": [{"findings": [7]}]}]}))
    with pytest.raises(UsageError, match="not a dflash-doctor JSON report"):
        load_baseline(str(bad))


def test_sarif_and_baseline_share_the_fingerprint(tmp_path: Path) -> None:
    report = build_report(fleet())
    sarif = json.loads(render_sarif(report))["runs"][0]["results"]
    expected = [fingerprint(h.host, f) for h in report.hosts for f in h.findings]
    assert [r["partialFingerprints"]["dflashDoctor/v1"] for r in sarif] == expected
    assert len(set(expected)) == 4  # host, check and title all count
    earlier = tmp_path / "earlier.json"
    earlier.write_text(render_json(report))
    assert load_baseline(str(earlier)) == set(expected)


@pytest.mark.parametrize("fail_on", list(Severity), ids=lambda s: s.value)
def test_exit_code_and_junit_gate_alike(fail_on: Severity) -> None:
    hosts, _ = judge(fleet(), {}, [Waiver(check="DFD103", reason="r", hosts=["a"])], TODAY)
    report = build_report(hosts, fail_on=fail_on)
    gating = [(h.host, f.check_id) for h in hosts for f in h.findings if gates(f, fail_on)]
    failures = [
        (case.get("classname", "").removeprefix("dflash_doctor."), case.get("name", "").split()[0])
        for case in ET.fromstring(render_junit(report)).iter("testcase")
        if case.find("failure") is not None
    ]
    assert failures == gating
    assert report.exit_code == (EXIT_FINDINGS if gating else EXIT_OK)
    # the levels are told apart: each --fail-on gates a different set here
    assert len(gating) == {Severity.ERROR: 1, Severity.WARNING: 2, Severity.INFO: 3}[fail_on]
