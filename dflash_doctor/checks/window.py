"""Checks that compare each draft layer's trained span with the span SGLang serves.

Every verdict here comes from one model, `dflash_doctor.spans`: per layer, what the drafter
was trained to attend over (its `sliding_window`, or the whole context) against what the
host's SGLang serves (from its own `srt/models/dflash.py` where readable, else the version
table), under the draft window flag, page size and context length. See `spans.py` for the
SGLang file:line behind each rule.

Retired ids (never reused): DFD101 and DFD108, see `checks/retired.py`.
"""

from __future__ import annotations

from dflash_doctor.checks.base import Evidence, Finding, Fix, Severity, Skip, Unjudged, check
from dflash_doctor.checks.startup_refusals import require_starts
from dflash_doctor.checks.views import (
    behaviour_evidence,
    context_length,
    drafter,
    flag_evidence,
    layer_list,
    no_window_reason,
    probe_evidence,
    remove_window_fix,
    require_dflash,
    require_layer_types,
    set_window_fix,
    sliding_evidence,
    span_evidence,
    span_model,
    version_evidence,
    version_facts,
    window_flag_unwanted,
    window_state,
)
from dflash_doctor.facts.models import DrafterConfig, HostFacts, LaunchArgs
from dflash_doctor.kv_math import (
    GIB,
    draft_bytes_per_token,
    kv_dtype_bytes,
    kv_heads_per_gpu,
    target_bytes_per_token,
)
from dflash_doctor.sglang_versions import (
    DRAFT_CELL_SIZE_SINCE,
    DRAFT_KV_DTYPE_FLAG,
    DRAFT_KV_DTYPE_SINCE,
    LAYER_TYPES_SINCE,
    VersionFacts,
    format_version,
)
from dflash_doctor.spans import SpanModel

UPGRADE = format_version(LAYER_TYPES_SINCE)
FP8_KV = ("fp8_e4m3", "fp8_e5m2")


def _reads(model: SpanModel) -> str | None:
    reads = model.reads_per_step()
    return f"{reads:,}" if reads is not None else None


@check(
    "DFD103",
    "drafter-ignores-layer-types",
    Severity.ERROR,
    needs=("drafter",),
    needs_any=("launch", "log"),
)
def drafter_ignores_layer_types(facts: HostFacts) -> list[Finding]:
    """Sliding-window draft layers attend beyond the window they were trained with.

    **What it finds.** Per draft layer, the trained span (`sliding_window` W for a
    `sliding_attention` layer) with the span the host's SGLang serves at the server's
    context length. It fires when a sliding layer is served more than W tokens: SGLang
    0.5.11-0.5.13 ignore `layer_types` and build every draft layer with full attention
    (`srt/models/dflash.py` 0.5.11:112-118, 0.5.13:116-122), so with no draft window, or
    one larger than W, those layers see the whole context or more than W tokens. Where the
    host's `srt/models/dflash.py` can be read, its code decides (patched builds), else the
    version; the evidence says which.

    **Why it hurts.** Past W tokens the drafter attends outside its training distribution:
    its proposals drift from the target and acceptance length falls as contexts grow.

    **Example.** A Kimi-K2.6 drafter with 5 sliding layers (W=2048) served by SGLang 0.5.13
    with the log line `draft_window_size=None, compact_cache=False` at context 131072.

    **How to fix.** Either upgrade SGLang to 0.5.14 or newer (manual; exact: every layer is
    then served as trained), or set the draft window to W with the spelling the host accepts
    (`--speculative-draft-window-size 2048`; `--speculative-dflash-draft-window-size` on
    0.5.11). The window is exact when every layer is sliding with one window (up to
    page_size - 1 older tokens of page alignment); it also clamps every `full_attention`
    layer to W tokens, which the fix names.

    **Fix safety.** The window flag only changes what the draft attends over; it never
    changes the target's output. It saves no KV memory (the draft pool has one slot per
    target token in every release).

    **Versions.** Fires on 0.5.11-0.5.13, whose draft layers are all built with full
    attention (`srt/models/dflash.py` 0.5.11:112-118, 0.5.13:116-122), and on builds whose
    `dflash.py` ignores `layer_types`; never on 0.5.14+, where a `sliding_attention` layer
    keeps W (`_get_dflash_layer_attention_params`, `srt/models/dflash.py` 0.5.14:44-66).
    """
    require_dflash(facts)
    cfg = drafter(facts)
    require_layer_types(cfg)
    window = cfg.effective_sliding_window
    if not cfg.sliding_layers or window is None:
        raise Skip(no_window_reason(cfg))
    require_starts(facts)
    model = span_model(facts, cfg)
    wider = model.with_verdict("wider")
    if not wider:
        return []
    b = model.behaviour
    state = window_state(facts)
    evidence = [sliding_evidence(cfg), *state.evidence, behaviour_evidence(facts, b)]
    ctx, ctx_evidence = context_length(facts)
    if ctx_evidence is not None:
        evidence.append(ctx_evidence)
    evidence.append(span_evidence(model))
    probed, probe_impact = probe_evidence(facts, ctx)
    evidence.extend(probed)
    window_fix, fixed = _window_fix(facts, cfg, window)
    impact: dict[str, float | int | str] = {
        "Sliding layers served beyond their window": layer_list(wider),
        "Trained window (tokens)": window,
        "Served span": wider[0].describe_served(),
    }
    reads, reads_fixed = _reads(model), _reads(fixed)
    if reads and reads_fixed:
        impact["Draft attention reads per step (KV entries, all layers)"] = (
            f"{reads} served, {reads_fixed} with the window"
        )
    impact.update(probe_impact)
    if state.window is None:
        told = "with no draft window"
    else:
        told = f"with a draft window of {state.window} tokens, above the trained {window}"
    return [
        drafter_ignores_layer_types.finding(
            title=f"Draft layers {layer_list(wider)} attend beyond their {window}-token window",
            message=(
                f"This SGLang ignores the drafter's layer_types (decided by {b.source}), so "
                f"{len(wider)} sliding_attention layers trained on {window} tokens are served "
                f"{wider[0].describe_served()} {told}."
            ),
            evidence=evidence,
            impact=impact,
            fixes=[Fix(action="upgrade_sglang", value=UPGRADE), window_fix],
        )
    ]


def _window_fix(facts: HostFacts, cfg: DrafterConfig, window: int) -> tuple[Fix, SpanModel]:
    """The set-window fix for DFD103, noting what it costs, and the spans it would serve."""
    fixed = span_model(facts, cfg, flag=window)
    clamped = fixed.with_verdict("clamped")
    fix_note = (
        f"also clamps full_attention layer(s) {layer_list(clamped)} to about {window} tokens; "
        f"upgrading to {UPGRADE} serves every layer as trained"
        if clamped
        else "exact: every draft layer is sliding with this window"
        + (
            f" (up to {fixed.page_slack} older tokens of page alignment)"
            if fixed.page_slack
            else ""
        )
    )
    window_fix = set_window_fix(facts, window)
    window_fix = window_fix.model_copy(
        update={"note": "; ".join(n for n in (window_fix.note, fix_note) if n)}
    )
    return window_fix, fixed


@check(
    "DFD102",
    "draft-window-differs-from-sliding-window",
    Severity.ERROR,
    needs=("drafter",),
    needs_any=("launch", "log"),
)
def window_differs(facts: HostFacts) -> list[Finding]:
    """The draft window is smaller than a trained sliding window: it truncates those layers.

    **What it finds.** Per sliding draft layer, the trained window W with the span the
    draft worker's compact view leaves it: `_compute_compact_draft_seq_lens` clamps every
    layer to the flag's N tokens (plus up to page_size - 1 of page alignment;
    speculative/dflash_worker.py 0.5.11:423-439, speculative/dflash_worker_v2.py
    0.5.23:1209-1225).
    With N < W the layer sees less than it was trained to use.

    **Why it hurts.** The drafter loses context it was trained on; acceptance drops.

    **Example.** `--speculative-draft-window-size 512` with a drafter whose
    `sliding_window` is 2048.

    **How to fix.** On 0.5.14 and newer remove the flag: sliding layers then keep their own
    window and full layers see the whole context. On 0.5.11-0.5.13 set it to W (the flag is
    what limits the sliding layers there).

    **Fix safety.** Only the draft's attention span changes; the target is untouched.

    **Versions.** Every release has the flag: `--speculative-dflash-draft-window-size`
    (`srt/server_args.py` 0.5.11:5418), `--speculative-draft-window-size` from 0.5.12
    (`srt/server_args.py` 0.5.12:5873; `arg_groups/fields/spec.py` 0.5.23:165); DFD104
    checks the spelling. Changed meaning, said here so no one is surprised: until issue 9
    this check also warned when the window was *larger* than W, on a memory premise SGLang's
    code disproves (one draft KV slot per target token whatever the window). That half was
    dropped: a larger window on 0.5.11-0.5.13 is DFD103, on 0.5.14+ DFD130.
    """
    require_dflash(facts)
    cfg = drafter(facts)
    require_layer_types(cfg)
    window = cfg.effective_sliding_window
    if window is None or not cfg.sliding_layers:
        raise Skip(no_window_reason(cfg))
    require_starts(facts)
    model = span_model(facts, cfg)
    truncated = model.with_verdict("truncated")
    if not truncated or model.window_flag is None:
        return []
    b = model.behaviour
    state = window_state(facts)
    clamped = model.with_verdict("clamped")
    fix = remove_window_fix(facts) if b.honours_layer_types else set_window_fix(facts, window)
    also = f"; it also clamps full_attention layer(s) {layer_list(clamped)}" if clamped else ""
    return [
        window_differs.finding(
            title=f"Draft window {model.window_flag} truncates sliding layers "
            f"{layer_list(truncated)} (trained on {window} tokens)",
            message=(
                f"The draft window keeps {truncated[0].describe_served()} but the drafter was "
                f"trained with sliding_window={window}{also}. "
                + (
                    f"This SGLang honours layer_types ({b.source}): without the flag every "
                    "layer is served as trained."
                    if b.honours_layer_types
                    else f"Set it to {window}."
                )
            ),
            evidence=[
                sliding_evidence(cfg),
                *state.evidence,
                behaviour_evidence(facts, b),
                span_evidence(model),
            ],
            impact={
                "Draft window (tokens)": model.window_flag,
                "Trained window (tokens)": window,
                "Truncated layers": layer_list(truncated),
            },
            fixes=[fix],
        )
    ]


@check(
    "DFD130",
    "draft-window-clamps-full-attention-layers",
    Severity.WARNING,
    needs=("drafter",),
    needs_any=("launch", "log"),
)
def window_clamps_full_layers(facts: HostFacts) -> list[Finding]:
    """The draft window clamps full_attention draft layers that were trained on the whole context.

    **What it finds.** Per `full_attention` draft layer, its trained span (the whole
    context) with the compact view the window flag gives every layer: N tokens plus up to
    page_size - 1 (`_compute_compact_draft_seq_lens`, speculative/dflash_worker.py
    0.5.11:423-439, speculative/dflash_worker_v2.py 0.5.14:511-527). The flag does not touch the
    drafter's layers; it shortens the draft worker's req->token view, for all of them.

    **Why it hurts.** Those layers lose the long-range context they were trained on, so
    acceptance on long prompts drops.

    **Example.** z-lab's Qwen3-8B-DFlash-b16 (all layers full) or a Kimi drafter with one
    full layer, launched with `--speculative-draft-window-size 2048` at context 131072.

    **How to fix.** On 0.5.14 and newer remove the flag: SGLang then serves sliding layers
    with their own window and full layers over the whole context (exact). On 0.5.11-0.5.13
    with sliding layers the flag stays as the lesser evil (without it the sliding layers
    see the whole context, DFD103); upgrade to 0.5.14+ and then remove it. A drafter with
    no sliding layer gains nothing from the flag on any version: remove it.

    **Fix safety.** Only the draft's attention span changes; the target is untouched.

    **Versions.** Every release has the flag (`srt/server_args.py` 0.5.11:5418,
    0.5.12:5873; `arg_groups/fields/spec.py` 0.5.23:165) and clamps every draft layer with
    it (speculative/dflash_worker.py 0.5.11:423-439, speculative/dflash_worker_v2.py
    0.5.23:1209-1225). Not raised when DFD102 or DFD103 already report the same flag.
    """
    require_dflash(facts)
    cfg = drafter(facts)
    require_starts(facts)
    model = span_model(facts, cfg)
    clamped = model.with_verdict("clamped")
    if not clamped or model.window_flag is None:
        return []
    if model.with_verdict("wider", "truncated"):
        return []  # DFD102/DFD103 own this flag and name these layers: one finding per cause
    b = model.behaviour
    state = window_state(facts)
    lesser_evil = not b.honours_layer_types and bool(cfg.sliding_layers)
    fixes = (
        [Fix(action="upgrade_sglang", value=UPGRADE)] if lesser_evil else [remove_window_fix(facts)]
    )
    if lesser_evil:
        tail = (
            f" On this SGLang ({b.source}) the flag stays as the lesser evil: without it the "
            f"sliding layers {layer_list(model.with_verdict('as_trained'))} would see the "
            f"whole context. Upgrade to {UPGRADE}+, then remove the flag."
        )
    else:
        tail = " Remove the flag: every layer is then served as trained."
    return [
        window_clamps_full_layers.finding(
            title=f"Draft window {model.window_flag} clamps full_attention layer(s) "
            f"{layer_list(clamped)}",
            message=(
                f"full_attention layer(s) {layer_list(clamped)} were trained over the whole "
                f"context but are served {clamped[0].describe_served()}." + tail
            ),
            evidence=[*state.evidence, behaviour_evidence(facts, b), span_evidence(model)],
            impact={
                "Clamped layers": layer_list(clamped),
                "Served span": clamped[0].describe_served(),
            },
            fixes=fixes,
        )
    ]


@check(
    "DFD104",
    "draft-window-flag-spelling",
    Severity.ERROR,
    needs=("launch",),
)
def window_flag_spelling(facts: HostFacts) -> list[Finding]:
    """The draft window flag is spelled in a way the host's SGLang does not accept.

    **What it finds.** The window flag was renamed: 0.5.11 accepts only
    `--speculative-dflash-draft-window-size`; 0.5.12 and newer accept
    `--speculative-draft-window-size` (0.5.12 takes both names); 0.5.13-0.5.19 still accept
    the old spelling as a deprecated alias, and 0.5.20 removed it. Where the host's SGLang
    is importable, its own parser says which spellings it accepts; otherwise the version
    decides.

    **Why it hurts.** An unknown flag makes `sglang.launch_server` exit at startup
    (`unrecognized arguments`), so a launch file with the wrong spelling never serves; a
    deprecated spelling works today and breaks on the next upgrade (a warning).

    **Example.** `--speculative-dflash-draft-window-size 2048` on SGLang 0.5.23.

    **How to fix.** Replace the flag with the spelling the host's version accepts (the
    finding names it), keeping the value; where the served spans say the window only
    harms (DFD102/DFD130: 0.5.14+, or a drafter with no sliding layer), remove it instead.

    **Fix safety.** A rename keeps what the server runs; a removal is what DFD130 asks.

    **Versions.** 0.5.11: old spelling only (`srt/server_args.py` 0.5.11:5418); 0.5.12:
    both names of one option (`srt/server_args.py` 0.5.12:5873-5874); 0.5.13-0.5.19: the old
    one a deprecated alias that still sets the window (`srt/server_args.py`
    0.5.13:5921-5928, 0.5.19:3911-3918; `arg_groups/argparse_actions.py` 0.5.13:70-82);
    0.5.20+: new only, a field with no alias (`arg_groups/fields/spec.py` 0.5.20:161,
    0.5.23:165).
    """
    require_dflash(facts)
    launch = facts.launch.value
    assert launch is not None
    vf = version_facts(facts)
    accepted, label = _accepted_window_flags(facts, launch, vf)
    deprecated = list(vf.deprecated_window_flags) if vf is not None else []
    used = launch.draft_window_flag
    if used is None:
        raise Skip("no draft window flag is set")
    preferred = next((f for f in accepted if f not in deprecated), None)
    value = str(launch.draft_window_size) if launch.draft_window_size is not None else None
    evidence = [flag_evidence(launch, used, f"{used} {value}")]
    if facts.sglang_version.value is not None:
        evidence.append(version_evidence(facts))
    # Where the served spans say this flag should go (DFD102/DFD130), renaming it would fix
    # the spelling and keep the harm. One cause, one fix: remove it.
    preferred_fix = Fix(action="remove_flag", flag=used) if window_flag_unwanted(facts) else None
    if used not in accepted:
        fix = preferred_fix or (
            Fix(action="replace_flag", flag=preferred, value=value, replaces=used)
            if preferred
            else Fix(action="upgrade_sglang", value="0.5.11")
        )
        return [
            window_flag_spelling.finding(
                title=f"{label} does not accept {used}",
                message=(
                    f"{used} is not a flag of {label}; the server would exit at "
                    "startup with 'unrecognized arguments'"
                    + (f". This version spells it {preferred}." if preferred else ".")
                ),
                evidence=evidence,
                fixes=[fix],
            )
        ]
    if used in deprecated and preferred:
        return [
            window_flag_spelling.finding(
                severity=Severity.WARNING,
                title=f"{used} is deprecated in {label}",
                message=(
                    f"{used} is a deprecated alias of {preferred} in {label} and is "
                    "removed in 0.5.20."
                ),
                evidence=evidence,
                fixes=[
                    preferred_fix
                    or Fix(action="replace_flag", flag=preferred, value=value, replaces=used)
                ],
            )
        ]
    return []


def _accepted_window_flags(
    facts: HostFacts, launch: LaunchArgs, vf: VersionFacts | None
) -> tuple[list[str], str]:
    """The window flags the host's SGLang accepts, and who says so (its parser, else the table)."""
    if launch.accepted_window_flags is not None:
        # Only a parser SGLang itself ran on the host is "its own"; a replay is the option
        # data of that release (facts/launch.py replay_launch), no host was asked.
        who = "its own parser" if launch.parser == "sglang" else "its parser, replayed from data"
        return launch.accepted_window_flags, f"SGLang {launch.parser_version} ({who})"
    if vf is not None:
        return list(vf.window_flags), f"SGLang {vf.label}"
    why = facts.sglang_version.error or facts.sglang_version.value
    raise Unjudged(f"SGLang version unknown or not understood: {why}")


@check(
    "DFD131",
    "draft-kv-memory",
    Severity.INFO,
    needs=("drafter",),
    needs_any=("launch", "log"),
)
def draft_kv_memory(facts: HostFacts) -> list[Finding]:
    """What the draft KV cache costs per token and per GPU, and the lever this SGLang has.

    **What it finds.** The draft pool's bytes per token slot on one GPU (2 x draft
    layers x KV heads per GPU x head_dim x KV dtype bytes; `dflash_draft_cell_size_per_token`,
    speculative/dflash_utils.py 0.5.18:139-151) with the target's, giving the share of the
    KV budget the draft takes. The draft pool has one slot per target token in every
    release (the draft shares the target's KV index space: speculative/dflash_worker.py
    0.5.11:87-98), so the share holds at any context and with or without a draft window.

    **Why it hurts.** That share is KV capacity the target does not get: fewer concurrent
    requests or shorter contexts. The draft window does **not** change it.

    **Example.** A 6-layer drafter with 8 KV heads at TP 8 in bf16: 3072 B per token per
    GPU beside Kimi-K2.6's 70272 B (MLA), about 4% of the KV budget.

    **How to fix.** From 0.5.18: `--speculative-draft-kv-cache-dtype fp8_e4m3` halves the
    draft pool. Those releases size the KV pool by target plus draft bytes per token, the
    draft priced at its own KV dtype, so the halved draft becomes target KV tokens within
    the same `--mem-fraction-static`; no other flag is needed (the flag's help text,
    `srt/server_args.py` 0.5.18:2187-2200, says to raise `--mem-fraction-static`: the code
    does not need it). Before 0.5.18 the draft follows `--kv-cache-dtype` (target and draft
    together). Listed as a manual step: an fp8 draft cache can change acceptance, measure it.

    **Fix safety.** A dtype change of the draft cache only; verify acceptance afterwards.

    **Versions.** Every release: one draft slot per target token (speculative/dflash_worker.py
    0.5.11:87-98). Before 0.5.18 SGLang budgets the draft by scaling the target's bytes per
    token by (target + draft layers) / target layers (speculative/dflash_utils.py
    0.5.11:51-89); from 0.5.18 by the draft's own cell size
    (speculative/dflash_utils.py 0.5.18:139-151) at the draft's own KV dtype
    (model_runner_components/spec_aux_hidden_state.py 0.5.18:182-218;
    mem_cache/draft_kv_budget.py 0.5.23:26-48; mem_cache/kv_cache_dtype.py 0.5.18:33-35)
    added to the target's (pool_configurator.py 0.5.18:227-233, 0.5.23:332-338;
    speculative/dflash_utils.py 0.5.18:178-185), with the draft-only dtype flag
    (`srt/server_args.py` 0.5.18:2187-2200). Replaces DFD108 (retired: it promised memory
    that a window cannot give back).
    """
    require_dflash(facts)
    cfg = drafter(facts)
    launch = facts.launch.value
    tp = launch.tp_size if launch else 1
    draft_dtype_flag = argv_value(launch, DRAFT_KV_DTYPE_FLAG) if launch else None
    kv_dtype = launch.kv_cache_dtype if launch else None
    vf = version_facts(facts)
    has_lever = vf is not None and vf.version >= DRAFT_KV_DTYPE_SINCE
    draft_dtype = draft_dtype_flag if has_lever and draft_dtype_flag else kv_dtype
    per_token = draft_bytes_per_token(cfg, tp_size=tp, kv_dtype=draft_dtype)
    elem = kv_dtype_bytes(draft_dtype, cfg.dtype)
    evidence = [
        Evidence(
            kind="derived",
            text=(
                f"draft KV per token per GPU: 2 x {cfg.num_hidden_layers} layers x "
                f"{kv_heads_per_gpu(cfg.num_key_value_heads, tp)} KV heads (of "
                f"{cfg.num_key_value_heads}, TP {tp}) x {cfg.head_dim} head_dim x {elem:g} B "
                f"= {int(per_token)} B; one slot per target token, with or without a draft "
                "window"
            ),
        )
    ]
    impact: dict[str, float | int | str] = {
        "Draft KV per token per GPU (bytes)": int(per_token),
    }
    ctx, ctx_evidence = context_length(facts)
    if ctx is not None and ctx_evidence is not None:
        evidence.append(ctx_evidence)
        impact["Draft KV per full-context request per GPU (GiB)"] = round(per_token * ctx / GIB, 3)
        if launch is not None and launch.max_running_requests:
            impact["Draft KV at max running requests per GPU (GiB)"] = round(
                per_token * ctx * launch.max_running_requests / GIB, 2
            )
    share = _kv_share(facts, cfg, vf, per_token, impact)
    if (draft_dtype or "auto") in FP8_KV:
        return []  # the draft KV already uses fp8: the lever is pulled
    lever, fixes = _kv_lever(vf, has_lever)
    share_text = f", {share:.1%} of the KV budget" if share is not None else ""
    return [
        draft_kv_memory.finding(
            title=f"Draft KV cache: {int(per_token)} B per token per GPU{share_text}",
            message=(
                f"The draft pool holds one slot per target token ({int(per_token)} B per "
                f"token per GPU{share_text}); a draft window does not change it. "
                f"Lever: {lever}."
            ),
            evidence=evidence,
            impact=impact,
            fixes=fixes,
        )
    ]


def _kv_share(
    facts: HostFacts,
    cfg: DrafterConfig,
    vf: VersionFacts | None,
    per_token: float,
    impact: dict[str, float | int | str],
) -> float | None:
    """The draft's share of the KV budget as this SGLang sizes it (adds it to impact)."""
    launch = facts.launch.value
    tp = launch.tp_size if launch else 1
    kv_dtype = launch.kv_cache_dtype if launch else None
    target = facts.target.value
    share: float | None = None
    if vf is not None and vf.version < DRAFT_CELL_SIZE_SINCE and target is not None:
        share = cfg.num_hidden_layers / (target.num_hidden_layers + cfg.num_hidden_layers)
        impact["Draft share of the KV budget"] = (
            f"{share:.1%} (SGLang {vf.label} scales the target's bytes/token by layer count)"
        )
    elif target is not None:
        target_bytes = target_bytes_per_token(target, tp_size=tp, kv_dtype=kv_dtype)
        if target_bytes:
            share = per_token / (per_token + target_bytes)
            impact["Target KV per token per GPU (bytes)"] = int(target_bytes)
            impact["Draft share of the KV budget"] = f"{share:.1%}"
    return share


def _kv_lever(vf: VersionFacts | None, has_lever: bool) -> tuple[str, list[Fix]]:
    """The way this SGLang offers to shrink the draft pool, and its fix when it has one."""
    if has_lever:
        # SGLang 0.5.18+ budgets the pool by target + draft bytes/token with the draft at
        # its own dtype (pool_configurator.py 0.5.18:227-233, spec_aux_hidden_state.py
        # 0.5.18:196-211), so the saving is KV capacity at the same --mem-fraction-static.
        lever = (
            f"set {DRAFT_KV_DTYPE_FLAG} fp8_e4m3: it halves the draft pool, and SGLang "
            f"{vf.label if vf is not None else '0.5.18+'} sizes the KV pool with the draft at that "
            "dtype, so the saving becomes target KV tokens at the same --mem-fraction-static; "
            "measure acceptance after"
        )
        return lever, [Fix(action="manual", flag=DRAFT_KV_DTYPE_FLAG, value="fp8_e4m3", note=lever)]
    if vf is not None:
        lever = (
            f"SGLang {vf.label} has no draft-only KV dtype ({DRAFT_KV_DTYPE_FLAG} arrives in "
            f"{format_version(DRAFT_KV_DTYPE_SINCE)}); --kv-cache-dtype fp8_e4m3 shrinks "
            "target and draft together"
        )
        return lever, []
    return f"SGLang version unknown ({DRAFT_KV_DTYPE_FLAG} needs 0.5.18 or newer)", []


def argv_value(launch: LaunchArgs, flag: str) -> str | None:
    """The value of `flag` in the launch argv (`--flag V` or `--flag=V`), last one wins."""
    value: str | None = None
    argv = launch.argv
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith(flag + "="):
            value = arg.split("=", 1)[1]
    return value
