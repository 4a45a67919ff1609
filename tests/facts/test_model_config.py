from __future__ import annotations

import json

import pytest

from dflash_doctor.errors import FactError
from dflash_doctor.facts.model_config import (
    derive_layer_types,
    parse_drafter_config,
    parse_target_config,
)
from tests.conftest import KIMI_DRAFTER, KIMI_TARGET, QWEN8B_DRAFTER, QWEN8B_TARGET


def test_kimi_drafter_fields() -> None:
    cfg = parse_drafter_config(KIMI_DRAFTER.read_bytes(), "c.json")
    assert cfg.num_hidden_layers == 6
    assert cfg.sliding_layers == [0, 1, 2, 3, 4]
    assert cfg.effective_sliding_window == 2048
    assert cfg.block_size == 16 and cfg.block_size_key == "dflash_config.block_size"
    assert cfg.target_layer_ids == [1, 12, 24, 36, 48, 59]
    assert cfg.line_of("sliding_window") is not None


def test_zlab_qwen3_8b_drafter_is_full_attention() -> None:
    cfg = parse_drafter_config(QWEN8B_DRAFTER.read_bytes(), "c.json")
    assert cfg.sliding_layers == [] and cfg.effective_sliding_window is None
    assert cfg.block_size == 16 and cfg.block_size_key == "block_size"
    assert cfg.mask_token_id == 151669 and cfg.num_target_layers == 36


def test_derive_layer_types_like_qwen3config() -> None:
    assert (
        derive_layer_types(4, 1024, True, 2) == ["full_attention"] * 2 + ["sliding_attention"] * 2
    )
    assert derive_layer_types(4, 1024, False, 0) == ["full_attention"] * 4
    assert derive_layer_types(3, None, True, 0) == ["full_attention"] * 3


def test_targets() -> None:
    kimi = parse_target_config(KIMI_TARGET.read_bytes(), "t.json")
    assert (kimi.hidden_size, kimi.num_hidden_layers) == (7168, 61)
    qwen = parse_target_config(QWEN8B_TARGET.read_bytes(), "t.json")
    assert (qwen.hidden_size, qwen.num_hidden_layers, qwen.vocab_size) == (4096, 36, 151936)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (KIMI_DRAFTER.read_bytes()[:200], "malformed JSON"),
        (b"\xff\xfe\x00garbage", "not UTF-8"),
        (b"[1, 2]", "not an object"),
        (b"{}", "missing required key 'num_hidden_layers'"),
        (
            b'{"num_hidden_layers": "six", "num_attention_heads": 2, "hidden_size": 8}',
            "should be an integer",
        ),
        (
            b'{"num_hidden_layers": true, "num_attention_heads": 2, "hidden_size": 8}',
            "should be an integer",
        ),
        (
            json.dumps(
                {
                    "num_hidden_layers": 2,
                    "num_attention_heads": 2,
                    "hidden_size": 8,
                    "layer_types": ["full_attention"],
                }
            ).encode(),
            "has 1 entries",
        ),
        (
            json.dumps(
                {
                    "num_hidden_layers": 1,
                    "num_attention_heads": 2,
                    "hidden_size": 8,
                    "layer_types": ["chunked"],
                }
            ).encode(),
            "unknown attention types",
        ),
        (
            json.dumps(
                {
                    "num_hidden_layers": 1,
                    "num_attention_heads": 2,
                    "hidden_size": 8,
                    "dflash_config": [1],
                }
            ).encode(),
            "dflash_config",
        ),
        (
            json.dumps(
                {
                    "num_hidden_layers": 1,
                    "num_attention_heads": 2,
                    "hidden_size": 8,
                    "use_sliding_window": "yes",
                }
            ).encode(),
            "true or false",
        ),
        (b" " * (9 * 1024 * 1024), "larger than"),
    ],
)
def test_hostile_drafter_configs(data: bytes, message: str) -> None:
    with pytest.raises(FactError, match=message):
        parse_drafter_config(data, "c.json")


def test_hostile_target_config() -> None:
    with pytest.raises(FactError, match="hidden_size"):
        parse_target_config(b'{"num_hidden_layers": 3}', "t.json")
