"""The drafter's layers as vLLM builds them (facts/vllm_drafter.py), against vLLM's own
`_resolve_layer_attention` and `_dflash_layer_causal` compiled from its wheels: the same
configs in, the same `(sliding_window, causal)` per layer (or the same refusal) out."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from dflash_doctor.errors import FactError
from dflash_doctor.facts.models import DrafterConfig
from dflash_doctor.facts.vllm_drafter import WINDOW_REFUSAL, vllm_layers

VLLM_SRC = Path("/work/wheels/vllm/src")
RELEASES = ("0.27.1", "0.28.0", "0.31.0", "0.33.0", "0.34.0")
S, F = "sliding_attention", "full_attention"
NAMES = ("_dflash_layer_causal", "_resolve_layer_attention")

# (layer_types as transformers resolves them, sliding_window as resolved, dflash_config,
# top-level is_causal or None): the checkpoints the vLLM docstring names, and corners.
CASES: list[tuple[list[str] | None, int | None, dict[str, Any], bool | None]] = [
    ([S, S, S, S, S, F], 2048, {}, None),  # z-lab gemma-4 style, mixed
    ([F, F, F, F], None, {}, None),  # standard DFlash, all full
    (None, None, {"use_swa": True, "swa_window_size": 128}, None),  # MiMo style
    ([F, F, F], 512, {"use_swa": True}, None),  # use_swa over an all-full list
    ([S, F, S], 512, {"use_swa": True, "swa_window_size": 64}, None),  # list wins
    ([S, F], 1024, {"causal": False}, None),
    ([S, F], 1024, {"causal": True}, False),  # is_causal wins from 0.28.0
    ([F, F], None, {}, True),
    ([S, F], None, {}, None),  # sliding, no window: refused
    (None, None, {"use_swa": True}, None),  # refused
]


def vllm_resolver(version: str) -> Any:
    """vLLM's two functions from its qwen3_dflash.py, with the names they use stubbed:
    the V2 runner is on (the refusal of mixed drafters on V1 is DFD300's)."""
    path = VLLM_SRC / version / "vllm/model_executor/models/qwen3_dflash.py"
    tree = ast.parse(path.read_text())
    nodes: list[ast.stmt] = [
        n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in NAMES
    ]
    namespace: dict[str, Any] = {
        "Qwen3Config": object,
        "_SLIDING_ATTENTION": S,
        "get_current_vllm_config": lambda: SimpleNamespace(use_v2_model_runner=True),
    }
    exec(compile(ast.Module(nodes, []), str(path), "exec"), namespace)
    return namespace["_resolve_layer_attention"]


def drafter(
    types: list[str] | None, window: int | None, dflash: dict[str, Any], is_causal: bool | None
) -> DrafterConfig:
    layers = len(types) if types else 4
    return DrafterConfig(
        path="config.json",
        hidden_size=64,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=4,
        head_dim=16,
        layer_types=types or [F] * layers,
        layer_types_source="config" if types else "class_default",
        sliding_window=window,
        swa_window_size=dflash.get("swa_window_size"),
        dflash_use_swa=dflash.get("use_swa"),
        dflash_causal=dflash.get("causal"),
        is_causal_declared=is_causal,
    )


def theirs(version: str, cfg: DrafterConfig, case: tuple[Any, ...]) -> list[Any] | str:
    types, window, dflash, is_causal = case
    config = SimpleNamespace(
        layer_types=types, sliding_window=window, dflash_config=dflash,
        num_hidden_layers=cfg.num_hidden_layers,
    )  # fmt: skip
    if is_causal is not None:
        config.is_causal = is_causal
    resolve = vllm_resolver(version)
    try:
        return [resolve(config, i) for i in range(cfg.num_hidden_layers)]
    except ValueError as e:
        return str(e)


@pytest.mark.skipif(not (VLLM_SRC / "0.34.0").is_dir(), reason="vLLM wheels not unpacked")
@pytest.mark.parametrize("version", RELEASES)
@pytest.mark.parametrize("case", CASES, ids=[str(i) for i in range(len(CASES))])
def test_layers_as_vllm_builds_them(version: str, case: tuple[Any, ...]) -> None:
    cfg = drafter(*case)
    expected = theirs(version, cfg, case)
    try:
        ours: list[Any] | str = [
            (layer.sliding_window, layer.causal)
            for layer in vllm_layers(cfg, reads_is_causal=version != "0.27.1")
        ]
    except FactError as e:
        ours = str(e)
    if isinstance(expected, list):
        expected = [(w, bool(c)) for w, c in expected]
    assert ours == expected


def test_the_refusal_is_vllms_text() -> None:
    with pytest.raises(FactError, match="requires a window size"):
        vllm_layers(drafter([S, F], None, {}, None))
    assert WINDOW_REFUSAL.endswith("or the top-level sliding_window.")
