"""Checks on the parallel layout DFLASH is served with: PP, DP attention, TP vs heads."""

from __future__ import annotations

from dflash_doctor.checks.base import Evidence, Finding, Fix, Severity, Skip, Unjudged, check
from dflash_doctor.checks.views import (
    config_evidence,
    drafter,
    env_evidence,
    env_value,
    flag_evidence,
    log_evidence,
    require_dflash,
    version_evidence,
    version_facts,
)
from dflash_doctor.facts.environment import env_bool
from dflash_doctor.facts.models import HostFacts, LaunchArgs
from dflash_doctor.sglang_versions import Version

# "Currently DFLASH speculative decoding only supports pp_size == 1." in every release:
# 0.5.11 server_args.py:3327, 0.5.13 arg_groups/speculative_hook.py:141, 0.5.23 :321.
PP_REFUSAL = "Currently DFLASH speculative decoding only supports pp_size == 1."

# DP attention with DFLASH, per version: (since, refusal on CUDA or None when allowed).
DP_RULES: tuple[tuple[Version, str | None], ...] = (
    # 0.5.11 server_args.py:3322, 0.5.13-0.5.19 arg_groups/speculative_hook.py (0.5.19:197).
    ((0, 5, 11), "Currently DFLASH speculative decoding does not support dp attention."),
    # 0.5.20-0.5.22 arg_groups/speculative_hook.py (0.5.20:210-214, 0.5.22:296-300).
    (
        (0, 5, 20),
        "Currently DFLASH speculative decoding does not support dp attention on non-NPU devices.",
    ),
    # 0.5.23 arg_groups/speculative_hook.py:303-317: allowed on CUDA with conditions.
    ((0, 5, 23), None),
)
DP_LM_HEAD_REFUSAL = "DFLASH with dp attention requires --enable-dp-lm-head."  # 0.5.23:308
DP_COORD_ENV = "SGLANG_ENABLE_DP_SPEC_PREFILL_COORDINATION"  # 0.5.23:313-317

# The quantized target lm_head, per version (the head has no dense fp16/bf16/fp32 weight).
# 0.5.11-0.5.13 speculative/dflash_worker.py:552-561 and 0.5.14-0.5.17
# dflash_worker_v2.py (0.5.14:1331-1333, 0.5.17:1493-1496) refuse it at any TP on the first
# speculative step; 0.5.18-0.5.23 dflash_worker_v2.py (0.5.18:840-845, 0.5.23:1578-1583)
# take it at tp=1 only.
QUANT_HEAD_ANY_TP_UNTIL: Version = (0, 5, 18)
QUANT_HEAD_V1 = (
    "DFLASH requires the target model to expose a vocab-parallel `lm_head` with `weight` and "
    "`shard_indices` attributes."
)
QUANT_HEAD_V2_SINCE: Version = (0, 5, 14)
QUANT_HEAD_OLD = "DFLASH requires the target model to expose `lm_head` with `weight`."
QUANT_HEAD_TP = (
    "DFLASH with a quantized target lm_head is only supported at tp=1, got tp_size={tp}."
)


def dp_refusal(v: Version) -> str | None:
    """The text this release refuses DFLASH with DP attention with on CUDA; None: allowed."""
    chosen: str | None = None
    for since, refusal in DP_RULES:
        if v >= since:
            chosen = refusal
    return chosen


def drop_dp_attention(launch: LaunchArgs) -> list[Fix]:
    """Remove every DP flag: dropping only --enable-dp-attention would turn --dp-size into
    that many model replicas, so the exact undo is the plain TP layout."""
    flags: tuple[str, ...] = (
        "--enable-dp-attention",
        "--dp-size",
        "--data-parallel-size",
        "--attn-dp-size",
    )
    present = [f for f in flags if f in launch.flags_present]
    flag = "--attn-dp-size" if launch.attn_dp_size > 1 else "--enable-dp-attention"
    return [Fix(action="remove_flag", flag=f) for f in present or [flag]]


def _launch_or_skip(facts: HostFacts) -> LaunchArgs:
    if facts.launch.value is None:
        raise Unjudged(f"needs the launch command: {facts.launch.error}")
    return facts.launch.value


@check("DFD124", "dflash-pipeline-parallel", Severity.ERROR, needs_any=("launch", "log"))
def pipeline_parallel(facts: HostFacts) -> list[Finding]:
    """Pipeline parallelism (`--pp-size` above 1) with DFLASH, which no release supports.

    **What it finds.** `--pp-size` (`--pipeline-parallel-size`) above 1 in the launch, or
    `pp_size` above 1 in the logged server args.

    **Why it hurts.** SGLang stops at startup with `Currently DFLASH speculative decoding
    only supports pp_size == 1.`: a relaunch leaves the host without a server.

    **Example.** `--tp-size 4 --pp-size 2` on 8 GPUs.

    **How to fix.** Remove `--pp-size`; spread the model with `--tp-size` instead.

    **Fix safety.** Removing PP needs the model to fit in the TP group's memory; raise
    `--tp-size` to the GPUs PP used.

    **Versions.** Every release 0.5.11-0.5.23 refuses it: `srt/server_args.py` 0.5.11:3327,
    then `arg_groups/speculative_hook.py` 0.5.13:141, 0.5.23:321.
    """
    require_dflash(facts)
    launch = facts.launch.value
    evidence: list[Evidence] = []
    pp = 1
    pp_flag = "--pp-size"
    if launch is not None:
        pp = launch.pp_size
        pp_flag = next(
            (f for f in ("--pp-size", "--pipeline-parallel-size") if f in launch.flags_present),
            "--pp-size",
        )
        evidence.append(flag_evidence(launch, pp_flag, f"{pp_flag} {pp}"))
    else:
        log = facts.log.value
        assert log is not None
        raw = log.server_args_fields.get("pp_size")
        if raw is None or not raw.isdigit() or log.server_args is None:
            raise Skip("the log's server args do not show pp_size")
        pp = int(raw)
        evidence.append(log_evidence(log, log.server_args.line, f"server_args pp_size={pp}"))
    if pp <= 1:
        return []
    return [
        pipeline_parallel.finding(
            title=f"DFLASH with pipeline parallelism (pp_size={pp})",
            message=f"SGLang refuses to start: `{PP_REFUSAL}`",
            evidence=evidence,
            fixes=[
                Fix(action="remove_flag", flag=pp_flag),
                Fix(action="manual", note=f"raise --tp-size to cover the {pp}x GPUs PP used"),
            ],
        )
    ]


def attn_dp_width(launch: LaunchArgs) -> int:
    """The attention-DP width SGLang resolves: `--attn-dp-size` (0.5.22+), else
    `--dp-size N --enable-dp-attention` (dp_size 1 turns DP attention off:
    0.5.11 server_args.py:2929-2931, 0.5.17 arg_groups/overrides.py:2305)."""
    if launch.attn_dp_size > 1:
        return launch.attn_dp_size
    return launch.dp_size if launch.enable_dp_attention and launch.dp_size > 1 else 1


@check(
    "DFD125",
    "dflash-dp-attention",
    Severity.ERROR,
    needs=("launch", "sglang_version"),
)
def dp_attention(facts: HostFacts) -> list[Finding]:
    """DP attention with DFLASH: refused through 0.5.22, conditional on 0.5.23.

    **What it finds.** Data-parallel attention (`--dp-size N --enable-dp-attention`, or
    `--attn-dp-size N` from 0.5.22) on a CUDA host. Up to 0.5.22 SGLang refuses it with
    DFLASH; 0.5.23 accepts it only with `--enable-dp-lm-head` (the draft borrows the target
    head), no attention context parallelism, and
    `SGLANG_ENABLE_DP_SPEC_PREFILL_COORDINATION` off.

    **Why it hurts.** SGLang stops at startup (`Currently DFLASH speculative decoding does
    not support dp attention.`; from 0.5.20 `... on non-NPU devices.`; on 0.5.23
    `DFLASH with dp attention requires --enable-dp-lm-head.`).

    **Example.** A DeepSeek recipe's `--dp-size 8 --enable-dp-attention` reused for a
    DFLASH server on 0.5.21.

    **How to fix.** Up to 0.5.22: drop DP attention (`--enable-dp-attention`,
    `--attn-dp-size`) or upgrade to 0.5.23; renaming `--enable-dp-attention` to
    `--attn-dp-size` as 0.5.22's deprecation warning says does not help (DFD140 says so
    too): 0.5.22 turns the old spelling into `attn_dp_size` before DFLASH is validated
    (`arg_groups/parallel_hook.py` 0.5.22:39-61). On 0.5.23: add `--enable-dp-lm-head`.

    **Fix safety.** The fix removes every DP flag (`--enable-dp-attention`, `--dp-size`,
    `--attn-dp-size`): removing only `--enable-dp-attention` would turn `--dp-size N` into
    N model replicas. Without DP attention the KV cache of MLA models is no longer split
    by DP: re-check `--mem-fraction-static` and the running-request limit.

    **Versions.** Refused 0.5.11-0.5.19 on every device (`srt/server_args.py` 0.5.11:3321,
    `arg_groups/speculative_hook.py` 0.5.19:197), 0.5.20-0.5.22 on all but NPU
    (`arg_groups/speculative_hook.py` 0.5.20:210-214, 0.5.22:296-300); 0.5.23 allows it on
    CUDA with `--enable-dp-lm-head`, no context parallelism and the coordination variable
    off (`arg_groups/speculative_hook.py` 0.5.23:303-317).
    """
    require_dflash(facts)
    launch = _launch_or_skip(facts)
    vf = version_facts(facts)
    if vf is None:
        raise Unjudged(f"SGLang version {facts.sglang_version.value!r} is not a version")
    width = attn_dp_width(launch)
    if width <= 1:
        return []
    flag = "--attn-dp-size" if launch.attn_dp_size > 1 else "--enable-dp-attention"
    evidence = [
        flag_evidence(launch, flag, f"DP attention over {width} groups ({flag})"),
        version_evidence(facts),
    ]
    refusal = dp_refusal(vf.version)
    if refusal is not None:
        return [
            dp_attention.finding(
                title=f"SGLang {vf.label} refuses DFLASH with DP attention",
                message=f"SGLang refuses to start: `{refusal}`",
                evidence=evidence,
                fixes=[*drop_dp_attention(launch), Fix(action="upgrade_sglang", value="0.5.23")],
            )
        ]
    findings: list[Finding] = []
    if not launch.enable_dp_lm_head:
        findings.append(
            dp_attention.finding(
                title="DFLASH with DP attention needs --enable-dp-lm-head",
                message=f"SGLang refuses to start: `{DP_LM_HEAD_REFUSAL}`",
                evidence=evidence,
                fixes=[Fix(action="set_flag", flag="--enable-dp-lm-head")],
            )
        )
    known, value = env_value(facts, DP_COORD_ENV)
    if known and env_bool(value) is True:
        findings.append(
            dp_attention.finding(
                title=f"DFLASH with DP attention requires {DP_COORD_ENV}=0",
                message=(
                    "SGLang refuses to start: "
                    f"`DFLASH with dp attention requires {DP_COORD_ENV}=0.`"
                ),
                evidence=[*evidence, env_evidence(facts, DP_COORD_ENV, value)],
                fixes=[Fix(action="manual", note=f"unset {DP_COORD_ENV}")],
            )
        )
    return findings


def _tp_size(facts: HostFacts) -> tuple[int, Evidence]:
    launch = facts.launch.value
    if launch is not None:
        flag = next(
            (
                f
                for f in ("--tp-size", "--tensor-parallel-size", "--tp")
                if f in launch.flags_present
            ),
            "--tp-size",
        )
        return launch.tp_size, flag_evidence(launch, flag, f"tp_size={launch.tp_size}")
    log = facts.log.value
    if log is not None and log.server_args is not None:
        raw = log.server_args_fields.get("tp_size")
        if raw is not None and raw.isdigit():
            return int(raw), log_evidence(log, log.server_args.line, f"server_args tp_size={raw}")
    raise Unjudged("the TP size is unknown (no launch command, no logged server args)")


@check(
    "DFD126",
    "drafter-heads-vs-tp",
    Severity.ERROR,
    needs=("drafter",),
    needs_any=("launch", "log"),
)
def drafter_heads_vs_tp(facts: HostFacts) -> list[Finding]:
    """The drafter's attention heads cannot be split over the server's TP size.

    **What it finds.** The draft model runs with the target's TP size, and
    `DFlashAttention` shards its heads over it: `num_attention_heads` must be divisible by
    the TP size, and `num_key_value_heads` divisible by it (or, when smaller, divide it).

    **Why it hurts.** Loading the drafter fails with an assertion (`DFlashAttention
    requires total_num_heads divisible by tp_size. ...`): the server never comes up.

    **Example.** A drafter with 20 heads and 4 KV heads served at `--tp-size 8`.

    **How to fix.** Serve at a TP size that divides the drafter's head counts, or use a
    drafter built for this TP size.

    **Fix safety.** A different TP size changes memory per GPU and throughput; it is a
    manual change.

    **Versions.** Every release 0.5.11-0.5.23 asserts it (`srt/models/dflash.py`
    0.5.11:51-65, 0.5.23:215-228).
    """
    require_dflash(facts)
    cfg = drafter(facts)
    tp, tp_ev = _tp_size(facts)
    problems: list[tuple[str, str]] = []
    # srt/models/dflash.py 0.5.11:51-54 (0.5.23:215-218)
    if cfg.num_attention_heads % tp:
        problems.append(
            (
                "num_attention_heads",
                f"DFlashAttention requires total_num_heads divisible by tp_size. "
                f"total_num_heads={cfg.num_attention_heads}, tp_size={tp}.",
            )
        )
    kv = cfg.num_key_value_heads
    # srt/models/dflash.py 0.5.11:56-65 (0.5.23:220-228)
    if kv >= tp and kv % tp:
        problems.append(
            (
                "num_key_value_heads",
                "DFlashAttention requires total_num_kv_heads divisible by tp_size when >= "
                f"tp_size. total_num_kv_heads={kv}, tp_size={tp}.",
            )
        )
    elif kv < tp and tp % kv:
        problems.append(
            (
                "num_key_value_heads",
                "DFlashAttention requires tp_size divisible by total_num_kv_heads when "
                f"total_num_kv_heads < tp_size. total_num_kv_heads={kv}, tp_size={tp}.",
            )
        )
    return [
        drafter_heads_vs_tp.finding(
            title=f"Drafter {key} cannot be split over tp_size={tp}",
            message=f"Loading the drafter fails: `{text}`",
            evidence=[
                config_evidence(
                    cfg,
                    key,
                    f"{key}={cfg.num_attention_heads if key == 'num_attention_heads' else kv}",
                ),
                tp_ev,
            ],
            fixes=[
                Fix(action="manual", note="serve at a TP size that divides the drafter's heads")
            ],
        )
        for key, text in problems
    ]


def _quantized_head(facts: HostFacts) -> Evidence | None:
    launch = facts.launch.value
    if launch is not None and (
        (launch.model_path or "").endswith(".gguf") or launch.quantization == "gguf"
    ):
        return flag_evidence(launch, "--model-path", f"GGUF target ({launch.model_path})")
    target = facts.target.value
    if target is not None and target.lm_head_quantized:
        return Evidence(
            kind="config",
            text=f"quantization_config.lm_head=true ({target.quant_method})",
            file=target.path,
            line=target.key_lines.get("lm_head"),
            key="quantization_config.lm_head",
        )
    return None


@check(
    "DFD127",
    "quantized-target-lm-head",
    Severity.ERROR,
    needs=("sglang_version",),
    needs_any=("target", "launch"),
)
def quantized_lm_head(facts: HostFacts) -> list[Finding]:
    """The target's lm_head is quantized, which DFLASH cannot draft with at this TP size.

    **What it finds.** The target's `lm_head` holds no dense fp16/bf16/fp32 weight: a
    GGUF target, or a `quantization_config` with `"lm_head": true` (GPTQ, AWQ, AutoRound,
    MoE-WNA16 read that key). DFLASH has no head of its own: it samples draft tokens with
    the target's.

    **Why it hurts.** The server starts and answers health checks, then the first
    speculative step raises: up to 0.5.17 at any TP (`DFLASH requires the target model to
    expose `lm_head` with `weight`.`); from 0.5.18 at TP above 1 (`DFLASH with a quantized
    target lm_head is only supported at tp=1, got tp_size=N.`).

    **Example.** A GPTQ target with `"lm_head": true` served at `--tp-size 2` on 0.5.20.

    **How to fix.** Use a checkpoint whose lm_head is not quantized; from 0.5.18, or
    serve at `--tp-size 1`.

    **Fix safety.** Manual: both change the model or its memory per GPU.

    **Versions.** Refused at any TP 0.5.11-0.5.17 (speculative/dflash_worker.py
    0.5.11:552-561; speculative/dflash_worker_v2.py 0.5.14:1331-1333, 0.5.17:1493-1496); at
    TP above 1 0.5.18-0.5.23 (speculative/dflash_worker_v2.py 0.5.18:840-845,
    0.5.23:1578-1583).
    """
    require_dflash(facts)
    head = _quantized_head(facts)
    if head is None:
        if facts.target.value is None:
            raise Unjudged(f"target config unavailable: {facts.target.error}")
        return []
    vf = version_facts(facts)
    if vf is None:
        raise Unjudged(f"SGLang version {facts.sglang_version.value!r} is not a version")
    launch = facts.launch.value
    tp = launch.tp_size if launch is not None else 1
    if vf.version >= QUANT_HEAD_ANY_TP_UNTIL and tp <= 1:
        return []
    if vf.version >= QUANT_HEAD_ANY_TP_UNTIL:
        refusal = QUANT_HEAD_TP.format(tp=tp)
    else:
        refusal = QUANT_HEAD_OLD if vf.version >= QUANT_HEAD_V2_SINCE else QUANT_HEAD_V1
    fixes = [Fix(action="manual", note="use a target checkpoint whose lm_head is not quantized")]
    if vf.version >= QUANT_HEAD_ANY_TP_UNTIL:
        fixes.append(Fix(action="manual", note="serve at --tp-size 1"))
    elif tp <= 1:
        fixes.append(Fix(action="upgrade_sglang", value="0.5.18"))
    else:
        fixes.append(Fix(action="manual", note="upgrade to SGLang 0.5.18+ and serve at tp 1"))
    evidence = [head, version_evidence(facts)]
    if launch is not None:
        evidence.append(flag_evidence(launch, "--tp-size", f"tp_size={tp}"))
    return [
        quantized_lm_head.finding(
            title=f"DFLASH cannot sample with a quantized target lm_head on SGLang {vf.label}",
            message=f"The first speculative step fails: `{refusal}`",
            evidence=evidence,
            fixes=fixes,
        )
    ]
