"""A DFlash drafter's layers as vLLM builds them (docs/vllm.md).

vLLM wraps the drafter's transformers config in an EAGLEConfig that copies its `to_dict()`
(vllm/transformers_utils/configs/eagle.py 0.27.1:83-86, 0.34.0:85-88): `layer_types` and
`sliding_window` are the transformers-resolved ones (Qwen3Config derives `layer_types` and
drops `sliding_window` unless `use_sliding_window`), `dflash_config` the dict as written.
Each layer's `(sliding_window, causal)` is then `_resolve_layer_attention`
(vllm/model_executor/models/qwen3_dflash.py 0.27.1:86-146, 0.34.0:137-187):

- no `layer_types`, or `dflash_config.use_swa` while no layer is sliding: every layer is
  sliding iff `use_swa`; otherwise layer i is sliding iff `layer_types[i]` says so;
- a sliding layer's window is `dflash_config.swa_window_size`, else `sliding_window`;
  neither is a ValueError at load;
- causal (`_dflash_layer_causal`, 0.27.1:58-64, 0.34.0:86-97): the top-level `is_causal`
  (read from 0.28.0: 0.28.0:58-67), else `dflash_config.causal`, else iff sliding.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from dflash_doctor.errors import FactError
from dflash_doctor.facts.models import DrafterConfig

SLIDING = "sliding_attention"
WINDOW_REFUSAL = (
    "DFlash sliding attention requires a window size configured in "
    "dflash_config.swa_window_size or the top-level sliding_window."
)


class VllmLayer(BaseModel):
    """One draft layer as vLLM builds it: its window (None: full attention) and causality."""

    model_config = ConfigDict(frozen=True)

    sliding_window: int | None
    causal: bool


def transformers_window(cfg: DrafterConfig) -> int | None:
    """The top-level `sliding_window` after transformers resolved the config (the value
    vLLM's EAGLEConfig copies), without SGLang's own fallbacks."""
    if cfg.sliding_window_source == "dflash_config.swa_window_size":
        return None  # SGLang's Nemotron fallback: transformers left sliding_window unset
    if cfg.sliding_window_source is not None:
        return cfg.sliding_window_resolved
    return cfg.sliding_window


def sliding_flags(cfg: DrafterConfig) -> list[bool]:
    """Which layers vLLM builds with a sliding window (before the window is looked up)."""
    if cfg.layer_types_source == "unknown":
        raise FactError("the drafter's layer types are not known (no layer_types, unknown model)")
    use_swa = bool(cfg.dflash_use_swa)
    types = cfg.layer_types if cfg.layer_types_source != "class_default" else []
    if not types or (use_swa and SLIDING not in types):
        return [use_swa] * cfg.num_hidden_layers
    return [t == SLIDING for t in types]


def vllm_layers(cfg: DrafterConfig, *, reads_is_causal: bool = True) -> list[VllmLayer]:
    """Every draft layer as vLLM builds it; a FactError with vLLM's own refusal when a
    sliding layer has no window. `reads_is_causal`: the release reads the top-level
    `is_causal` (0.28.0 and later)."""
    flags = sliding_flags(cfg)
    types = cfg.layer_types if cfg.layer_types_source != "class_default" else []
    window = cfg.swa_window_size if cfg.swa_window_size is not None else transformers_window(cfg)
    if any(flags) and window is None:
        raise FactError(WINDOW_REFUSAL)
    layers = []
    for i, sliding in enumerate(flags):
        if reads_is_causal and cfg.is_causal_declared is not None:
            causal = cfg.is_causal_declared
        elif cfg.dflash_causal is not None:
            causal = cfg.dflash_causal
        else:
            causal = bool(types) and types[i] == SLIDING
        layers.append(VllmLayer(sliding_window=window if sliding else None, causal=causal))
    return layers
