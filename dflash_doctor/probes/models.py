"""The probe's JSON output, validated (schema version 1, documented in README.md)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class Divergence(BaseModel):
    max_abs_diff: float
    rel_l2: float
    cosine: float


class LayerDivergence(Divergence):
    layer: int
    type: str
    window: int | None = None


class KvMeasure(BaseModel):
    full_tokens: int
    windowed_tokens: int
    full_bytes_measured: int
    windowed_bytes_measured: int


class ContextResult(BaseModel):
    context: int
    window_covers_context: bool
    layers: list[LayerDivergence]
    output: Divergence
    top1_agreement: float
    time_windowed_s: float
    time_full_s: float
    peak_windowed_bytes: int
    peak_full_bytes: int
    kv: KvMeasure | None = None
    kv_formula_full_bytes: float | None = None
    kv_formula_windowed_bytes: float | None = None


class Skipped(BaseModel):
    context: int
    reason: str


class SelfCheck(BaseModel):
    contexts_below_window: int
    max_diff_below_window: float | None
    tolerance: float
    passed: bool


class ProbeShape(BaseModel):
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    hidden: int
    rope_theta: float
    window: int | None


class ProbeResult(BaseModel):
    probe: str
    version: int
    device: str | None = None
    torch: str | None = None
    python: str | None = None
    dtype: str | None = None
    weights: str | None = None
    head: str | None = None
    block_size: int | None = None
    shape: ProbeShape | None = None
    sliding_layers: list[int] = Field(default_factory=list)
    contexts: list[ContextResult] = Field(default_factory=list)
    skipped_contexts: list[Skipped] = Field(default_factory=list)
    self_check: SelfCheck | None = None
    refused: str | None = None
    error: str | None = None
