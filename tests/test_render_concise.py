"""`--format concise` and `--format github` on `check`, `gate` and `report merge` (issue 26),
and `check` writing SARIF and JUnit as `gate` does: one renderer table for all three."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema

from dflash_doctor.checks.base import CheckResult, Evidence, Finding, Fix, Severity
from dflash_doctor.render.concise import render_concise, render_github
from dflash_doctor.report import HostReport, build_report
from tests.checks.test_check_fixtures import gate_args
from tests.conftest import FIXTURE_HOSTS, REPO
from tests.test_gate import sarif_schema

REFUSED = REPO / "fixtures/checks/DFD111/fires"  # SGLang 0.5.23 refuses it: DFD111 error
GATE = ("gate", *gate_args(REFUSED))


def doctor(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dflash_doctor", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "COLUMNS": "80"},
    )


def test_gate_concise_is_one_line_per_finding_then_the_summary() -> None:
    p = doctor(*GATE, "--format", "concise", cwd=REFUSED)
    text = doctor(*GATE, cwd=REFUSED)
    assert p.returncode == text.returncode == 1
    lines = p.stdout.splitlines()
    assert lines[0] == (
        "launch.sh:12: DFD111 error: SGLang 0.5.23 refuses to start: Draft window below the "
        "DFlash block size -> remove --speculative-draft-window-size"
    )
    assert lines[1].startswith("launch.sh:10: DFD131 info: Draft KV cache: ")
    assert lines[2:] == [
        "Found 2 finding(s) (1 error(s), 0 warning(s), 1 info) on 1 host(s) (fail on error: exit 1)"
    ]
    assert p.stderr == ""


def test_github_annotations_are_escaped_workflow_commands() -> None:
    p = doctor(*GATE, "--format", "github", cwd=REFUSED)
    assert p.returncode == 1
    lines = p.stdout.splitlines()
    assert lines[0].startswith("::error file=launch.sh,line=12,title=DFD111 error::SGLang 0.5.23")
    assert lines[1].startswith("::notice file=launch.sh,line=10,title=DFD131 info::Draft KV")
    assert "4.2%25 of the KV budget" in lines[1]  # `%` escaped as the runner unescapes it
    assert lines[-1].startswith("Found 2 finding(s)")


def test_github_escapes_properties_and_host_text() -> None:
    finding = Finding(
        check_id="DFD104",
        severity=Severity.WARNING,
        title="100% odd\nsecond line",
        message="m",
        evidence=[Evidence(kind="flag", text="t", file="dir,a:b/launch.sh", line=3)],
        fixes=[Fix(action="remove_flag", flag="--x")],
    )
    result = CheckResult(
        check_id="DFD104", name="n", severity=Severity.WARNING, status="failed", findings=[finding]
    )
    report = build_report([HostReport(host="h\x1b[2J", results=[result])])
    (line, _) = render_github(report).splitlines()
    assert line.startswith("::warning file=dir%2Ca%3Ab/launch.sh,line=3,title=DFD104 warning::")
    assert line.endswith("::100%25 odd second line -> remove --x [h\ufffd[2J]")
    assert "\x1b" not in render_concise(report)


def test_check_writes_concise_sarif_and_junit_as_gate_does(tmp_path: Path) -> None:
    host = str(FIXTURE_HOSTS / "v0523")
    concise = doctor("check", "--host-dir", host, "--format", "concise")
    text = doctor("check", "--host-dir", host)
    assert concise.returncode == text.returncode
    lines = concise.stdout.splitlines()
    assert lines[-1].startswith("Found ") and lines[-1].endswith(f"exit {text.returncode})")
    # one line per finding: as many as the JSON report holds, each `place: DFDnnn severity:`
    doc = json.loads(doctor("check", "--host-dir", host, "--format", "json").stdout)
    findings = [f for h in doc["hosts"] for r in h["results"] for f in r["findings"]]
    assert len(lines) == len(findings) + len(doc["notes"]) + 1 and findings
    assert lines[len(findings) : -1] == doc["notes"]  # the notes, then the summary
    for line, f in zip(lines, findings, strict=False):
        assert f" {f['check_id']} {f['severity']}: {f['title']}" in line
    sarif = doctor("check", "--host-dir", host, "--format", "sarif")
    jsonschema.validate(json.loads(sarif.stdout), sarif_schema())
    assert sarif.returncode == text.returncode
    junit = doctor("check", "--host-dir", host, "--format", "junit", "--output", "r.xml",
                   cwd=tmp_path)  # fmt: skip
    assert junit.stdout == "" and "Evidence" in junit.stderr  # the terminal report, on stderr
    suites = ET.parse(tmp_path / "r.xml").getroot()
    assert int(suites.get("tests") or 0) == len(doc["hosts"][0]["results"])


def test_report_merge_concise_names_each_host(tmp_path: Path) -> None:
    files = []
    for name, args in (("a", ("--demo",)), ("b", ("--host-dir", str(FIXTURE_HOSTS / "v0523")))):
        out = tmp_path / f"{name}.json"
        doctor("check", *args, "--format", "json", "--output", str(out))
        files.append(str(out))
    p = doctor("report", "merge", *files, "--format", "concise")
    merged = json.loads(doctor("report", "merge", *files, "--format", "json").stdout)
    assert p.returncode == merged["exit_code"]
    lines = p.stdout.splitlines()
    hosts = {h["host"] for h in merged["hosts"]}
    found = [ln for ln in lines if " DFD" in ln and ln.split(": ")[0] not in ("Found",)]
    assert {
        h for h in hosts if any(f"[{h}]" in ln or ln.startswith(f"{h}:") for ln in found)
    } == hosts
    assert lines[-1].startswith("Found ") and "on 2 host(s)" in lines[-1]
    github = doctor("report", "merge", *files, "--format", "github")
    assert github.stdout.startswith("::") and github.returncode == p.returncode
