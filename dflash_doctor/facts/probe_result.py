"""The probe's JSON output, validated (schema version 2, documented in docs/probe.md)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Divergence(BaseModel):
    max_abs_diff: float
    rel_l2: float
    cosine: float


class LayerDivergence(Divergence):
    layer: int
    type: str


class ScenarioRun(BaseModel):
    """One scenario at one context: what each layer saw, and what a draft step reads."""

    scenario: str
    visible: list[int]  # context tokens the block's first query sees, per layer
    read_bytes: int  # K/V bytes one draft step reads, per request per GPU


class Comparison(BaseModel):
    """One scenario against the reference (trained) at one context."""

    scenario: str
    against: str
    same_spans: bool
    layers: list[LayerDivergence]
    output: Divergence
    top1_agreement: float
    top1_ci95: list[float]


class ContextResult(BaseModel):
    context: int
    draft_kv_bytes: int  # one request's draft KV per GPU: one slot per target token
    runs: list[ScenarioRun]
    compared: list[Comparison]
    time_s: float

    def run_of(self, scenario: str) -> ScenarioRun | None:
        return next((r for r in self.runs if r.scenario == scenario), None)

    def comparison(self, scenario: str) -> Comparison | None:
        return next((c for c in self.compared if c.scenario == scenario), None)


class Skipped(BaseModel):
    context: int
    reason: str


class SelfCheck(BaseModel):
    """Scenarios whose spans equal the reference's at a context must agree to tolerance."""

    same_span_comparisons: int
    max_diff_same_spans: float | None
    tolerance: float
    passed: bool | None  # None: nothing had equal spans


class ProbeShape(BaseModel):
    """One GPU's shard: heads and kv_heads per GPU; the totals before tensor parallelism."""

    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    hidden: int
    rope_theta: float
    heads_total: int
    kv_heads_total: int
    window: int | None = None  # the trained sliding window (labels only)


class ScenarioLabel(BaseModel):
    name: str
    label: str


class Resources(BaseModel):
    wall_s: float
    cpu_s: float
    peak_rss_bytes: int
    peak_gpu_bytes: int | None = None


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
    tp_size: int | None = None
    shape: ProbeShape | None = None
    shard: dict[str, list[int]] = Field(default_factory=dict)
    layer_types: list[str] = Field(default_factory=list)
    reference: str | None = None
    scenarios: list[ScenarioLabel] = Field(default_factory=list)
    kv_dtype: str | None = None
    kv_bytes_per_token: int | None = None
    agreement_tokens: int | None = None
    contexts: list[ContextResult] = Field(default_factory=list)
    skipped_contexts: list[Skipped] = Field(default_factory=list)
    self_check: SelfCheck | None = None
    resources: Resources | None = None
    refused: str | None = None
    error: str | None = None
    missing: str | None = None  # "torch" when the host's Python cannot import it

    @property
    def sliding_layers(self) -> list[int]:
        return [i for i, t in enumerate(self.layer_types) if t == "sliding_attention"]

    def label_of(self, scenario: str) -> str:
        return next((s.label for s in self.scenarios if s.name == scenario), scenario)


class HostProbe(BaseModel):
    """One host's probe result under the host's name: what `probe` shows per host."""

    model_config = ConfigDict(frozen=True)

    host: str
    result: ProbeResult
