"""README.md, CONTRIBUTING.md, docs/ and fixtures/README.md stay true to the code: the quick
start's test command is what .ci/run runs, the demo sample is the demo's real output, the
command table, the command reference (docs/cli.md), the JSON report's fields, the inventory
keys and the demo's checks are all real; README stays a user's page."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import typer.main

from dflash_doctor.cli import app
from dflash_doctor.hosts import HostSpec
from tests.cli_helper import doctor
from tests.conftest import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")
CONTRIBUTING = (REPO / "CONTRIBUTING.md").read_text(encoding="utf-8")
DOCS = REPO / "docs"
FIXTURES_README = (REPO / "fixtures" / "README.md").read_text(encoding="utf-8")


def run(*args: str, columns: int = 80) -> subprocess.CompletedProcess[str]:
    return doctor(*args, columns=columns)


def section(title: str) -> str:
    start = README.index(f"## {title}\n")
    nxt = README.find("\n## ", start + 1)
    return README[start : nxt if nxt != -1 else len(README)]


def code_blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def test_quick_start_test_command_is_what_ci_runs() -> None:
    quick = section("Quick start")
    commands = [b.strip() for b in code_blocks(quick, "bash")]
    assert "pip install -e . && dflash-doctor check --demo" in commands
    (tests_cmd,) = [c for c in commands if "pytest" in c]
    # An ordinary machine gets torch's CPU build from PyTorch's CPU index, pinned.
    assert "download.pytorch.org/whl/cpu" in tests_cmd and "torch==2.13.0" in tests_cmd
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    ci_tests = [ln for ln in ci.splitlines() if "pytest" in ln and not ln.startswith("#")]
    readme_tests = tests_cmd.split("&&")[-1].strip()
    assert ci_tests == [readme_tests]
    install = tests_cmd.split("&&")[1].strip()
    assert install.replace("python3 -m pip install ", "") in ci.replace(
        "python3 -m pip install -q --disable-pip-version-check ", ""
    )
    assert "torch==2.13.0" in ci
    assert "externally managed" in quick and "python3 -m venv .venv" in quick
    # CONTRIBUTING gives the same command, after the prerequisites and before the way out
    # where PyTorch's CPU index is unreachable
    assert tests_cmd in code_blocks(CONTRIBUTING, "bash")[0]
    at = CONTRIBUTING.index(tests_cmd)
    assert CONTRIBUTING.index("## Prerequisites for the tests") < at
    assert "openssh-server" in CONTRIBUTING[:at] and "torch" in CONTRIBUTING[:at]
    assert CONTRIBUTING.index("### When the PyTorch CPU index is unreachable") > at


def test_readme_is_a_users_page() -> None:
    """About 500 lines, no copied `--help` (that is docs/cli.md), and every local link of
    README, CONTRIBUTING and docs/ names a file that exists."""
    assert len(README.splitlines()) <= 560
    assert "Usage: dflash-doctor" not in README and "docs/cli.md" in README
    assert "CONTRIBUTING.md" in README
    pages = {REPO / "README.md": README, REPO / "CONTRIBUTING.md": CONTRIBUTING}
    pages |= {page: page.read_text(encoding="utf-8") for page in DOCS.glob("*.md")}
    for page, text in pages.items():
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text):
            assert (page.parent / target).exists(), (page.name, target)


def test_demo_sample_is_the_real_output() -> None:
    """The sample's check ids, titles, evidence places and fix command appear, line for
    line, in what `check --demo` prints at 80 columns."""
    p = run("check", "--demo")
    assert p.returncode == 1, p.stderr
    (sample,) = code_blocks(section("What the demo prints"), "text")
    real = p.stdout.splitlines()
    for line in sample.splitlines():
        if line.startswith(("╭─", "│ ", "To fix:")):
            # borders and the one wrapped fix line are compared up to where they wrap
            assert any(r.rstrip().startswith(line.rstrip()) for r in real), line
    assert "dflash-doctor fix --demo --apply" in p.stdout


def test_ci_snippets_name_no_package_or_tag_that_does_not_exist() -> None:
    gate = section("Pre-deploy gate in CI")
    assert "pip install dflash-doctor\n" not in gate  # not on PyPI
    assert "rev: v0.1.0" not in gate  # no such tag is published
    assert 'pip install "git+REPO_URL@REF"' in gate and "rev: REF" in gate


def _cli() -> Any:
    return typer.main.get_command(app)


def test_every_option_has_help() -> None:
    for name, cmd in _cli().commands.items():
        for p in cmd.params:
            if p.name == "help":
                continue
            assert (p.help or "").strip(), f"{name} {p.opts or p.name} has no help text"


def test_command_table_lists_every_command() -> None:
    table = section("Commands")
    in_table = set(re.findall(r"^\| `dflash-doctor ([a-z]+)", table, flags=re.M))
    assert in_table == set(_cli().commands)


def _cli_reference() -> Any:
    spec = importlib.util.spec_from_file_location(
        "gen_cli_reference", REPO / "scripts" / "gen_cli_reference.py"
    )
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    return gen


def test_command_reference_is_the_cli() -> None:
    """docs/cli.md holds the verbatim `--help` of every command (scripts/gen_cli_reference.py)."""
    gen = _cli_reference()
    written = (DOCS / "cli.md").read_text(encoding="utf-8")
    assert gen.written_copy(written) == gen.reference(), (
        "docs/cli.md is stale: python3 scripts/gen_cli_reference.py --write"
    )


def test_command_reference_covers_every_command() -> None:
    paths = _cli_reference().command_paths()
    assert paths[0] == [] and all([name] in paths for name in _cli().commands)


def _keys(obj: dict[str, Any]) -> set[str]:
    return set(obj)


def test_json_schema_lists_every_field_of_a_real_report() -> None:
    p = run("check", "--demo", "--format", "json")
    report = json.loads(p.stdout)
    schema = (DOCS / "report-json.md").read_text(encoding="utf-8")
    host = report["hosts"][0]
    results = host["results"]
    findings = [f for r in results for f in r["findings"]]
    levels: list[set[str]] = [
        _keys(report),
        _keys(report["summary"]),
        _keys(host),
        _keys(host["facts"]),
        *(_keys(r) for r in results),
        *(_keys(f) for f in findings),
        *(_keys(e) for f in findings for e in f["evidence"]),
        *(_keys(x) for f in findings for x in f["fixes"]),
    ]
    missing = sorted({k for level in levels for k in level if f'"{k}"' not in schema})
    assert missing == []


def test_inventory_keys_are_the_host_model() -> None:
    inventory = section("Remote hosts and fleets")
    para = inventory[inventory.index("Per-host keys") : inventory.index("Unknown keys")]
    listed = set(re.findall(r"`([a-z_]+)`", para)) - {"sudo -n"}
    # name is the mapping key; inventory_file and invalid are set by the tool, not by users
    expected = set(HostSpec.user_keys()) - {"name", "inventory_file", "invalid"}
    assert expected <= listed, sorted(expected - listed)
    assert "read" in para and "`root`" in para


def test_fixtures_readme_lists_every_check_the_demo_hosts_fire() -> None:
    for host, args in (
        ("../dflash_doctor/demo_hosts/seed", ("--demo",)),
        ("../dflash_doctor/demo_hosts/v0523", ("--demo-host", "v0523")),
    ):
        row = next(ln for ln in FIXTURES_README.splitlines() if ln.startswith(f"| `{host}`"))
        listed = set(re.findall(r"DFD\d+", row.split("|")[-2]))
        report = json.loads(run("check", *args, "--format", "json").stdout)
        fired = {r["check_id"] for r in report["hosts"][0]["results"] if r["status"] == "failed"}
        assert listed == fired, (host, listed, fired)


def test_readme_paths_exist() -> None:
    for path in ("scripts/gen_cli_reference.py", ".ci/run", ".pre-commit-hooks.yaml"):
        assert Path(REPO / path).exists(), path
