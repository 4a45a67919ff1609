"""Draft KV-cache bytes as SGLang allocates them, and the share of the KV budget they take.

The draft KV pool has **one slot per target token in every release**: the draft worker
shares the target's `token_to_kv_pool_allocator` index space, and with a draft window it
only keeps "a private compact req->token table over the same global KV index space"
(speculative/dflash_worker.py 0.5.11:87-98, dflash_worker_v2.py 0.5.14:284-291). Pool
sizing has no window term (model_executor/pool_configurator.py 0.5.11:95-111, 0.5.18:86-232;
mem_cache/draft_kv_budget.py 0.5.23). So the draft window saves **no** KV memory; it only
shortens what draft attention reads. Bytes per token per GPU follow
`dflash_draft_cell_size_per_token` (speculative/dflash_utils.py 0.5.18:139-151):
`num_kv_heads(tp) * (head_dim + v_head_dim) * layers * dtype_size`, with
`get_num_kv_heads(tp) = max(1, kv_heads // tp)` (configs/model_config.py 0.5.18:1151-1162).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dflash_doctor.facts.models import DrafterConfig, TargetConfig

DTYPE_BYTES = {
    "float32": 4,
    "fp32": 4,
    "bfloat16": 2,
    "bf16": 2,
    "float16": 2,
    "fp16": 2,
    "half": 2,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "float8_e4m3fn": 1,
    "fp4_e2m1": 0.5,
}

GIB = 1024**3


def kv_dtype_bytes(kv_cache_dtype: str | None, model_dtype: str | None) -> float:
    """Bytes per KV element: --kv-cache-dtype, else ('auto') the drafter's dtype, else bf16."""
    if kv_cache_dtype and kv_cache_dtype != "auto" and kv_cache_dtype in DTYPE_BYTES:
        return DTYPE_BYTES[kv_cache_dtype]
    if model_dtype and model_dtype in DTYPE_BYTES:
        return DTYPE_BYTES[model_dtype]
    return 2


def kv_heads_per_gpu(kv_heads: int, tp_size: int) -> int:
    """`ModelConfig.get_num_kv_heads`: max(1, kv_heads // tp) (replicated below one head)."""
    return max(1, kv_heads // max(tp_size, 1))


def draft_bytes_per_token(drafter: DrafterConfig, *, tp_size: int, kv_dtype: str | None) -> float:
    """Draft KV bytes per token slot on one GPU (K and V of every draft layer)."""
    return (
        2
        * drafter.num_hidden_layers
        * kv_heads_per_gpu(drafter.num_key_value_heads, tp_size)
        * drafter.head_dim
        * kv_dtype_bytes(kv_dtype, drafter.dtype)
    )


def target_bytes_per_token(
    target: TargetConfig, *, tp_size: int, kv_dtype: str | None
) -> float | None:
    """Target KV bytes per token on one GPU: MLA (kv_lora_rank + rope dims, not sharded) or
    K and V per KV head; None when the config does not give the geometry."""
    elem = kv_dtype_bytes(kv_dtype, target.dtype)
    if target.kv_lora_rank:
        latent = target.kv_lora_rank + (target.qk_rope_head_dim or 0)
        return target.num_hidden_layers * latent * elem
    heads = target.num_key_value_heads or target.num_attention_heads
    if not heads:
        return None
    head_dim = target.head_dim or (
        target.hidden_size // target.num_attention_heads if target.num_attention_heads else None
    )
    if not head_dim:
        return None
    return 2 * target.num_hidden_layers * kv_heads_per_gpu(heads, tp_size) * head_dim * elem


@dataclass(frozen=True)
class DraftKv:
    """Draft KV per request on one GPU; `windowed_tokens` is what draft attention *reads*
    with a draft window (the compact view), not what is allocated."""

    context_tokens: int
    full_tokens: int
    windowed_tokens: int
    bytes_per_token: float
    tp_size: int

    @property
    def full_bytes(self) -> float:
        return self.full_tokens * self.bytes_per_token

    @property
    def windowed_bytes(self) -> float:
        return self.windowed_tokens * self.bytes_per_token


def _round_up(tokens: int, page: int) -> int:
    return math.ceil(tokens / page) * page


def draft_kv(
    drafter: DrafterConfig,
    *,
    context_tokens: int,
    window: int,
    page_size: int = 1,
    tp_size: int = 1,
    kv_cache_dtype: str | None = None,
) -> DraftKv:
    """Draft KV one request occupies on one GPU, and what a window's compact view reads."""
    page = max(page_size, 1)
    per_token = draft_bytes_per_token(drafter, tp_size=tp_size, kv_dtype=kv_cache_dtype)
    full = _round_up(context_tokens, page)
    # The probe's allocation upper bound: pages covering the window plus one page.
    windowed = min(full, _round_up(window, page) + (page if page > 1 else 0))
    return DraftKv(context_tokens, full, windowed, per_token, tp_size)
