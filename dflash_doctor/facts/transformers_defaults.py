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
    by which modelled rule ("qwen3": Qwen3Config's statements, "gpt_oss": GptOssConfig's;
    None: none or one not modelled), the defaults that rule reads, its
    `max_position_embeddings` default (None: no integer default), where it is defined."""

    model_type: str
    derives_layer_types: bool
    max_position_embeddings: int | None
    site: str  # transformers/models/<site>, e.g. "llama/configuration_llama.py:31"
    rule: str | None = None
    defaults: tuple[tuple[str, object], ...] = ()

    def default(self, key: str) -> object:
        """A class default the rule reads (None when the class sets none)."""
        return dict(self.defaults).get(key)


@cache
def _table() -> dict[str, dict[str, object]]:
    text = resources.files("dflash_doctor").joinpath("data/transformers_defaults.json")
    data = json.loads(text.read_text())
    table = data["model_types"]
    assert isinstance(table, dict)
    return table


def _newest(rows: dict[str, object]) -> object:
    return rows[max(rows, key=lambda v: tuple(int(x) for x in v.split(".")))]


def class_defaults(model_type: str | None) -> ClassDefaults | None:
    """The class transformers maps `model_type` to (the newest pinned release's where the
    releases differ); None for a model_type transformers does not know."""
    if model_type is None:
        return None
    row = _table().get(model_type)
    if row is None:
        return None
    if "derives" not in row:  # differs between pinned releases: the newest
        row = _newest(row)  # type: ignore[assignment]
    assert isinstance(row, dict)
    max_pos = row.get("max_pos")
    defaults = row.get("defaults") or {}
    assert isinstance(defaults, dict)
    return ClassDefaults(
        model_type=model_type,
        derives_layer_types=bool(row["derives"]),
        max_position_embeddings=max_pos if isinstance(max_pos, int) else None,
        site=str(row["site"]),
        rule=row.get("rule") if isinstance(row.get("rule"), str) else None,  # type: ignore[arg-type]
        defaults=tuple(sorted(defaults.items())),
    )
