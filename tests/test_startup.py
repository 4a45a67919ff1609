"""Start-up: `--help` and `checks` load only what they use (issue 15 item 2).

The time itself is a benchmark (bench/startup.py prints it against `python -c pass`);
what these tests pin is its cause: the heavy imports stay out of the fast commands.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dflash_doctor import catalog_index
from tests.conftest import REPO

HEAVY = ("paramiko", "torch", "matplotlib")
# What --help and checks need none of: pydantic models, YAML, typer's rich help renderer.
UNUSED = (*HEAVY, "pydantic", "yaml", "cryptography", "rich.markdown", "pygments")

PROGRAM = """
import json, runpy, sys
sys.argv = ["dflash-doctor", *json.loads(sys.argv[1])]
try:
    runpy.run_module("dflash_doctor", run_name="__main__")
except SystemExit as e:
    code = e.code
sys.stderr.write("\\nMODULES " + json.dumps(sorted(sys.modules)) + "\\n")
"""


def modules_after(*args: str) -> tuple[str, set[str]]:
    p = subprocess.run(
        [sys.executable, "-c", PROGRAM, json.dumps(args)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "COLUMNS": "120"},
        timeout=60,
    )
    line = next(x for x in p.stderr.splitlines() if x.startswith("MODULES "))
    return p.stdout, set(json.loads(line.removeprefix("MODULES ")))


def loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return [n for n in names if n in modules]


def test_help_imports_no_heavy_module() -> None:
    out, modules = modules_after("--help")
    assert "check" in out and "checks" in out and "fix" in out
    assert loaded(modules, UNUSED) == []


def test_checks_lists_the_catalog_from_its_index() -> None:
    if catalog_index.indexed_entries() is None:
        pytest.fail("catalog_index.json is stale: run `python -m dflash_doctor.catalog_index`")
    out, modules = modules_after("checks")
    assert loaded(modules, UNUSED) == []
    for entry in catalog_index.imported_entries():
        assert entry.id in out


def test_check_command_still_loads_what_it_uses() -> None:
    # The lazy imports moved, they did not vanish: a check loads its models; paramiko is
    # the SSH transport's alone (transport/ssh_options.py holds what the CLI builds), so a
    # check of a local, recorded or demo host never loads it (issue 28: 73 ms of 440).
    _, modules = modules_after("check", "--demo", "--format", "json")
    assert "pydantic" in modules and loaded(modules, HEAVY) == []
    _, modules = modules_after("check", "nobody@127.0.0.1:1", "--format", "json")
    assert "paramiko" in modules


# What a check never uses unless asked (issue 28): `explain`'s markdown renderer, the progress
# bar of many hosts on a terminal, the probe (--probe), the inventory (--inventory).
UNASKED = (
    "rich.markdown",
    "markdown_it",
    "pygments",
    "rich.progress",
    "dflash_doctor.probes.host",
    "dflash_doctor.inventory",
)


def test_check_loads_only_what_its_format_and_options_use() -> None:
    _, modules = modules_after("check", "--demo", "--format", "json")
    # JSON on stdout: no terminal report (not even rich's console), no other format's renderer.
    others = ("rich.console", "dflash_doctor.render.terminal", "dflash_doctor.render.sarif")
    assert loaded(modules, (*UNASKED, *others, "dflash_doctor.render.junit")) == []
    _, modules = modules_after("check", "--host-dir", "dflash_doctor/demo_hosts/seed")
    assert loaded(modules, UNASKED) == [] and "dflash_doctor.demo" not in modules
    assert "dflash_doctor.render.terminal" in modules  # the text report is drawn
    gate = REPO / "fixtures/checks/DFD111/fires"
    args = (
        "gate",
        str(gate / "launch.sh"),
        "--drafter",
        str(REPO / "fixtures/checks/_shared/kimi-k2.6-dflash"),
    )
    _, modules = modules_after(*args, "--format", "json")
    assert loaded(modules, (*UNASKED, "rich.console")) == []


def test_what_a_check_skips_is_loaded_where_it_is_used() -> None:
    out, modules = modules_after("explain", "DFD111")
    assert "DFD111" in out and "rich.markdown" in modules


def test_index_matches_the_catalog_and_a_stale_one_is_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = tmp_path / "catalog_index.json"
    monkeypatch.setattr(catalog_index, "INDEX_PATH", index)
    assert catalog_index.indexed_entries() is None  # missing
    index.write_text(json.dumps(catalog_index.index_document()))
    assert catalog_index.indexed_entries() == catalog_index.imported_entries()
    doc = catalog_index.index_document()
    doc["digest"] = "0" * 64  # made from other check sources
    doc["checks"] = []
    index.write_text(json.dumps(doc))
    assert catalog_index.indexed_entries() is None
    assert catalog_index.catalog_entries() == catalog_index.imported_entries()
