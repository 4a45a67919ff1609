"""The "checks import only facts" contract names every other part of the package.

import-linter forbids named modules; this keeps the list whole as modules are added, so the
contract in pyproject.toml stays an allow-list in effect.
"""

from __future__ import annotations

import tomllib
from typing import Any

from tests.conftest import REPO

PACKAGE = REPO / "dflash_doctor"
# What checks may import: facts, themselves, and the shared leaf modules.
ALLOWED = {
    "checks",
    "facts",
    "data",
    "defaults",
    "errors",
    "kv_math",
    "redact",
    "sglang_versions",
    "spans",
    "__init__",
    "__main__",
    "demo_hosts",
}


def contract(contract_id: str) -> dict[str, Any]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    (found,) = (c for c in config["tool"]["importlinter"]["contracts"] if c["id"] == contract_id)
    return dict(found)


def top_level_modules() -> set[str]:
    names = {p.stem for p in PACKAGE.glob("*.py")}
    names |= {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    return names | {p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name == "demo_hosts"}


def test_checks_contract_names_every_other_module() -> None:
    forbidden = {m.split(".")[1] for m in contract("checks-pure")["forbidden_modules"] if "." in m}
    unnamed = top_level_modules() - ALLOWED - forbidden
    assert not unnamed, f"name these in [tool.importlinter] checks-pure: {sorted(unnamed)}"
    stale = forbidden - top_level_modules()
    assert not stale, f"no such modules: {sorted(stale)}"


def test_the_probes_are_named_whole() -> None:
    # The probe's result is a fact (facts/probe_result.py): checks need nothing of probes/.
    assert "dflash_doctor.probes" in contract("checks-pure")["forbidden_modules"]
