"""The gate fails closed (issue 26): without what it needs to judge a launch (a version, given
or pinned in the repository; the drafter and target configs) it exits 2 with one line naming
what to pass (in the report, so SARIF and JUnit are still written); `--fail-on-skip` fails
only on checks that could not judge, so a correct launch given every input passes it; skips
fold into one line per cause."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dflash_doctor.checks import CATALOG
from dflash_doctor.gate_inputs import Pin, chosen_pin, pinned_sglang
from tests.conftest import REPO

CASES = REPO / "fixtures" / "checks"
# SGLang 0.5.23 refuses this launch (a window of 8 below the drafter's block_size 16: DFD111).
REFUSED = CASES / "DFD111" / "fires"
KIMI_DRAFTER, KIMI_TARGET = CASES / "_shared/kimi-k2.6-dflash", CASES / "_shared/kimi-k2.6"


def gate(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dflash_doctor", "gate", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(cwd), "COLUMNS": "200"},
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A deployment repository holding the refused launch and its model configs (the case
    names them in fixtures/checks/_shared; a repository holds its own)."""
    shutil.copytree(REFUSED, tmp_path / "deploy")
    shutil.copytree(KIMI_DRAFTER, tmp_path / "deploy/drafter")
    shutil.copytree(KIMI_TARGET, tmp_path / "deploy/target")
    return tmp_path


def _cannot_judge(p: subprocess.CompletedProcess[str]) -> list[str]:
    return [ln for ln in p.stdout.splitlines() if "the gate cannot judge" in ln]


def test_no_version_is_exit_2_with_one_line_naming_it(repo: Path) -> None:
    p = gate(repo, "deploy/launch.sh", "--drafter", "deploy/drafter", "--target", "deploy/target")
    assert p.returncode == 2 and p.stderr == ""
    (line,) = _cannot_judge(p)
    assert line.startswith("deploy/launch.sh: the gate cannot judge this launch without ")
    assert "--sglang-version X.Y.Z" in line and "--drafter" not in line
    # the machine formats carry it too: a CI step still gets its SARIF, with exit 2
    p = gate(repo, "deploy/launch.sh", "--drafter", "deploy/drafter", "--target",
             "deploy/target", "--format", "sarif", "--output", "out.sarif")  # fmt: skip
    props = json.loads((repo / "out.sarif").read_text())["runs"][0]["properties"]
    assert p.returncode == props["exitCode"] == 2
    assert [n for n in props["notes"] if "the gate cannot judge" in n] == [line]


def test_no_models_is_exit_2_naming_what_to_pass(repo: Path) -> None:
    p = gate(repo, "deploy/launch.sh", "--sglang-version", "0.5.23", "--format", "concise")
    assert p.returncode == 2
    (line,) = _cannot_judge(p)
    assert line.endswith("without --drafter DIR and --target DIR")


def test_select_needs_only_what_its_checks_need(repo: Path) -> None:
    # DFD104 reads the launch and the version only: no drafter, no target needed.
    p = gate(repo, "deploy/launch.sh", "--sglang-version", "0.5.23", "--select", "DFD104")
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.mark.parametrize(
    ("name", "text", "where"),
    [
        ("requirements.txt", "numpy\nsglang[all]==0.5.23\n", "requirements.txt:2"),
        ("pyproject.toml", '[project]\ndependencies = ["sglang==0.5.23"]\n', "pyproject.toml:2"),
        ("compose.yaml", "services:\n  s:\n    image: lmsysorg/sglang:v0.5.23-cu129\n", ""),
        ("k8s/deploy.yaml", "spec:\n  image: lmsysorg/sglang:v0.5.23\n", "k8s/deploy.yaml:2"),
    ],
)
def test_a_pinned_version_is_used_and_said(repo: Path, name: str, text: str, where: str) -> None:
    (repo / name).parent.mkdir(exist_ok=True)
    (repo / name).write_text(text)
    p = gate(repo, "deploy/launch.sh", "--drafter", "deploy/drafter", "--target", "deploy/target")
    assert p.returncode == 1, p.stdout + p.stderr  # judged: 0.5.23 refuses it (DFD111)
    assert "DFD111 error" in p.stdout
    assert f"SGLang 0.5.23 from {where or name + ':3'} (--sglang-version overrides it)" in p.stdout
    # given, the version wins over the pin
    p = gate(repo, "deploy/launch.sh", "--drafter", "deploy/drafter", "--target", "deploy/target",
             "--sglang-version", "0.5.13")  # fmt: skip
    assert "from " + (where or name) not in p.stdout


def test_several_pins_are_an_input_error(repo: Path) -> None:
    (repo / "requirements.txt").write_text("sglang==0.5.21\n")
    (repo / "Dockerfile").write_text("FROM lmsysorg/sglang:v0.5.23.post1-cu129\n")
    p = gate(repo, "deploy/launch.sh", "--drafter", "deploy/drafter", "--target", "deploy/target")
    assert p.returncode == 2
    assert "0.5.21 (requirements.txt:1)" in p.stderr and "0.5.23.post1 (Dockerfile:1)" in p.stderr
    assert "pass --sglang-version" in p.stderr


def test_pins_read_what_pins_and_nothing_else(tmp_path: Path) -> None:
    (tmp_path / "requirements-dev.txt").write_text(
        "# sglang==0.5.11 (commented out)\nsglang>=0.5.20\nnot-sglang==9.9\nsglang == 0.5.22\n"
    )
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "requirements.txt").write_text("sglang==0.5.12\n")
    (tmp_path / "README.md").write_text("sglang==0.5.13\n")  # not a file that pins
    os.mkfifo(tmp_path / "requirements-fifo.txt")  # never opened for reading: no hang
    (tmp_path / "requirements-link.txt").symlink_to(tmp_path / ".git" / "requirements.txt")
    assert pinned_sglang(str(tmp_path)) == [Pin("0.5.22", "requirements-dev.txt:4")]
    # the launch file's own image beats the repository's other pins
    (tmp_path / "compose.yaml").write_text("image: lmsysorg/sglang:v0.5.23\n")
    pins = pinned_sglang(str(tmp_path), [str(tmp_path / "compose.yaml")])
    assert chosen_pin(pins, [str(tmp_path / "compose.yaml")], str(tmp_path)) == Pin(
        "0.5.23", "compose.yaml:1"
    )
    assert chosen_pin([], [], str(tmp_path)) is None


def _clean_cases() -> list[Path]:
    return sorted(c for c in CASES.glob("*/clean") if (c / "gate.args").is_file())


def test_every_clean_gate_fixture_passes_fail_on_skip() -> None:
    """A correct launch given every input passes strict mode: the checks a gate can never
    run (log, environment, GPUs) and those whose trigger is absent do not fail it."""
    cases = _clean_cases()
    assert len(cases) >= 15
    codes = []
    for case in cases:
        args = shlex.split((case / "gate.args").read_text(), comments=True)
        p = gate(case, *args, "--fail-on-skip", "--format", "json")
        report = json.loads(p.stdout)
        # A case is clean for its own check; another check may find something (exit 1),
        # but none is an input missing or a check that could not judge (exit 2).
        assert p.returncode in (0, 1), (case, report["notes"])
        assert report["summary"]["unjudged"] == 0 and report["notes"] == [], case
        codes.append(p.returncode)
        skipped = [r for r in report["hosts"][0]["results"] if r["status"] == "skipped"]
        assert skipped and all(r["unjudged"] is False for r in skipped)
    assert codes.count(0) >= 5, codes


def test_strict_mode_still_fails_on_a_check_that_could_not_judge(repo: Path) -> None:
    # The drafter's config made unusable: the checks that need it could not judge.
    (repo / "deploy/drafter/config.json").write_text("{")
    p = gate(repo, "deploy/launch.sh", "--drafter", "deploy/drafter", "--target",
             "deploy/target", "--sglang-version", "0.5.23", "--fail-on-skip")  # fmt: skip
    assert p.returncode == 2
    assert "could not judge (" in p.stdout


def test_skip_reasons_fold_into_one_line_per_cause(tmp_path: Path) -> None:
    """Three hosts of one inventory, offline: each cause said once, with its count."""
    case = CASES / "DFD111" / "clean"
    launch = (case / "launch.sh").read_text()
    inv = ["hosts:"]
    for name in ("gpu-a", "gpu-b", "gpu-c"):
        (tmp_path / f"{name}.sh").write_text(launch)
        inv += [
            f"  {name}:",
            "    sglang_version: 0.5.23",
            f"    launch_file: {tmp_path / name}.sh",
            f"    drafter_path: {KIMI_DRAFTER}",
            f"    target_path: {KIMI_TARGET}",
        ]
    (tmp_path / "inventory.yaml").write_text("\n".join(inv) + "\n")
    p = gate(tmp_path, "-I", "inventory.yaml", "--fail-on-skip")
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    logs = [ln for ln in lines if "DFD109, DFD150, DFD151, DFD152" in ln]
    assert logs == [
        "not applicable here (4 on 3 hosts): DFD109, DFD150, DFD151, DFD152: needs log: "
        "offline: no running server, no log"
    ]
    assert not [ln for ln in lines if "could not read" in ln]
    summary = lines[-1]
    # DFD131's info finding is no failure: only DFD130's warning fails, once per host
    counts = re.search(r"checks (\d+) passed, (\d+) failed, (\d+) skipped", summary)
    assert counts is not None, summary
    passed, failed, skipped = map(int, counts.groups())
    assert failed == 3 and passed + failed + skipped == 3 * len(CATALOG), summary


def test_a_pin_never_overrides_a_version_an_inventory_host_declares(repo: Path) -> None:
    (repo / "requirements.txt").write_text("sglang==0.5.23\n")
    (repo / "inventory.yaml").write_text(
        "hosts:\n  old-host:\n    sglang_version: 0.5.21\n"
        f"    launch_file: {repo / 'deploy/launch.sh'}\n"
    )
    p = gate(repo, "-I", "inventory.yaml", "deploy/launch.sh", "--drafter", "deploy/drafter",
             "--target", "deploy/target", "--format", "json")  # fmt: skip
    report = json.loads(p.stdout)
    versions = {h["host"]: h["facts"]["sglang_version"]["value"] for h in report["hosts"]}
    assert versions == {"old-host": "0.5.21", "deploy/launch.sh": "0.5.23"}
    assert (
        "SGLang 0.5.23 from requirements.txt:1 (--sglang-version overrides it)" in report["notes"]
    )


def test_hosts_lacking_the_same_input_are_one_line(repo: Path) -> None:
    inv = ["hosts:"]
    for name in ("gpu-a", "gpu-b", "gpu-c"):
        inv += [f"  {name}:", "    sglang_version: 0.5.23"]
        inv += [f"    launch_file: {repo / 'deploy/launch.sh'}"]
    (repo / "inventory.yaml").write_text("\n".join(inv) + "\n")
    p = gate(repo, "-I", "inventory.yaml", "--drafter", "deploy/drafter", "--format", "concise")
    assert p.returncode == 2
    assert _cannot_judge(p) == [
        "gpu-a, gpu-b, gpu-c: the gate cannot judge this launch without --target DIR"
    ]


def test_an_offline_gate_never_says_a_host_sglang_was_asked() -> None:
    """No host is asked offline: the release's parser is replayed from the option data."""
    out = ""
    for check in ("DFD104", "DFD103"):
        case = CASES / check / "fires"
        args = shlex.split((case / "gate.args").read_text(), comments=True)
        p = gate(case, *args, "--select", check, "--format", "json")
        assert p.returncode == 1, p.stderr
        out += p.stdout
    assert "its own parser" not in out and "host's own sglang" not in out
    assert "SGLang 0.5.23 (its parser, replayed from data) does not accept" in out
    assert "SGLang 0.5.13 with its parser replayed from data, no host asked" in out
