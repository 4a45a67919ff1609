"""The typed vLLM launch facts, apart from their parser (facts/vllm_launch.py)
so that facts/models.py can hold them without importing the launch parsers."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

# Which engine serves the host; a host where none was found is judged as SGLang's (the
# catalog's checks name what they miss).
Engine = Literal["sglang", "vllm"]

# The variable that chose the model runner in 0.27.1-0.33.0 and is refused unless `1` in
# 0.34.0 (docs/vllm.md; checks/vllm_runner_variable.py).
RUNNER_ENV = "VLLM_USE_V2_MODEL_RUNNER"


class VllmSpeculative(BaseModel):
    """The `--speculative-config` object (with `--spec-*` merged in), typed where read."""

    model_config = ConfigDict(frozen=True)

    method: str | None = None
    model: str | None = None
    num_speculative_tokens: int | None = None
    max_model_len: int | None = None
    attention_backend: str | None = None
    draft_sample_method: str | None = None
    enable_adaptive_verification: bool | None = None
    # `disable_eagle_block_drop` (0.30.0+): keep the trailing prefix-cache block on a hit.
    disable_eagle_block_drop: bool | None = None
    # Every key given, dashes as underscores, as vLLM passes them on.
    keys: list[str] = Field(default_factory=list)


class VllmLaunch(BaseModel):
    """What a vLLM server launch asks for: the model, the draft, the lengths, TP, the
    runner variable; `flag_lines` maps an option to its line in a launch file."""

    model_config = ConfigDict(frozen=True)

    source: str
    # "argv": the command itself, given with `--launch` (the inventory's `launch:`).
    kind: Literal["process", "script", "systemd", "argv", "compose"]
    python: str | None = None
    # The `vllm` console script of `vllm serve` as written (a path or a bare name).
    launcher: str | None = None
    model: str | None = None
    speculative: VllmSpeculative | None = None
    max_model_len: int | None = None  # None: not given, or `auto` / -1
    tensor_parallel_size: int | None = None
    # `--max-num-seqs` (None: not given; vLLM's default then depends on the GPU,
    # facts/vllm_launch.py DEFAULT_MAX_NUM_SEQS).
    max_num_seqs: int | None = None
    port: int | None = None
    # `--host` (None: every address, reached on loopback) and `--uds`, a Unix socket that
    # makes vLLM ignore host and port (vllm/entrypoints/common/cli_args.py 0.34.0:294,
    # 314-315; vllm/entrypoints/openai/cli_args.py 0.27.1:246, 261-262).
    host: str | None = None
    uds: str | None = None
    # The last of `--enable-prefix-caching` / `--no-enable-prefix-caching`; None: not given
    # (vLLM's default, on for generative models: vllm/config/cache.py 0.34.0:267).
    enable_prefix_caching: bool | None = None
    # The server process read (kind "process"): whose HTTP API a live check asks.
    pid: int | None = None
    # The VLLM_ENV_NAMES variables the launch sets (an exported or prefix assignment, the
    # process's environment), printable text only.
    environ: dict[str, str] = Field(default_factory=dict)
    flag_lines: dict[str, int] = Field(default_factory=dict)
    # Every long option given (`--name`, underscores as dashes, before any `=` or `.`), in
    # order, at most MAX_OPTIONS; with its launch-file line where known.
    options: list[str] = Field(default_factory=list)
    option_lines: dict[str, int] = Field(default_factory=dict)

    @property
    def draft_model(self) -> str | None:
        return self.speculative.model if self.speculative is not None else None

    @property
    def is_dflash(self) -> bool:
        """`method: dflash`, or no method and a draft whose name says dflash, which vLLM
        resolves to DFlash (vllm/config/speculative.py 0.28.0:946-949,
        vllm/v1/worker/gpu/spec_decode/dflash/config.py 0.34.0:24-25)."""
        spec = self.speculative
        if spec is None:
            return False
        if spec.method is not None:
            return spec.method == "dflash"
        return spec.model is not None and "dflash" in spec.model.lower()


class VllmSpecDecode(BaseModel):
    """vLLM's spec-decode counters as `/metrics` reports them since the server started,
    summed over engines (vllm/v1/spec_decode/metrics.py 0.34.0:229-231, 255-256)."""

    model_config = ConfigDict(frozen=True)

    drafts: int
    draft_tokens: int
    accepted: int
    # Accepted tokens at each draft position 0..k-1 (`position` label), in order.
    accepted_per_pos: list[int] = Field(default_factory=list)

    @property
    def mean_acceptance_length(self) -> float | None:
        """`1 + accepted / drafts`, the bonus token counted, as vLLM's own log line and
        PromQL recipe compute it (vllm/v1/spec_decode/metrics.py 0.34.0:180-195)."""
        return 1 + self.accepted / self.drafts if self.drafts else None

    @property
    def per_position_rates(self) -> list[float]:
        """Accepted tokens at each position per draft (vllm/v1/spec_decode/metrics.py
        0.34.0:192-195)."""
        return [n / self.drafts for n in self.accepted_per_pos] if self.drafts else []


class VllmRuntime(BaseModel):
    """What the live vLLM server answers: its running release (`/version`) and its
    spec-decode counters (`/metrics`); each is None with a reason where unanswered."""

    model_config = ConfigDict(frozen=True)

    url: str
    version: str | None = None
    version_error: str | None = None
    # The counters since the server started, at the last scrape.
    spec_decode: VllmSpecDecode | None = None
    metrics_error: str | None = None
    # The counters' increase between two scrapes `window_s` seconds apart, taken by the
    # finder (finders/vllm.py): what the server did lately. None with `window_error` where
    # the second scrape failed or a counter went down (a restart between them).
    window: VllmSpecDecode | None = None
    window_s: float | None = None
    window_error: str | None = None
