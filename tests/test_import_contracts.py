"""The layers contract (pyproject.toml [tool.importlinter]) keeps checks pure.

`lint-imports` enforces the order and fails on a top-level module the contract does not
place (`exhaustive`); this test pins what the order means for checks: the layers below them
are facts and the shared leaf modules, nothing that reaches a host, a fix or a terminal.
"""

from __future__ import annotations

import tomllib
from typing import Any

from tests.conftest import REPO

# What checks may import besides themselves: facts and the shared leaf modules.
BELOW_CHECKS = {
    "facts",
    "kv_math",
    "errors",
    "data",
    "defaults",
    "on_host",
    "redact",
    "sglang_versions",
    "spans",
}


def contract(contract_id: str) -> dict[str, Any]:
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    (found,) = (c for c in config["tool"]["importlinter"]["contracts"] if c["id"] == contract_id)
    return dict(found)


def layer_names(layer: str) -> list[str]:
    return [name.strip() for name in layer.replace(":", "|").split("|")]


def test_the_layers_name_every_module_once() -> None:
    layers = contract("layers")
    assert layers["exhaustive"] is True, "a new module must be given its place"
    names = [n for layer in layers["layers"] for n in layer_names(layer)]
    assert len(names) == len(set(names)), f"named twice: {sorted(names)}"


def test_checks_sit_on_facts_and_the_leaves_only() -> None:
    layers = [layer_names(layer) for layer in contract("layers")["layers"]]
    (at,) = [i for i, layer in enumerate(layers) if "checks" in layer]
    assert layers[at] == ["checks"], "checks share their layer with nothing"
    below = {name for layer in layers[at + 1 :] for name in layer}
    assert below == BELOW_CHECKS, f"below checks: {sorted(below)}"
