"""`report merge`: real per-host reports of the tool merged into a fleet report with drift.

The fleet is seven hosts checked by the CLI itself: the two demo hosts, the four recorded
hosts (SGLang 0.5.11, 0.5.13 x2, 0.5.23 x3; the window flag on three of them; block size 8
on one; three attention backends) and a canary: a copy of `tuned` whose drafter config.json
was edited (another revision at the same path).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from dflash_doctor.fleet.drift import DRIFT_ID, FLEET_CHECKS, NOT_SET, SETTINGS, fleet_drift
from dflash_doctor.fleet.load import MAX_DEPTH, MAX_REPORT_BYTES
from dflash_doctor.report import HostReport
from tests.cli_helper import doctor as run_doctor
from tests.cli_helper import doctor_env
from tests.conftest import FIXTURE_HOSTS, REPO, host_facts, launch
from tests.test_gate import sarif_schema

# The hosts off the fleet's majority somewhere (tuned and demo-v0523 are the majority).
DRIFTED = {"demo-seed", "tuned-canary", "v0511", "v0513", "v0523"}
ENV = doctor_env()


def doctor(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return run_doctor(*args, cwd=cwd, timeout=300)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Host name -> its `check --format json` report file (checked in parallel)."""
    root = tmp_path_factory.mktemp("fleet")
    canary = root / "tuned-canary"
    shutil.copytree(FIXTURE_HOSTS / "tuned", canary)
    drafter = canary / "models/Kimi-K2.6-DFlash/config.json"
    text = drafter.read_text()
    assert '"rms_norm_eps": 1e-06' in text
    drafter.write_text(text.replace('"rms_norm_eps": 1e-06', '"rms_norm_eps": 1e-05'))
    how = {
        "demo-seed": ["--demo"],
        "demo-v0523": ["--demo-host", "v0523"],
        **{h: ["--host-dir", str(FIXTURE_HOSTS / h)] for h in ("tuned", "v0511", "v0513", "v0523")},
        "tuned-canary": ["--host-dir", str(canary)],
    }
    files = {name: root / "reports" / f"{name}.json" for name in how}
    (root / "reports").mkdir()
    runs = [
        subprocess.Popen(
            [sys.executable, "-m", "dflash_doctor", "check", *args, "--output", str(files[name])],
            cwd=REPO,
            env=ENV,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for name, args in how.items()
    ]
    for p in runs:
        _, err = p.communicate(timeout=300)
        assert p.returncode in (0, 1), err
    return files


def merged_json(*files: Path, extra: tuple[str, ...] = ()) -> tuple[dict[str, Any], int]:
    p = doctor("report", "merge", *map(str, files), "--format", "json", *extra)
    assert p.stdout, p.stderr
    return json.loads(p.stdout), p.returncode


def drift_row(doc: dict[str, Any], key: str) -> dict[str, Any]:
    return next(r for r in doc["drift"] if r["setting"] == key)


def test_drift_view_names_the_hosts_that_differ(fleet: dict[str, Path]) -> None:
    doc, code = merged_json(*fleet.values())
    assert code == 1  # DFD103/DFD104/DFD106 errors on their hosts
    assert doc["kind"] == "fleet" and doc["schema_version"] == 1
    assert [h["host"] for h in doc["hosts"]] == list(fleet)
    assert [s["hosts"] for s in doc["sources"]] == [[h] for h in fleet]
    version = drift_row(doc, "sglang_version")
    assert version["majority"] == "0.5.23"
    assert sorted(version["differing"]) == ["demo-seed", "v0511", "v0513"]
    assert version["values"]["0.5.11"] == ["v0511"]
    block = drift_row(doc, "block_size")
    assert block["majority"] == "16" and block["differing"] == ["v0513"]  # its log: 8
    flag = drift_row(doc, "window_flag")
    assert flag["majority"] == "(not set)"
    assert sorted(flag["differing"]) == ["v0511", "v0513", "v0523"]
    revision = drift_row(doc, "drafter_revision")
    # five hosts serve the same Kimi drafter bytes; the canary's were edited, v0513 and
    # v0523 serve z-lab Qwen3 drafters
    assert sorted(revision["differing"]) == ["tuned-canary", "v0513", "v0523"]
    assert len(revision["majority"]) == 64
    backend = drift_row(doc, "attention_backend")
    assert backend["majority"] == "fa3"
    assert sorted(backend["differing"]) == ["v0511", "v0513", "v0523"]
    # SGLang's default: a launch without --kv-cache-dtype and one with auto agree
    assert drift_row(doc, "kv_cache_dtype")["differing"] == []
    assert {r["setting"] for r in doc["drift"]} == {s.key for s in SETTINGS}

    # every differing host carries one DFD170 warning per setting, with its evidence
    hosts = {h["host"]: h for h in doc["hosts"]}
    drift = {
        name: [f for r in h["results"] if r["check_id"] == DRIFT_ID for f in r["findings"]]
        for name, h in hosts.items()
    }
    assert {f["evidence"][0]["key"] for f in drift["v0513"]} == {
        "sglang_version",
        "window_flag",
        "draft_window_size",
        "block_size",
        "drafter_revision",
        "attention_backend",
    }
    assert drift["demo-v0523"] == []
    flag_finding = next(f for f in drift["v0523"] if f["evidence"][0]["key"] == "window_flag")
    assert flag_finding["severity"] == "warning"
    assert flag_finding["evidence"][0]["file"] == "/srv/sglang/serve.sh"
    assert flag_finding["evidence"][0]["line"] == 6
    warnings = sum(len(f) for f in drift.values())
    per_host = sum(
        1
        for h in doc["hosts"]
        for r in h["results"]
        for f in r["findings"]
        if f["severity"] == "warning" and r["check_id"] != DRIFT_ID
    )
    assert doc["summary"]["warnings"] == warnings + per_host


def test_a_merged_report_merges_again_to_the_same_drift(
    fleet: dict[str, Path], tmp_path: Path
) -> None:
    doc, _ = merged_json(*fleet.values())
    (tmp_path / "fleet.json").write_text(json.dumps(doc))
    again, _ = merged_json(tmp_path / "fleet.json")
    assert again["drift"] == doc["drift"]
    assert again["summary"] == doc["summary"]  # DFD170 results replaced, not doubled


def test_text_report_ends_with_the_drift_table(fleet: dict[str, Path]) -> None:
    p = doctor("report", "merge", *map(str, fleet.values()))
    assert p.returncode == 1, p.stderr
    table = p.stdout[p.stdout.index("Fleet drift") :]
    assert "SGLang version" in table and "0.5.23 (4/7)" in table
    assert "v0513: 8" in table
    assert "drift: " in table and "on 5 of 7 host(s) (7 report file(s))" in table
    # by default one line per host with findings, not a panel per finding
    assert "DFD170 warning" not in p.stdout and "Evidence" not in p.stdout
    head = p.stdout[: p.stdout.index("Fleet drift")]
    v0511 = next(line for line in head.splitlines() if line.startswith("v0511"))
    assert "SGLang 0.5.11" in v0511 and "2 warning" in v0511 and "DFD107" in v0511
    full = doctor("report", "merge", *map(str, fleet.values()), "--hosts")
    assert full.returncode == 1, full.stderr
    assert "DFD170 warning" in full.stdout and "Evidence" in full.stdout
    assert "on 5 of 7 host(s) (7 report file(s))" in full.stdout
    # the same summary line either way
    summary = next(line for line in p.stdout.splitlines() if line.startswith("7 host(s)"))
    assert summary in full.stdout.splitlines()


def test_streamed_merge_agrees_and_holds_no_earlier_host(
    fleet: dict[str, Path], tmp_path: Path
) -> None:
    """The default text report's merge: the same summary, drift, notes and exit code as the
    whole merge, and each host is dropped once shown (memory does not grow with reports)."""
    import gc
    import weakref

    from dflash_doctor.checks.base import Severity
    from dflash_doctor.fleet.merge import merge_reports
    from dflash_doctor.fleet.stream import stream_merge

    (tmp_path / "bad.json").write_text("{")
    files = [*fleet.values(), tmp_path / "bad.json"]
    seen: list[weakref.ref[HostReport]] = []
    alive: list[int] = []

    def on_host(host: HostReport) -> None:
        gc.collect()
        alive.append(sum(r() is not None for r in seen))
        seen.append(weakref.ref(host))

    cases = [
        (files, Severity.ERROR, ["gpu-9"]),  # exit 3
        (files[:-1], Severity.WARNING, []),  # exit 1
        (files, Severity.ERROR, []),  # exit 2
        ([fleet["tuned"], fleet["demo-v0523"]], Severity.ERROR, []),  # exit 0
    ]
    codes = []
    for paths, fail_on, missing in cases:
        seen.clear()
        alive.clear()
        streamed = stream_merge(paths, fail_on, on_host, missing=missing)
        whole = merge_reports(paths, fail_on, missing=missing)
        codes.append(whole.exit_code)
        assert streamed.summary == whole.summary
        assert streamed.drift == whole.drift and streamed.drift
        assert streamed.notes == whole.notes and streamed.exit_code == whole.exit_code
        assert streamed.sources == whole.sources and streamed.hosts == []
        assert len(seen) == len(whole.hosts)
        # when a host is shown, no host shown before it is still held
        assert alive == [0] * len(seen)
    assert codes == [3, 1, 2, 0]


def test_sarif_is_valid_and_has_the_drift_rule(fleet: dict[str, Path]) -> None:
    p = doctor("report", "merge", *map(str, fleet.values()), "--format", "sarif")
    assert p.returncode == 1, p.stderr
    doc = json.loads(p.stdout)
    jsonschema.validate(doc, sarif_schema())
    run = doc["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    rule = next(r for r in rules if r["id"] == DRIFT_ID)
    assert rule["name"] == "fleet-drift" and "report merge" in rule["fullDescription"]["text"]
    drift = [r for r in run["results"] if r["ruleId"] == DRIFT_ID]
    assert drift and all(rules[r["ruleIndex"]]["id"] == DRIFT_ID for r in drift)
    assert {r["properties"]["host"] for r in drift} == DRIFTED


def test_junit_parses_with_a_drift_case_per_host(fleet: dict[str, Path]) -> None:
    p = doctor(
        "report", "merge", *map(str, fleet.values()), "--format", "junit", "--fail-on", "warning"
    )
    assert p.returncode == 1, p.stderr
    root = ET.fromstring(p.stdout)
    suites = root.findall("testsuite")
    assert len(suites) == len(fleet)
    cases = {
        s.get("name", "").removeprefix("dflash-doctor "): s.find(
            f"testcase[@name='{DRIFT_ID} fleet-drift']"
        )
        for s in suites
    }
    assert all(c is not None for c in cases.values())
    failed = sorted(n for n, c in cases.items() if c is not None and c.find("failure") is not None)
    assert set(failed) == DRIFTED
    assert int(root.get("tests", "0")) == sum(int(s.get("tests", "0")) for s in suites)


def test_uniform_fleet_has_no_drift_and_exit_follows_fail_on(
    fleet: dict[str, Path],
) -> None:
    doc, code = merged_json(fleet["tuned"], fleet["demo-v0523"])
    assert code == 0  # DFD131 infos only
    assert all(r["differing"] == [] for r in doc["drift"])
    doc, code = merged_json(fleet["tuned"], fleet["tuned-canary"], extra=("--fail-on", "warning"))
    assert code == 1
    assert sorted(drift_row(doc, "drafter_revision")["differing"]) == ["tuned", "tuned-canary"]
    assert drift_row(doc, "drafter_revision")["majority"] is None  # 1:1, split


def test_local_hosts_take_their_file_name_and_duplicates_stay_apart(
    fleet: dict[str, Path], tmp_path: Path
) -> None:
    # `check local` names its host `local` on every node (what the Ansible playbook fetches)
    for name in ("gpu-a1", "gpu-a2"):
        doc = json.loads(fleet["tuned"].read_text())
        doc["hosts"][0]["host"] = "local"
        (tmp_path / f"{name}.json").write_text(json.dumps(doc))
    (tmp_path / "again").mkdir()
    shutil.copy(fleet["v0511"], tmp_path / "again" / "v0511.json")
    doc, _ = merged_json(
        tmp_path / "gpu-a1.json",
        tmp_path / "gpu-a2.json",
        fleet["v0511"],
        tmp_path / "again/v0511.json",
    )
    assert [h["host"] for h in doc["hosts"]] == ["gpu-a1", "gpu-a2", "v0511", "v0511@v0511"]
    assert doc["hosts"][0]["facts"]["host"] == "gpu-a1"
    doc, _ = merged_json(fleet["v0511"], extra=("--name-from-file",))
    assert doc["hosts"][0]["host"] == "v0511"


def test_unreachable_host_in_a_report_exits_3(fleet: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "down.json"
    # a real unreachable report: nothing listens on port 1
    p = doctor(
        "check",
        "root@127.0.0.1:1",
        "--connect-timeout",
        "2",
        "--format",
        "json",
        "--output",
        str(out),
    )
    assert p.returncode == 3, p.stderr
    doc, code = merged_json(fleet["tuned"], out)
    assert code == 3 and doc["summary"]["unreachable"] == 1
    assert "down" not in {r["setting"] for r in doc["drift"]}
    assert all("root@127.0.0.1:1" in r["unknown"] for r in doc["drift"])


def test_hosts_without_a_report_are_unreachable_in_the_fleet(fleet: dict[str, Path]) -> None:
    doc, code = merged_json(
        fleet["tuned"], fleet["v0511"], extra=("--missing", "gpu-9", "--missing", "v0511")
    )
    assert code == 3
    assert [h["host"] for h in doc["hosts"]] == ["tuned", "v0511", "gpu-9"]  # v0511 reported
    down = doc["hosts"][2]
    assert down["reachable"] is False and down["error"].startswith("no report")
    assert all("gpu-9" in r["unknown"] for r in doc["drift"])


def hostile_files(directory: Path, good: Path) -> dict[str, Path]:
    text = good.read_text()
    files = {
        "truncated": text[: len(text) // 2],
        "not-json": "dflash-doctor: error: no such host\n",
        "empty": "",
        "array": "[1, 2, 3]",
        "other-schema": json.dumps({"schema_version": 2, "hosts": []}),
        "no-schema": json.dumps({"hello": "world"}),
        "wrong-types": json.dumps({"schema_version": 1, "hosts": [{"host": 5, "results": "x"}]}),
        "deep-python": "[" * 100_000 + "]" * 100_000,
        "huge-int": '{"schema_version": 1, "hosts": [], "exit_code": ' + "9" * 10_000 + "}",
    }
    paths = {}
    for name, content in files.items():
        paths[name] = directory / f"{name}.json"
        paths[name].write_text(content)
    # nested within Python's decoder limit, deeper than any report, inside a real report
    doc = json.loads(text)
    deep: Any = "x"
    for _ in range(MAX_DEPTH + 5):
        deep = {"k": deep}
    doc["hosts"][0]["facts"]["runtime"] = {"value": {"url": "u", "endpoint": "e", "args": deep}}
    paths["deep-args"] = directory / "deep-args.json"
    paths["deep-args"].write_text(json.dumps(doc))
    paths["not-utf8"] = directory / "not-utf8.json"
    paths["not-utf8"].write_bytes(b'{"schema_version": 1, "hosts": [], "x": "\xff\xfe"}')
    paths["huge"] = directory / "huge.json"
    with paths["huge"].open("wb") as f:  # sparse: costs no disk
        f.truncate(MAX_REPORT_BYTES + 1)
    paths["directory"] = directory / "dir.json"
    paths["directory"].mkdir()
    paths["fifo"] = directory / "fifo.json"
    os.mkfifo(paths["fifo"])
    paths["missing"] = directory / "missing.json"
    return paths


def test_hostile_report_files_are_one_line_each_and_the_rest_merge(
    fleet: dict[str, Path], tmp_path: Path
) -> None:
    bad = hostile_files(tmp_path, fleet["tuned"])
    files = [fleet["tuned"], *bad.values(), fleet["v0511"]]
    p = doctor("report", "merge", *map(str, files), "--format", "json")
    assert p.returncode == 2, p.stderr  # documented: an unreadable report is an input error
    lines = p.stderr.strip().splitlines()
    assert len(lines) == len(bad), p.stderr
    for name, path in bad.items():
        line = next((ln for ln in lines if f"{path}:" in ln), None)
        assert line is not None, (name, p.stderr)
        assert line.startswith("dflash-doctor: ") and len(line) < 400, line
    doc = json.loads(p.stdout)
    assert [h["host"] for h in doc["hosts"]] == ["tuned", "v0511"]
    assert [s["file"] for s in doc["sources"] if s["error"]] == [str(x) for x in bad.values()]
    assert len([n for n in doc["notes"] if "json" in n]) >= len(bad)


def test_no_readable_report_is_exit_2_with_a_report(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text("{")
    p = doctor("report", "merge", str(tmp_path / "a.json"))
    assert p.returncode == 2
    assert "no report could be read" in p.stdout
    assert p.stderr.count("\n") == 1 and "a.json: not JSON" in p.stderr


def test_explain_documents_the_fleet_drift_id() -> None:
    p = doctor("explain", "DFD170")
    assert p.returncode == 0, p.stderr
    assert "fleet-drift" in p.stdout and "report merge" in p.stdout


def test_split_and_unknown_values() -> None:
    """A tie has no majority and reports every host; a host without the fact is unknown."""
    hosts = [
        HostReport(host="a", facts=host_facts(launch_args=launch("--attention-backend", "fa3"))),
        HostReport(host="b", facts=host_facts(launch_args=launch("--attention-backend", "fa3"))),
        HostReport(
            host="c", facts=host_facts(launch_args=launch("--attention-backend", "flashinfer"))
        ),
        HostReport(host="d", facts=host_facts(launch_args=launch(), version="0.5.13")),
        HostReport(host="e", facts=host_facts(launch_args=None, version=None)),
    ]
    table, findings = fleet_drift(hosts)
    rows = {r.setting: r for r in table}
    assert rows["attention_backend"].values == {
        "fa3": ["a", "b"],
        "flashinfer": ["c"],
        NOT_SET: ["d"],
    }
    assert rows["attention_backend"].majority == "fa3"
    assert rows["attention_backend"].differing == ["c", "d"]
    assert rows["attention_backend"].unknown == ["e"]
    version = rows["sglang_version"]
    assert version.majority == "0.5.23" and version.differing == ["d"]
    assert "e" not in findings
    split, _ = fleet_drift(hosts[2:4])
    assert next(r for r in split if r.setting == "attention_backend").differing == ["c", "d"]
    assert next(r for r in split if r.setting == "attention_backend").majority is None


def test_drift_page_has_the_catalog_sections_and_its_citations_read_back() -> None:
    from tests.checks.test_check_docs import SECTIONS, WHEELS, citations, cited_lines, sections

    doc = FLEET_CHECKS[DRIFT_ID].doc
    assert [name for name, _ in sections(doc)] == list(SECTIONS)
    cites = citations(doc)
    assert cites
    if WHEELS.is_dir():
        for path, version, lines in cites:
            assert any("kv_cache_dtype" in line for line in cited_lines(path, version, lines))
