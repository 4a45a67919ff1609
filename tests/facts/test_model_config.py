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
    # z-lab's build_target_layer_ids(61, 6) (speculative/dflash_utils.py 0.5.14:289-326)
    assert cfg.target_layer_ids == [1, 12, 24, 35, 47, 58]
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


def _cfg(**obj: object) -> bytes:
    base: dict[str, object] = {"num_hidden_layers": 4, "num_attention_heads": 4, "hidden_size": 64}
    base.update(obj)
    return json.dumps(base).encode()


def test_gpt_oss_layer_types_as_gptossconfig() -> None:
    """transformers 5.25.0 models/gpt_oss/configuration_gpt_oss.py:59 (sliding_window 128)
    and :84-87 ((i + 1) % 2 -> sliding)."""
    cfg = parse_drafter_config(_cfg(model_type="gpt_oss"), "c.json")
    assert cfg.layer_types == ["sliding_attention", "full_attention"] * 2
    assert cfg.layer_types_source == "gpt_oss" and cfg.effective_sliding_window == 128
    own = parse_drafter_config(_cfg(model_type="gpt_oss", sliding_window=256), "c.json")
    assert own.effective_sliding_window == 256


def test_qwen3_defaults_as_qwen3config() -> None:
    """configuration_qwen3.py:76-78 (sliding_window 4096, max_window_layers 28), :86, :90-95."""
    cfg = parse_drafter_config(
        _cfg(model_type="qwen3", num_hidden_layers=30, use_sliding_window=True), "c.json"
    )
    assert cfg.effective_sliding_window == 4096
    assert cfg.sliding_layers == [28, 29]
    off = parse_drafter_config(_cfg(model_type="qwen3", sliding_window=512), "c.json")
    assert off.effective_sliding_window is None and off.sliding_layers == []


def test_unknown_model_type_is_not_guessed() -> None:
    """GlmMoeDsaConfig derives layer_types by a rule not modelled; `no_such` is no class."""
    for model_type in ("glm_moe_dsa", "no_such"):
        cfg = parse_drafter_config(_cfg(model_type=model_type, sliding_window=512), "c.json")
        assert cfg.layer_types_source == "unknown" and cfg.layer_types == []


def test_a_class_without_layer_types_serves_every_layer_full() -> None:
    """LlamaConfig has no layer_types: SGLang's get_dflash_layer_types returns None and every
    layer is built full (models/dflash.py 0.5.14:47-49, 0.5.23:169-171)."""
    cfg = parse_drafter_config(_cfg(model_type="llama", sliding_window=512), "c.json")
    assert cfg.layer_types_source == "class_default"
    assert set(cfg.layer_types) == {"full_attention"} and cfg.sliding_layers == []


def test_num_target_layers_and_block_size_read_in_dflash_config_first() -> None:
    """speculative/dflash_utils.py 0.5.11:323-337, 0.5.23:598-612."""
    cfg = parse_drafter_config(
        _cfg(
            num_target_layers=36,
            block_size=8,
            dflash_config={"num_target_layers": 61, "block_size": 16},
        ),
        "c.json",
    )
    assert (cfg.num_target_layers, cfg.num_target_layers_key) == (
        61,
        "dflash_config.num_target_layers",
    )
    assert (cfg.block_size, cfg.block_size_key) == (16, "dflash_config.block_size")


def test_nemotron_35_swa_window_size() -> None:
    """dflash_utils.py 0.5.19:418 / 0.5.23:409-410 read dflash_config.swa_window_size when
    sliding_window is absent, for drafters is_nemotron_35_draft_config accepts (0.5.23:461-498)."""
    nemotron = {
        "model_type": "qwen3",
        "use_sliding_window": True,
        "sliding_window": None,
        "architectures": ["DFlashDraftModel"],
        "has_embed_tokens": True,
        "has_lm_head": False,
        "quantization_config": {"quant_algo": "W4A16_NVFP4"},
        "eagle_aux_hidden_state_layer_ids": [2, 10],
        "layer_types": ["sliding_attention", "full_attention"] * 2,
        "dflash_config": {
            "target_layer_ids": [1, 9],
            "swa_window_size": 1024,
            "sample_from_anchor": False,
        },
    }
    cfg = parse_drafter_config(_cfg(**nemotron), "c.json")
    assert cfg.effective_sliding_window == 1024
    assert cfg.sliding_window_source == "dflash_config.swa_window_size"
    other = dict(nemotron, has_lm_head=True)
    assert parse_drafter_config(_cfg(**other), "c.json").effective_sliding_window is None


def test_a_class_with_qwen3s_statements_derives_as_qwen3() -> None:
    """Qwen2Config's __post_init__ sets sliding_window and layer_types with Qwen3Config's
    statements (transformers 5.8.1-5.19.0 models/qwen2/configuration_qwen2.py:84-93):
    the generated data names it rule "qwen3", and its own defaults fill absent keys."""
    cfg = parse_drafter_config(
        _cfg(
            model_type="qwen2",
            num_hidden_layers=6,
            use_sliding_window=True,
            max_window_layers=3,
            sliding_window=2048,
        ),
        "c.json",
    )
    assert cfg.layer_types_source == "qwen3"
    assert cfg.sliding_layers == [3, 4, 5] and cfg.effective_sliding_window == 2048
    off = parse_drafter_config(_cfg(model_type="qwen2", sliding_window=2048), "c.json")
    assert off.sliding_layers == [] and off.sliding_window_unset


def test_a_layer_type_sglang_does_not_build_is_kept_for_the_checks() -> None:
    """0.5.14+ refuses it at model build (DFD111); it is a fact, not a read error."""
    cfg = parse_drafter_config(_cfg(num_hidden_layers=1, layer_types=["chunked"]), "c.json")
    assert cfg.unknown_layer_types == ["chunked"]
