"""Defaults of transformers' config classes that SGLang reads from a drafter's config object
and that `config.json` may leave out: data/transformers_defaults.json, generated from the
transformers wheels SGLang pins by scripts/gen_transformers_defaults.py."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources


@dataclass(frozen=True)
class ClassDefaults:
    """One model_type's config class: does it derive `layer_types` when the file has none,
    its `max_position_embeddings` default (None: no integer default), where it is defined."""

    model_type: str
    derives_layer_types: bool
    max_position_embeddings: int | None
    site: str  # transformers/models/<site>, e.g. "llama/configuration_llama.py:31"


@cache
def _table() -> dict[str, object]:
    text = resources.files("dflash_doctor").joinpath("data/transformers_defaults.json")
    data = json.loads(text.read_text())
    table = data["model_types"]
    assert isinstance(table, dict)
    return table


def class_defaults(model_type: str | None) -> ClassDefaults | None:
    """The class transformers maps `model_type` to (the newest pinned release's where the
    releases differ); None for a model_type transformers does not know."""
    if model_type is None:
        return None
    row = _table().get(model_type)
    if row is None:
        return None
    if isinstance(row, dict):  # differs between pinned releases: the newest
        row = row[max(row, key=lambda v: tuple(int(x) for x in v.split(".")))]
    assert isinstance(row, list) and len(row) == 3
    derives, max_pos, site = row
    return ClassDefaults(
        model_type, bool(derives), max_pos if isinstance(max_pos, int) else None, str(site)
    )
