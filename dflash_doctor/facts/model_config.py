"""Parse drafter and target `config.json` bytes into typed configs.

Every parser takes hostile input: bytes that are not UTF-8, truncated JSON, a JSON value
that is not an object, keys of the wrong type. Each problem raises FactError with one line.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from dflash_doctor.errors import FactError
from dflash_doctor.facts.models import DrafterConfig, TargetConfig
from dflash_doctor.facts.transformers_defaults import ClassDefaults, class_defaults

# Config files are a few KiB; anything far larger is not a model config.
MAX_CONFIG_BYTES = 8 * 1024 * 1024

# Hostile-input bounds: no real config has more layers or larger counts; larger
# values would cost memory (a list per layer) or overflow fixed-width arithmetic later.
MAX_LAYERS = 4096
MAX_CONFIG_INT = 1 << 40
MAX_INT_DIGITS = 20


def _bounded_int(text: str) -> int:
    """JSON integer text, refused past MAX_INT_DIGITS digits before int() is asked."""
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise FactError(f"integer of {len(text)} digits: larger than any config value")
    return int(text)


_KEY_RE = re.compile(r'"([A-Za-z_][A-Za-z0-9_]*)"\s*:')


def _load_object(data: bytes) -> dict[str, Any]:
    """Config bytes as a JSON object: bounded, UTF-8, one error line for anything else."""
    if len(data) > MAX_CONFIG_BYTES:
        raise FactError(f"config is {len(data)} bytes, larger than {MAX_CONFIG_BYTES}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FactError(f"config is not UTF-8 text (byte {e.start})") from None
    try:
        obj = json.loads(text, parse_int=_bounded_int)
    except json.JSONDecodeError as e:
        raise FactError(f"malformed JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
    except RecursionError:
        raise FactError("JSON nested too deeply") from None
    if not isinstance(obj, dict):
        raise FactError(f"config JSON is a {type(obj).__name__}, not an object")
    return obj


def _key_lines(data: bytes) -> dict[str, int]:
    """First line (1-based) where each key appears, for evidence pointing into the file."""
    lines: dict[str, int] = {}
    for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), start=1):
        for m in _KEY_RE.finditer(line):
            lines.setdefault(m.group(1), number)
    return lines


def _int(obj: dict[str, Any], key: str, *, required: bool = False) -> int | None:
    """An integer key (whole floats taken, bools refused), bounded; None when absent."""
    value = obj.get(key)
    if value is None:
        if required:
            raise FactError(f"missing required key {key!r}")
        return None
    # bool is an int in Python; a config with `true` for a count is malformed.
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer() and abs(value) <= MAX_CONFIG_INT:
            return int(value)
        raise FactError(f"key {key!r} should be an integer, got {str(value)[:40]}")
    if abs(value) > MAX_CONFIG_INT:
        raise FactError(f"key {key!r} is out of range: {str(value)[:40]}")
    return value


def _req_int(obj: dict[str, Any], key: str) -> int:
    """An integer key that must be present."""
    value = _int(obj, key, required=True)
    assert value is not None
    return value


def _float(obj: dict[str, Any], key: str) -> float | None:
    """A number key; None when absent."""
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FactError(f"key {key!r} should be a number, got {value!r}")
    return float(value)


def _str_list(obj: dict[str, Any], key: str) -> list[str] | None:
    """A list-of-strings key; None when absent."""
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise FactError(f"key {key!r} should be a list of strings")
    return list(value)


def _int_list(obj: dict[str, Any], key: str) -> list[int] | None:
    """A list-of-integers key; None when absent."""
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise FactError(f"key {key!r} should be a list of integers")
    return list(value)


def _rope_theta(obj: dict[str, Any]) -> float | None:
    """rope_theta at the top level, else in rope_parameters (transformers 5)."""
    theta = _float(obj, "rope_theta")
    if theta is not None:
        return theta
    params = obj.get("rope_parameters")
    if isinstance(params, dict):
        return _float(params, "rope_theta")
    return None


# How transformers' config classes derive layer types and fill defaults is data
# (data/transformers_defaults.json, generated from the transformers wheels SGLang pins:
# 5.6.0 for 0.5.11-0.5.12.post1, 5.8.1 for 0.5.13-0.5.14, 5.12.1 for 0.5.15-0.5.21, 5.19.0
# for 0.5.22-0.5.23). Two rules are modelled, by the statements of the class that defines
# them (classes with the same statements share the rule, e.g. Qwen2Config):
# "qwen3" (models/qwen3/configuration_qwen3.py 5.19.0:87, sliding_window kept only when
# use_sliding_window; :91-97, layer i sliding when the window is set and
# i >= max_window_layers) and "gpt_oss" (models/gpt_oss/configuration_gpt_oss.py
# 5.19.0:83-86, layer i sliding when (i + 1) % 2).

# SGLang's `get_context_length` (srt/utils/hf_transformers/common.py, identical in every
# release 0.5.11-0.5.23: 0.5.11 lines 356-382, 0.5.23 lines 668-694): the first of these keys
# that is set, times rope_scaling.factor unless rope_scaling has
# original_max_position_embeddings or rope_type "llama3"; 2048 when none is set.
CONTEXT_LENGTH_KEYS = (
    "max_sequence_length",
    "seq_length",
    "max_seq_len",
    "model_max_length",
    "max_position_embeddings",
)


def rope_types_of(obj: dict[str, Any]) -> list[str]:
    """The RoPE types of a config as vLLM reads them: each `rope_parameters` dict (one per
    layer type where nested), else the legacy `rope_scaling` (transformers turns it into
    rope_parameters; `type` is its older spelling); "default" where none is named
    (vllm/transformers_utils/config.py 0.34.0:723-732, vllm/config/speculative.py
    0.34.0:121-130)."""
    params = obj.get("rope_parameters")
    if not isinstance(params, dict) or not params:
        params = obj.get("rope_scaling")
    if not isinstance(params, dict) or not params:
        return ["default"]
    nested = [p for p in params.values() if isinstance(p, dict) and p]
    found = []
    for p in nested or [params]:
        kind = p.get("rope_type", p.get("type", "default"))
        found.append(kind if isinstance(kind, str) else "default")
    return found[:16]


def context_length_of(obj: dict[str, Any]) -> tuple[int, str] | None:
    """The context length SGLang derives from a (text) config, and the key it came from.

    SGLang reads the attributes of transformers' config object, so an absent
    `max_position_embeddings` is the class default (Qwen3Config 32768, LlamaConfig 2048:
    data/transformers_defaults.json), named `<class> default`."""
    scaling = obj.get("rope_scaling")
    factor: float = 1
    if isinstance(scaling, dict) and scaling:
        raw = scaling.get("factor", 1)
        factor = raw if isinstance(raw, int | float) and not isinstance(raw, bool) else 1
        if "original_max_position_embeddings" in scaling or scaling.get("rope_type") == "llama3":
            factor = 1
    for key in CONTEXT_LENGTH_KEYS:
        value = _int(obj, key)
        if value is not None:
            return int(factor * value), key
    model_type = obj.get("model_type")
    cls = class_defaults(model_type if isinstance(model_type, str) else None)
    if cls is not None and cls.max_position_embeddings is not None:
        where = f"max_position_embeddings ({cls.model_type} config class default, {cls.site})"
        return int(factor * cls.max_position_embeddings), where
    return None


def derive_layer_types(
    num_layers: int, sliding_window: int | None, use_sliding_window: bool, max_window_layers: int
) -> list[str]:
    """Layer types as transformers' Qwen3Config derives them when `layer_types` is absent.

    Qwen3Config keeps `sliding_window` only when `use_sliding_window` is true, then marks
    layer i sliding when `i >= max_window_layers`.
    """
    window = sliding_window if use_sliding_window else None
    return [
        "sliding_attention" if window is not None and i >= max_window_layers else "full_attention"
        for i in range(num_layers)
    ]


def derive_gpt_oss_layer_types(num_layers: int) -> list[str]:
    """GptOssConfig: `"sliding_attention" if bool((i + 1) % 2) else "full_attention"`."""
    return ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(num_layers)]


def is_nemotron_35_draft(obj: dict[str, Any], dflash: dict[str, Any]) -> bool:
    """SGLang's `is_nemotron_35_draft_config`, speculative/dflash_utils.py (0.5.19:469-500,
    0.5.23:461-498): only these drafters may carry their window as
    `dflash_config.swa_window_size`."""
    archs = obj.get("architectures") or []
    if not isinstance(archs, list) or not {"DFlashDraftModel", "Qwen3DSparkModel"} & set(
        a for a in archs if isinstance(a, str)
    ):
        return False
    if not obj.get("has_embed_tokens") or obj.get("has_lm_head"):
        return False
    quant = obj.get("quantization_config") or {}
    if not isinstance(quant, dict) or quant.get("quant_algo") != "W4A16_NVFP4":
        return False
    targets = dflash.get("target_layer_ids", obj.get("target_layer_ids"))
    aux = obj.get("eagle_aux_hidden_state_layer_ids")
    if not isinstance(targets, list) or not isinstance(aux, list) or not targets or not aux:
        return False
    if len(targets) != len(aux):
        return False
    try:
        if any(int(t) + 1 != int(a) for t, a in zip(targets, aux, strict=True)):
            return False
    except (TypeError, ValueError):
        return False
    return dflash.get("sample_from_anchor", obj.get("sample_from_anchor", True)) is False


def _resolved_window(
    cls: ClassDefaults | None, obj: dict[str, Any], use_sw: bool
) -> tuple[int | None, str]:
    """The `sliding_window` the transformers config class leaves for SGLang to read."""
    raw = _int(obj, "sliding_window")
    # A class default fills only an absent key; an explicit null stays None.
    absent = "sliding_window" not in obj
    default = cls.default("sliding_window") if cls is not None else None
    named = f"{cls.model_type} config class default" if cls is not None else ""
    if cls is not None and cls.rule == "qwen3" and not use_sw:
        return None, "use_sliding_window"
    if absent and isinstance(default, int) and cls is not None and cls.rule is not None:
        return default, named
    return raw, "sliding_window"


def _drafter_shape(obj: dict[str, Any]) -> tuple[int, int, int, int, int]:
    """(layers, heads, hidden size, KV heads, head_dim), each positive and bounded."""
    num_layers = _req_int(obj, "num_hidden_layers")
    heads = _req_int(obj, "num_attention_heads")
    hidden = _req_int(obj, "hidden_size")
    kv_heads = _int(obj, "num_key_value_heads") or heads
    head_dim = _int(obj, "head_dim") or (hidden // heads if heads else 0)
    if num_layers <= 0 or heads <= 0 or kv_heads <= 0 or head_dim <= 0:
        raise FactError("layer, head and head_dim counts must be positive")
    if num_layers > MAX_LAYERS:
        raise FactError(f"num_hidden_layers {num_layers} is more than {MAX_LAYERS}")
    return num_layers, heads, hidden, kv_heads, head_dim


def _use_sliding_window(obj: dict[str, Any]) -> bool:
    """The use_sliding_window flag: true or false, absent meaning false."""
    use_sw = obj.get("use_sliding_window")
    if use_sw is None:
        return False  # absent or null: the Qwen3Config default
    if not isinstance(use_sw, bool):
        raise FactError(f"key 'use_sliding_window' should be true or false, got {use_sw!r}")
    return use_sw


def _drafter_layer_types(
    obj: dict[str, Any],
    cls: ClassDefaults | None,
    num_layers: int,
    window: int | None,
    use_sw: bool,
) -> tuple[list[str], str]:
    """The layer types as written, else as transformers derives them; and where from."""
    layer_types = _str_list(obj, "layer_types")
    source = "config"
    if layer_types is None:
        rule = cls.rule if cls is not None else None
        if rule == "qwen3" and cls is not None:
            source = "qwen3"
            max_window_layers = _int(obj, "max_window_layers")
            fallback = cls.default("max_window_layers")
            if max_window_layers is None and isinstance(fallback, int):
                max_window_layers = fallback
            layer_types = derive_layer_types(num_layers, window, use_sw, max_window_layers or 0)
        elif rule == "gpt_oss":
            source = "gpt_oss"
            layer_types = derive_gpt_oss_layer_types(num_layers)
        elif cls is not None and not cls.derives_layer_types:
            # The class has no layer_types: SGLang gets None and builds every layer full
            # (models/dflash.py 0.5.14:47-49, 0.5.23:169-171; 0.5.11-0.5.13 always full).
            source = "class_default"
            layer_types = ["full_attention"] * num_layers
        else:
            # A class that derives layer_types by a rule not modelled here, or a model_type
            # transformers does not know: say so, never guess.
            source = "unknown"
            layer_types = []
    elif len(layer_types) != num_layers:
        raise FactError(
            f"layer_types has {len(layer_types)} entries but num_hidden_layers is {num_layers}"
        )
    # Other types are kept: 0.5.14+ refuses them at model build (DFD111), 0.5.11-0.5.13 never
    # read them; DrafterConfig.unknown_layer_types names them for the checks.
    return layer_types, source


def _dflash_first(
    dflash: dict[str, Any], obj: dict[str, Any], key: str
) -> tuple[int | None, str | None]:
    """A key read from dflash_config first, then the top level, as SGLang reads
    num_target_layers and block_size: speculative/dflash_utils.py parse_dflash_draft_config
    (0.5.11:323-337, 0.5.14:480-493, 0.5.23:598-612). The value and the key it came from.
    `dflash_cfg.get(key, top_level)`: a key present in dflash_config wins even when null."""
    if key in dflash:
        return _int(dflash, key), f"dflash_config.{key}"
    value = _int(obj, key)
    return value, key if value is not None else None


def _block_size(
    dflash: dict[str, Any], obj: dict[str, Any]
) -> tuple[int | None, str | None, str | None]:
    """(block_size, key, invalid) as parse_dflash_draft_config reads it: `int(value)` of
    dflash_config's key if present (even null), else the top level's
    (speculative/dflash_utils.py 0.5.11:333-342, 0.5.23:609-617); `invalid` is the value's
    repr where `int()` refuses it (SGLang then raises `Invalid DFLASH block_size=...`)."""
    key = "block_size"
    where, raw = (f"dflash_config.{key}", dflash.get(key)) if key in dflash else (key, obj.get(key))
    if raw is None:
        return None, where if key in dflash else None, None
    text = str(raw) if isinstance(raw, int | str) else ""
    try:
        if isinstance(raw, float) and raw.is_integer() and abs(raw) <= MAX_CONFIG_INT:
            return int(raw), where, None
        if isinstance(raw, bool) or len(text.strip().lstrip("+-")) > MAX_INT_DIGITS:
            raise ValueError(text)
        return int(text), where, None
    except ValueError:
        return None, where, repr(raw)[:60]


def _bool_or_none(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


def _quant_and_dialect(obj: dict[str, Any], dflash: dict[str, Any]) -> dict[str, Any]:
    """The drafter's quantization, and window/causality keys SGLang does not read (DFD160,
    DFD161): as written, None where absent or not a bool."""
    return {
        "is_causal": obj.get("is_causal") is True,
        "is_causal_declared": _bool_or_none(obj.get("is_causal")),
        "dflash_use_swa": _bool_or_none(dflash.get("use_swa")),
        "dflash_causal": _bool_or_none(dflash.get("causal")),
        "quantization": _quantization(obj),
        "nemotron_35_draft": is_nemotron_35_draft(obj, dflash),
    }


def _quantization(obj: dict[str, Any]) -> str | None:
    """The drafter's `quantization_config` named by its method and algorithm, or None."""
    quant = obj.get("quantization_config")
    if quant is None or quant == {}:
        return None
    if not isinstance(quant, dict):
        return "present"
    words = [quant.get(k) for k in ("quant_method", "quant_algo")]
    named = [w[:40] for w in words if isinstance(w, str) and w]
    return " ".join(named) or "present"


def parse_drafter_config(data: bytes, path: str) -> DrafterConfig:
    """A drafter config.json as the typed facts the checks read."""
    obj = _load_object(data)
    num_layers, heads, hidden, kv_heads, head_dim = _drafter_shape(obj)
    use_sw = _use_sliding_window(obj)
    model_type = obj.get("model_type") if isinstance(obj.get("model_type"), str) else None
    sliding_window = _int(obj, "sliding_window")
    if sliding_window is not None and sliding_window < 0:
        raise FactError(f"sliding_window {sliding_window} is negative")
    dflash = obj.get("dflash_config") or {}
    if not isinstance(dflash, dict):
        raise FactError("key 'dflash_config' should be an object")
    cls = class_defaults(model_type)
    window, window_source = _resolved_window(cls, obj, use_sw)
    swa = _int(dflash, "swa_window_size")
    if window is None and swa is not None and is_nemotron_35_draft(obj, dflash):
        # SGLang 0.5.19+ reads it when sliding_window is absent: dflash_utils.py
        # get_dflash_attention_sliding_window_size (0.5.19:418, 0.5.23:409-410).
        window, window_source = swa, "dflash_config.swa_window_size"
    derived = _str_list(obj, "layer_types") is None
    layer_types, source = _drafter_layer_types(obj, cls, num_layers, window, use_sw)
    block_size, block_key, block_invalid = _block_size(dflash, obj)
    num_target_layers, ntl_key = _dflash_first(dflash, obj, "num_target_layers")
    dtype = obj.get("torch_dtype", obj.get("dtype"))
    context = context_length_of(obj)
    return DrafterConfig(
        path=path,
        architectures=_str_list(obj, "architectures") or [],
        model_type=model_type,
        hidden_size=hidden,
        num_hidden_layers=num_layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=head_dim,
        dtype=dtype if isinstance(dtype, str) else None,
        rope_theta=_rope_theta(obj),
        rope_types=rope_types_of(obj),
        vocab_size=_int(obj, "vocab_size"),
        sliding_window=sliding_window,
        use_sliding_window=use_sw,
        max_window_layers=_int(obj, "max_window_layers"),
        layer_types=layer_types,
        layer_types_derived=derived,
        block_size=block_size,
        block_size_key=block_key,
        block_size_invalid=block_invalid,
        target_layer_ids=_int_list(dflash, "target_layer_ids"),
        mask_token_id=_int(dflash, "mask_token_id"),
        num_target_layers=num_target_layers,
        key_lines=_key_lines(data),
        layer_types_source=source,
        sliding_window_resolved=window if window is not None and window > 0 else None,
        sliding_window_source=window_source,
        sliding_window_unset=window is None,
        swa_window_size=swa,
        num_target_layers_key=ntl_key,
        **_quant_and_dialect(obj, dflash),
        max_position_embeddings=_int(obj, "max_position_embeddings"),
        context_length=context[0] if context else None,
        context_length_key=context[1] if context else None,
        config_sha256=hashlib.sha256(data).hexdigest(),
    )


def parse_target_config(data: bytes, path: str) -> TargetConfig:
    """A target config.json (its text_config for multimodal wrappers) as typed facts."""
    obj = _load_object(data)
    text = obj
    # Multimodal wrappers (e.g. Kimi K2.5/K2.6, Qwen-VL) keep the language model in text_config.
    if "num_hidden_layers" not in obj and isinstance(obj.get("text_config"), dict):
        text = obj["text_config"]
    context = context_length_of(text)
    quant = obj.get("quantization_config")
    if not isinstance(quant, dict):
        quant = {}
    return TargetConfig(
        path=path,
        architectures=_str_list(obj, "architectures") or [],
        model_type=obj.get("model_type") if isinstance(obj.get("model_type"), str) else None,
        hidden_size=_req_int(text, "hidden_size"),
        num_hidden_layers=_req_int(text, "num_hidden_layers"),
        vocab_size=_int(text, "vocab_size"),
        max_position_embeddings=_int(text, "max_position_embeddings"),
        key_lines=_key_lines(data),
        dtype=_dtype(text) or _dtype(obj),
        num_attention_heads=_int(text, "num_attention_heads"),
        num_key_value_heads=_int(text, "num_key_value_heads"),
        head_dim=_int(text, "head_dim"),
        kv_lora_rank=_int(text, "kv_lora_rank"),
        qk_rope_head_dim=_int(text, "qk_rope_head_dim"),
        quant_method=quant.get("quant_method")
        if isinstance(quant.get("quant_method"), str)
        else None,
        lm_head_quantized=quant.get("lm_head") is True,
        context_length=context[0] if context else None,
        hybrid=hybrid_reason(obj, text),
    )


# model_types of the config classes SGLang serves with a Mamba/linear-attention state cache
# (`mambaish_config`: configs/hybrid_arch.py 0.5.16:113, 0.5.23:55-155).
HYBRID_MODEL_TYPES = frozenset(
    {
        "qwen3_next",
        "qwen3_5",
        "qwen3_5_text",
        "qwen3_5_moe",
        "qwen3_5_moe_text",
        "kimi_linear",
        "bailing_hybrid",
        "falcon_h1",
        "falcon_mamba",
        "mamba",
        "mamba2",
        "nemotron_h",
        "lfm2",
        "lfm2_moe",
        "zaya",
        "intern_s2_preview",
    }
)


def hybrid_reason(obj: dict[str, Any], text: dict[str, Any]) -> str | None:
    """Why the target is hybrid (layers keeping a recurrent state), or None: linear or Mamba
    layer types in its text config, else a model_type SGLang serves as hybrid."""
    types = _str_list(text, "layer_types") or []
    state = [t for t in types if "linear" in t or "mamba" in t]
    if state:
        kinds = ", ".join(sorted(set(state)))
        return f"layer_types: {len(state)} of {len(types)} layers are {kinds}"
    for cfg in (text, obj):
        model_type = cfg.get("model_type")
        if isinstance(model_type, str) and model_type in HYBRID_MODEL_TYPES:
            return f"model_type {model_type} (linear-attention/Mamba layers)"
    return None


def _dtype(obj: dict[str, Any]) -> str | None:
    """The weights dtype, under either key transformers writes."""
    value = obj.get("torch_dtype", obj.get("dtype"))
    return value if isinstance(value, str) else None
