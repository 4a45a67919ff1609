"""DFD125: DP attention with DFLASH, refused through 0.5.22 and conditional on 0.5.23.

The DP helpers here also serve DFD140 (renamed_options.py), which says when renaming
`--enable-dp-attention` does not help."""

from __future__ import annotations

from dflash_doctor.checks.base import Finding, Fix, Severity, Unjudged, check
from dflash_doctor.checks.views import (
    env_evidence,
    env_value,
    flag_evidence,
    require_dflash,
    version_evidence,
    version_facts,
)
from dflash_doctor.facts.environment import env_bool
from dflash_doctor.facts.models import HostFacts, LaunchArgs
from dflash_doctor.sglang_versions import Version

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
    """The launch; unjudged without it (the DP layout is read from its flags only)."""
    if facts.launch.value is None:
        raise Unjudged(f"needs the launch command: {facts.launch.error}")
    return facts.launch.value


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
