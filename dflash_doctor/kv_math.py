"""Draft KV-cache sizes per request, full history vs compacted to the draft window.

Every drafter layer keeps K and V for each cached token: 2 * kv_heads * head_dim * bytes.
With `--speculative-draft-window-size N` the draft worker keeps only the recent window; on
paged backends it may keep up to one extra page on the left for alignment (SGLang's help
text for the flag), so the windowed size is rounded up to pages plus one page.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dflash_doctor.facts.models import DrafterConfig

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


def _round_up(tokens: int, page: int) -> int:
    return math.ceil(tokens / page) * page


@dataclass(frozen=True)
class DraftKv:
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

    @property
    def saved_bytes(self) -> float:
        return self.full_bytes - self.windowed_bytes

    def as_impact(self, max_running_requests: int | None = None) -> dict[str, float | int]:
        impact: dict[str, float | int] = {
            "context_tokens": self.context_tokens,
            "tp_size": self.tp_size,
            "draft_kv_full_gib_per_request_per_gpu": round(self.full_bytes / GIB, 4),
            "draft_kv_windowed_gib_per_request_per_gpu": round(self.windowed_bytes / GIB, 4),
            "draft_kv_saved_gib_per_request_per_gpu": round(self.saved_bytes / GIB, 4),
            "draft_kv_ratio_full_to_windowed": round(self.full_bytes / self.windowed_bytes, 2)
            if self.windowed_bytes
            else 0.0,
        }
        if max_running_requests:
            impact["max_running_requests"] = max_running_requests
            impact["draft_kv_saved_gib_per_gpu_at_max_running_requests"] = round(
                self.saved_bytes * max_running_requests / GIB, 3
            )
        return impact


def draft_kv(
    drafter: DrafterConfig,
    *,
    context_tokens: int,
    window: int,
    page_size: int = 1,
    tp_size: int = 1,
    kv_cache_dtype: str | None = None,
) -> DraftKv:
    """Draft KV per request on one GPU: KV heads are split over TP ranks (replicated below 1)."""
    page = max(page_size, 1)
    kv_heads_per_gpu = max(1, math.ceil(drafter.num_key_value_heads / max(tp_size, 1)))
    per_token = (
        2
        * drafter.num_hidden_layers
        * kv_heads_per_gpu
        * drafter.head_dim
        * kv_dtype_bytes(kv_cache_dtype, drafter.dtype)
    )
    full = _round_up(context_tokens, page)
    windowed = min(full, _round_up(window, page) + (page if page > 1 else 0))
    return DraftKv(context_tokens, full, windowed, per_token, tp_size)
