"""The typed facts that checks read. Parsers produce them; nothing here does I/O."""

from __future__ import annotations

from typing import Annotated, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from dflash_doctor.facts.probe_result import ProbeResult
from dflash_doctor.facts.vllm_models import Engine, VllmLaunch, VllmRuntime, VllmSpecDecode

T = TypeVar("T")


class Fact(BaseModel, Generic[T]):
    """A fact that was read, or the reason it could not be read.

    Checks that need a missing fact are reported as skipped with `error` as the reason,
    so an unreadable file never turns into a silent pass.
    """

    model_config = ConfigDict(frozen=True)

    value: T | None = None
    source: str | None = None
    error: str | None = None
    # True when this kind of host never has the fact (offline: no log, GPUs, process): the
    # checks that need it do not apply here; they did not fail to judge (--fail-on-skip).
    out_of_reach: bool = False

    @classmethod
    def of(cls, value: T, source: str | None = None) -> Fact[T]:
        return cls(value=value, source=source)

    @classmethod
    def missing(
        cls, error: str, source: str | None = None, *, out_of_reach: bool = False
    ) -> Fact[T]:
        return cls(error=error, source=source, out_of_reach=out_of_reach)


class DrafterConfig(BaseModel):
    """The DFlash drafter's `config.json`, with layer types derived as transformers does."""

    model_config = ConfigDict(frozen=True)

    path: str
    architectures: list[str] = Field(default_factory=list)
    model_type: str | None = None
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    dtype: str | None = None
    rope_theta: float | None = None
    # The RoPE types as vLLM reads them (`rope_type`, "default" when unset, one per layer
    # type where rope_parameters is nested: vllm/transformers_utils/config.py 0.34.0:723-732).
    rope_types: list[str] = Field(default_factory=lambda: ["default"])
    vocab_size: int | None = None
    sliding_window: int | None = None
    use_sliding_window: bool = False
    max_window_layers: int | None = None
    layer_types: list[str]
    layer_types_derived: bool = False
    block_size: int | None = None
    block_size_key: str | None = None
    # The block_size value's repr where SGLang's int() refuses it (block_size is then None).
    block_size_invalid: str | None = None
    target_layer_ids: list[int] | None = None
    mask_token_id: int | None = None
    num_target_layers: int | None = None
    key_lines: dict[str, int] = Field(default_factory=dict)
    # How the layer types were decided: "config" (layer_types in the file), "qwen3" or
    # "gpt_oss" (derived as that transformers config class does), "class_default" (the
    # class has no layer_types, so SGLang builds every layer full), "unknown" (absent, and
    # the model_type's derivation is not known: no guess is made, layer_types is empty).
    layer_types_source: str = "config"
    # The window SGLang reads for sliding layers after transformers resolved the config
    # (Qwen3Config drops it unless use_sliding_window; defaults fill absent keys), and
    # the key it came from. Set by the parser; None/None on a hand-built config.
    sliding_window_resolved: int | None = None
    sliding_window_source: str | None = None
    # True when that resolved sliding_window is None: SGLang 0.5.14+ then refuses sliding
    # layers (`DFLASH sliding_attention layers require config.sliding_window.`).
    sliding_window_unset: bool = False
    swa_window_size: int | None = None
    # `is_causal: true` in the drafter's config: SGLang keeps trtllm_mha for such a draft
    # (arg_groups/speculative_hook.py 0.5.17:480).
    is_causal: bool = False
    num_target_layers_key: str | None = None
    max_position_embeddings: int | None = None
    # The context length SGLang derives from this config (`get_context_length`), and the key
    # it came from; None when no key is set (SGLang then assumes 2048).
    context_length: int | None = None
    context_length_key: str | None = None
    # The drafter's `quantization_config` (its quant_method / quant_algo, or "present"), and
    # whether it is SGLang's Nemotron-3.5 draft layout (speculative/dflash_utils.py
    # is_nemotron_35_draft_config, 0.5.19:469-506), the one DFlash layout SGLang quantizes.
    quantization: str | None = None
    nemotron_35_draft: bool = False
    # Window and causality as other trainers write them, which SGLang never reads:
    # `dflash_config.use_swa` and `dflash_config.causal` (None when absent or not a bool),
    # and the top-level `is_causal` as written (None when absent or not a bool).
    dflash_use_swa: bool | None = None
    dflash_causal: bool | None = None
    is_causal_declared: bool | None = None
    # sha256 of the config.json bytes as read: the drafter's revision where the host names
    # none (a local directory, a copied snapshot); `report merge` compares it across hosts.
    config_sha256: str | None = None

    @property
    def unknown_layer_types(self) -> list[str]:
        """Layer types other than sliding_attention and full_attention, as written."""
        return sorted(set(self.layer_types) - {"sliding_attention", "full_attention"})

    @property
    def sliding_layers(self) -> list[int]:
        """Indices of layers that attend over a sliding window (empty when none has a window)."""
        if self.effective_sliding_window is None:
            return []
        return [i for i, t in enumerate(self.layer_types) if t == "sliding_attention"]

    @property
    def effective_sliding_window(self) -> int | None:
        if self.sliding_window_source is not None:
            return self.sliding_window_resolved
        # transformers' Qwen3Config keeps sliding_window only when use_sliding_window is true;
        # a sliding layer with no window attends over the full context.
        if not self.use_sliding_window or self.sliding_window is None or self.sliding_window <= 0:
            return None
        return self.sliding_window

    def line_of(self, key: str) -> int | None:
        return self.key_lines.get(key)


class TargetConfig(BaseModel):
    """The target model's `config.json` (the text part, for multimodal wrappers)."""

    model_config = ConfigDict(frozen=True)

    path: str
    architectures: list[str] = Field(default_factory=list)
    model_type: str | None = None
    hidden_size: int
    num_hidden_layers: int
    vocab_size: int | None = None
    max_position_embeddings: int | None = None
    key_lines: dict[str, int] = Field(default_factory=dict)
    # KV geometry, for the share of the KV budget the draft takes (kv_math).
    dtype: str | None = None
    num_attention_heads: int | None = None
    num_key_value_heads: int | None = None
    head_dim: int | None = None
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    # quantization_config.quant_method, and whether it quantizes the lm_head too
    # (quantization_config.lm_head, read by SGLang's GPTQ/AWQ/AutoRound/MoE-WNA16 configs).
    quant_method: str | None = None
    lm_head_quantized: bool = False
    # The context length SGLang derives from the text config (`get_context_length`).
    context_length: int | None = None
    # Why SGLang serves this target as hybrid (linear-attention / Mamba layers beside
    # attention: a Mamba state cache beside the KV cache), in words; None when it is not.
    hybrid: str | None = None


LaunchKind = Literal["process", "script", "systemd", "compose", "argv"]


class LaunchArgs(BaseModel):
    """The DFlash-relevant settings of one SGLang launch command line."""

    model_config = ConfigDict(frozen=True)

    source: str
    kind: LaunchKind
    argv: list[str]
    # "replay": the host's release's parser rebuilt from the packaged option data
    # (facts/sglang_options.py), where the host's own SGLang could not be asked.
    parser: Literal["sglang", "fallback", "replay"] = "fallback"
    parser_version: str | None = None
    model_path: str | None = None
    speculative_algorithm: str | None = None
    draft_model_path: str | None = None
    num_draft_tokens: int | None = None
    dflash_block_size: int | None = None
    draft_window_size: int | None = None
    draft_window_flag: str | None = None
    draft_sink_size: int | None = None
    attention_backend: str | None = None
    draft_attention_backend: str | None = None
    page_size: int | None = None
    context_length: int | None = None
    mem_fraction_static: float | None = None
    cuda_graph_max_bs: int | None = None
    max_running_requests: int | None = None
    tp_size: int = 1
    kv_cache_dtype: str | None = None
    flags_present: list[str] = Field(default_factory=list)
    # Set by SGLang's own parser only: flags the host's SGLang rejects, the window flag
    # spellings it accepts, and its error when it rejects the command as a whole.
    unknown_args: list[str] = Field(default_factory=list)
    accepted_window_flags: list[str] | None = None
    sglang_rejects: str | None = None
    # Set by the fallback parser: argparse's error for each DFlash flag value that does not
    # convert to its type (`invalid int value: 'sixteen'`); that value is left unset.
    value_errors: list[str] = Field(default_factory=list)
    # Set by the fallback parser: flags it does not model, left for SGLang to judge.
    other_flags: list[str] = Field(default_factory=list)
    flag_lines: dict[str, int] = Field(default_factory=dict)
    # First and last line of the launch command in a script or unit (where flags go).
    command_lines: tuple[int, int] | None = None
    python: str | None = None
    # Why the parse is not exact: a replay of the nearest release, a variable the shell
    # expansion could not resolve, a --config file that could not be read.
    parser_notes: list[str] = Field(default_factory=list)
    # Topology and backends: what DFLASH refuses or changes per version.
    pp_size: int = 1
    dp_size: int = 1
    attn_dp_size: int = 1
    enable_dp_attention: bool = False
    enable_dp_lm_head: bool = False
    prefill_attention_backend: str | None = None
    decode_attention_backend: str | None = None
    quantization: str | None = None
    # What DFLASH ignores or serves only from some release (DFD165, DFD166).
    speculative_adaptive: bool = False
    disaggregation_mode: str | None = None
    # Options that a `--config` YAML file added to the command: option -> that file.
    config_options: dict[str, str] = Field(default_factory=dict)
    # Why the host's own SGLang parser was not asked (its interpreter not trusted to run).
    native_refused: str | None = None

    @property
    def is_dflash(self) -> bool:
        return (self.speculative_algorithm or "").upper() == "DFLASH"


class LogLine(BaseModel):
    model_config = ConfigDict(frozen=True)

    line: int
    text: str


class DecodePoint(BaseModel):
    """Mean accept length and throughput of the decode lines parsed around one log offset."""

    model_config = ConfigDict(frozen=True)

    offset: int
    timestamp: str | None = None
    accept_len: float | None = None
    gen_throughput: float | None = None
    lines: int = 1  # decode lines this point stands for (weighted beyond the exact prefix)


class DecodeStats(BaseModel):
    # Decode lines of the latest start: exact in a log's first 64 MiB, where every one is
    # read; beyond, the weighted count of an unbiased 1-in-8 sample of 256 KiB blocks.
    count: int = 0
    parsed_lines: int = 0  # the decode lines whose accept length was read
    accept_len_mean: float | None = None
    gen_throughput_mean: float | None = None
    series: list[DecodePoint] = Field(default_factory=list)
    first_timestamp: str | None = None
    last_timestamp: str | None = None
    graph_off_count: int = 0  # decode lines with `cuda graph: False` (or cpu/npu/musa)
    graph_off_first_line: int | None = None
    graph_off_last_line: int | None = None


class LogEvent(BaseModel):
    """Every line of one known SGLang log text (data/log_patterns.json id) in a log."""

    model_config = ConfigDict(frozen=True)

    pattern: str
    count: int = 0
    first: LogLine
    last: LogLine


class LogFacts(BaseModel):
    """What the server log says about the latest server start."""

    path: str
    bytes_scanned: int = 0
    lines: int = 0
    overlong_lines: int = 0
    undecodable_lines: int = 0
    startups: int = 0
    server_args: LogLine | None = None
    server_args_fields: dict[str, str] = Field(default_factory=dict)
    dflash_init: LogLine | None = None
    dflash_attention_backend: str | None = None
    dflash_block_size: int | None = None
    draft_window_size: int | None = None
    compact_cache: bool | None = None
    block_size_mismatch: LogLine | None = None
    backend_fallbacks: list[LogLine] = Field(default_factory=list)
    draft_oom: list[LogLine] = Field(default_factory=list)
    decode: DecodeStats = Field(default_factory=DecodeStats)
    # Known texts of the latest start (rejected requests, slow paths, ...), by pattern id.
    events: dict[str, LogEvent] = Field(default_factory=dict)
    # Crash signatures anywhere in the log (a crash often is why there was a restart).
    crashes: dict[str, LogEvent] = Field(default_factory=dict)
    # `Overriding the draft model's max_position_embeddings to N.` of the latest start.
    draft_max_position_override: int | None = None


class Gpu(BaseModel):
    model_config = ConfigDict(frozen=True)

    index: int
    name: str
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None
    driver_version: str | None = None


class SGLangCode(BaseModel):
    """What the host's installed SGLang source says, read as text (never imported)."""

    model_config = ConfigDict(frozen=True)

    path: str  # the srt/models/dflash.py that was read
    honours_layer_types: bool
    evidence: str  # the line that decided, or why none did
    line: int | None = None
    # The class names the file's `EntryClass` registers (None when it has none).
    entry_classes: list[str] | None = None
    entry_line: int | None = None


class DrafterFiles(BaseModel):
    """Files beside the drafter's config.json (facts/drafter_files.py), read bounded."""

    model_config = ConfigDict(frozen=True)

    directory: str
    index_path: str | None = None  # model.safetensors.index.json, when read
    index_error: str | None = None  # why a present index was not read
    tensors: int = 0
    quantized_tensors: int = 0
    quantized_names: list[str] = Field(default_factory=list)  # the first few
    sidecar_path: str | None = None  # mask_embedding.pt, when present
    sidecar_mask_token_id: int | None = None
    sidecar_per_position: bool | None = None  # SGLang refuses per_position=True (0.5.20+)
    sidecar_note: str | None = None  # why its mask_token_id was not read


class CaptureHook(BaseModel):
    """Whether the host's installed SGLang files give the target's model class
    `set_dflash_layers_to_capture` (read as text, never imported)."""

    model_config = ConfigDict(frozen=True)

    architecture: str
    implements: bool
    file: str
    files_read: int


class ServerProcess(BaseModel):
    """The running SGLang server process the facts were read from (finders/process.py)."""

    model_config = ConfigDict(frozen=True)

    pid: int
    # argv[0] of its command line: the interpreter that runs SGLang.
    python: str | None = None
    # Its least privileged uid (/proc/PID/status): whom its interpreter may run as.
    owner_uid: int | None = None
    # The names set in its environment, never their values.
    environment_names: list[str] = Field(default_factory=list)


class HostFacts(BaseModel):
    """Everything gathered from one host; the only input of the checks."""

    model_config = ConfigDict(frozen=True)

    host: str
    sglang_version: Fact[str] = Field(default_factory=lambda: Fact[str].missing("not gathered"))
    gpus: Fact[list[Gpu]] = Field(default_factory=lambda: Fact[list[Gpu]].missing("not gathered"))
    launch: Fact[LaunchArgs] = Field(
        default_factory=lambda: Fact[LaunchArgs].missing("not gathered")
    )
    drafter: Fact[DrafterConfig] = Field(
        default_factory=lambda: Fact[DrafterConfig].missing("not gathered")
    )
    target: Fact[TargetConfig] = Field(
        default_factory=lambda: Fact[TargetConfig].missing("not gathered")
    )
    log: Fact[LogFacts] = Field(default_factory=lambda: Fact[LogFacts].missing("not gathered"))
    # The host's installed srt/models/dflash.py, where it could be read beside the dist-info.
    sglang_code: Fact[SGLangCode] = Field(
        default_factory=lambda: Fact[SGLangCode].missing("not gathered")
    )
    # Not asked for unless `check --probe`: then a value, or the reason it could not run.
    probe: Fact[ProbeResult] = Field(default_factory=lambda: Fact[ProbeResult]())
    # The server process's environment, only the names the catalog reads
    # (facts/environment.py CATALOG_ENV_NAMES); the names set, with their values.
    environ: Fact[dict[str, str]] = Field(
        default_factory=lambda: Fact[dict[str, str]].missing("not gathered")
    )
    # The target architecture's DFLASH capture hook in the host's installed SGLang files.
    capture_hook: Fact[CaptureHook] = Field(
        default_factory=lambda: Fact[CaptureHook].missing("not gathered")
    )
    # Files beside the drafter's config.json; absent when no drafter config was read.
    drafter_files: Fact[DrafterFiles] = Field(default_factory=lambda: Fact[DrafterFiles]())
    # The live server's own answer over HTTP (not asked for recorded or offline hosts),
    # the launch file when the launch fact came from the running process, and a bench
    # sweep (`check --bench`). Absent (no value, no error) when not asked.
    runtime: Fact[ServerRuntime] = Field(default_factory=lambda: Fact[ServerRuntime]())
    launch_file: Fact[LaunchArgs] = Field(default_factory=lambda: Fact[LaunchArgs]())
    bench: Fact[BenchResult] = Field(default_factory=lambda: Fact[BenchResult]())
    # The server process the launch was read from; absent when none was found or asked.
    server: Fact[ServerProcess] = Field(default_factory=lambda: Fact[ServerProcess]())
    # The installed SGLang (dist-info, the host's own parser) where it differs from the
    # release the live server reports (`sglang_version` then holds the running one): an
    # upgrade installed but not restarted. Absent when they agree or nothing runs.
    installed_version: Fact[str] = Field(default_factory=lambda: Fact[str]())
    # Which engine serves the host; not gathered or none found: judged as SGLang.
    engine: Fact[Engine] = Field(default_factory=lambda: Fact[Engine]())
    # The vLLM launch, on a vLLM host only (finders/vllm.py); absent elsewhere.
    vllm_launch: Fact[VllmLaunch] = Field(default_factory=lambda: Fact[VllmLaunch]())
    # The installed vLLM (its dist-info beside the launch's interpreter), on a vLLM host.
    vllm_version: Fact[str] = Field(default_factory=lambda: Fact[str]())
    # The installed vLLM where it differs from the release the live server reports
    # (`vllm_version` then holds the running one). Absent when they agree or none runs.
    vllm_installed: Fact[str] = Field(default_factory=lambda: Fact[str]())
    # What the live vLLM server answers (`/version`, `/metrics`); absent off live vLLM hosts.
    vllm_runtime: Fact[VllmRuntime] = Field(default_factory=lambda: Fact[VllmRuntime]())

    def server_pid(self) -> int | None:
        """The pid of the server process the facts came from, or None."""
        return self.server.value.pid if self.server.value is not None else None


class MetricSample(BaseModel):
    model_config = ConfigDict(frozen=True)

    labels: dict[str, str] = Field(default_factory=dict)
    value: float


class ServerRuntime(BaseModel):
    """What the live server answers over HTTP (`/server_info`, `/metrics`), asked on the host.

    `args` are the resolved server args of the top level of `/server_info` (the tokenizer
    process's ServerArgs: what the server started with after SGLang's defaults and hooks);
    `internal_states` are the schedulers' own (one per DP rank), which `/set_internal_state`
    changes at runtime. Secret-looking keys are dropped on the host before they travel.
    """

    model_config = ConfigDict(frozen=True)

    url: str
    endpoint: str
    version: str | None = None
    args: dict[str, object] = Field(default_factory=dict)
    internal_states: list[dict[str, object]] = Field(default_factory=list)
    metrics: dict[str, list[MetricSample]] | None = None
    metrics_error: str | None = None

    def arg(self, key: str) -> object:
        return self.args.get(key)

    @property
    def avg_spec_accept_length(self) -> float | None:
        values = [
            float(v)
            for s in self.internal_states
            if isinstance(v := s.get("avg_spec_accept_length"), int | float)
        ]
        return sum(values) / len(values) if values else None

    def metric(self, name: str) -> float | None:
        """Sum over label sets of one `sglang:` gauge (None when metrics are off or absent)."""
        if self.metrics is None or name not in self.metrics:
            return None
        return sum(s.value for s in self.metrics[name])


_MAX_BENCH_NUMBER = 10**12  # tokens, steps or seconds: far past any real request


class BenchRequest(BaseModel):
    """One /generate request of a bench cell, as measured."""

    model_config = ConfigDict(frozen=True)

    # Bounded: a host's answer with a huge or non-finite number is a malformed row
    # (bench/run.py), never an overflow in the statistics.
    latency_s: float | None = Field(default=None, ge=0, le=_MAX_BENCH_NUMBER, allow_inf_nan=False)
    prompt_tokens: int | None = Field(default=None, ge=0, le=_MAX_BENCH_NUMBER)
    completion_tokens: int | None = Field(default=None, ge=0, le=_MAX_BENCH_NUMBER)
    spec_accept_length: float | None = Field(
        default=None, ge=0, le=_MAX_BENCH_NUMBER, allow_inf_nan=False
    )
    spec_verify_ct: int | None = Field(default=None, ge=0, le=_MAX_BENCH_NUMBER)
    # How many verify steps accepted k draft tokens, k = 0.. (where the release sends it).
    accept_histogram: list[Annotated[int, Field(ge=0, le=_MAX_BENCH_NUMBER)]] | None = Field(
        default=None, max_length=256
    )
    finish: str | None = None  # "stop" (natural end) or "length" (the cap)
    repeat: int = 0
    error: str | None = None
    # Whether the response carried reasoning tokens (`<think>`/`</think>` in its text, or
    # SGLang's own `reasoning_tokens` count above 0); None where the host did not say.
    reasoning: bool | None = None


class BenchCell(BaseModel):
    context: int  # 0: prompts sent as given (a user's file), not sized
    concurrency: int
    temperature: float
    max_new_tokens: int
    prompts: str = "random (content-free control)"  # what was sent (bench/prompts.py)
    repeats: int = 1
    sized_by: str | None = None  # "tokenize", "estimate" or "as given"; None: random ids
    wall_s: float = 0.0
    repeat_wall_s: list[float] = Field(default_factory=list)  # each repeat's wall time
    requests: list[BenchRequest] = Field(default_factory=list)
    error: str | None = None
    # vLLM: each repeat's `/metrics` spec-decode counter deltas (bench/vllm_run.py), None
    # where a repeat was not measured; empty on SGLang (its requests carry their own).
    repeat_counters: list[VllmSpecDecode | None] = Field(default_factory=list)

    @property
    def ok(self) -> list[BenchRequest]:
        return [r for r in self.requests if r.error is None and r.completion_tokens]

    @property
    def accept_length(self) -> float | None:
        """Completion tokens over verify steps, pooled over the cell's requests; on vLLM
        `1 + accepted / drafts` pooled over the repeats' counter deltas."""
        counted = [d for d in self.repeat_counters if d is not None and d.drafts]
        if counted:
            return 1 + sum(d.accepted for d in counted) / sum(d.drafts for d in counted)
        if self.repeat_counters:
            return None
        rows = [r for r in self.ok if r.spec_verify_ct]
        if not rows:
            return None
        return sum(r.completion_tokens or 0 for r in rows) / sum(
            r.spec_verify_ct or 0 for r in rows
        )

    @property
    def accept_lengths(self) -> list[float]:
        return [r.spec_accept_length for r in self.ok if r.spec_accept_length is not None]

    @property
    def tokens_per_s_request(self) -> float | None:
        rates = [(r.completion_tokens or 0) / r.latency_s for r in self.ok if r.latency_s]
        return sum(rates) / len(rates) if rates else None

    @property
    def tokens_per_s_total(self) -> float | None:
        done = sum(r.completion_tokens or 0 for r in self.ok)
        return done / self.wall_s if self.wall_s > 0 and done else None

    @property
    def latency_s(self) -> float | None:
        lat = [r.latency_s for r in self.ok if r.latency_s is not None]
        return sum(lat) / len(lat) if lat else None


class PrefixProbe(BaseModel):
    """The same greedy prompt sent twice after a cache flush (bench/prefix_probe.py): the
    second request reuses the first's prefix from the radix cache, and must give the same
    tokens (DFD173)."""

    prompt_tokens: int | None = None
    max_new_tokens: int = 0
    # The second request's prompt tokens served from the prefix cache (0: no reuse).
    cached_tokens: int | None = None
    tokens_compared: int = 0
    # Index of the first output token that differs between the two answers; None if equal.
    first_mismatch: int | None = None
    first_tokens: list[int] = Field(default_factory=list)  # around the mismatch, first run
    second_tokens: list[int] = Field(default_factory=list)  # the same span, second run
    error: str | None = None


class BenchBaseline(BaseModel):
    """The same cells measured on a server without speculation (`bench --baseline-port`),
    and the verdict lines on where speculation stops paying (bench/baseline.py)."""

    source: str  # where the baseline was measured, in words
    cells: list[BenchCell] = Field(default_factory=list)
    verdict: list[str] = Field(default_factory=list)


class BenchResult(BaseModel):
    """A bench sweep: the matrix, the cells, and what the server was when it ran."""

    host: str
    sglang_version: str | None = None
    # The engine benched; on vLLM its running release (`/version`).
    engine: Engine = "sglang"
    vllm_version: str | None = None
    window: int | None = None
    seed: str
    vocab: int
    contexts: list[int]
    concurrency: list[int]
    temperatures: list[float]
    max_new_tokens: int
    prompts: list[str] = Field(default_factory=lambda: ["random (content-free control)"])
    repeats: int = 1
    corpus_notice: str | None = None  # the corpus's license notice when its text was sent
    # Silent collapse (checks/silent_collapse.py, DFD143): the verdict, then its causes ranked.
    collapse: list[str] = Field(default_factory=list)
    baseline: BenchBaseline | None = None
    # The repeated greedy prompt (DFD173); None where it was not sent.
    prefix_probe: PrefixProbe | None = None
    tokens_sent: int = 0
    cells: list[BenchCell] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


# HostFacts names the runtime and bench models defined after it.
HostFacts.model_rebuild()
