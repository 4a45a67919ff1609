"""Checks on the drafter's sliding window versus the draft window the server runs with."""

from __future__ import annotations

from dflash_doctor.checks.base import Evidence, Finding, Fix, Severity, Skip, check
from dflash_doctor.checks.views import (
    config_evidence,
    context_length,
    drafter,
    flag_evidence,
    probe_evidence,
    require_dflash,
    server_draft_kv,
    set_window_fix,
    sliding_evidence,
    version_evidence,
    version_facts,
    window_state,
)
from dflash_doctor.facts.models import HostFacts
from dflash_doctor.sglang_versions import LAYER_TYPES_SINCE, format_version

# Beyond this many windows of context, the full draft history is mostly waste.
FAR_BEYOND_WINDOWS = 4


@check(
    "DFD101",
    "sliding-drafter-without-draft-window",
    Severity.ERROR,
    needs=("drafter",),
    needs_any=("launch", "log"),
)
def sliding_drafter_without_window(facts: HostFacts) -> list[Finding]:
    """Drafter trained with sliding-window attention, but the server keeps no draft window.

    **What it finds.** The drafter's `config.json` marks some layers `sliding_attention`
    (with `sliding_window: N`), yet SGLang runs it with no draft window: neither
    `--speculative-draft-window-size` (0.5.12+) nor `--speculative-dflash-draft-window-size`
    (0.5.11) is set, and the DFlash worker logs
    `Initialized DFLASH draft runner. ... draft_window_size=None, compact_cache=False`.

    **Why it hurts.** Nothing fails. The draft worker keeps the full KV history of every
    request, so long contexts waste GPU memory and drafter compute; and on SGLang
    0.5.11-0.5.13, whose drafter ignores `layer_types`, the drafter attends over the whole
    context, outside the distribution it was trained on, and acceptance length drops.

    **How to fix.** Launch with the draft window equal to the drafter's `sliding_window`,
    spelled the way the host's SGLang accepts: `--speculative-draft-window-size 2048` on
    0.5.12 and newer, `--speculative-dflash-draft-window-size 2048` on 0.5.11. The log then
    says `draft_window_size=2048, compact_cache=True`.
    """
    require_dflash(facts)
    cfg = drafter(facts)
    window = cfg.effective_sliding_window
    if not cfg.sliding_layers or window is None:
        raise Skip("drafter has no sliding_attention layers")
    state = window_state(facts)
    if state.window is not None:
        return []
    evidence = [sliding_evidence(cfg), *state.evidence]
    vf = version_facts(facts)
    impact: dict[str, float | int | str] = {"drafter_sliding_window": window}
    if vf is not None and not vf.drafter_honours_layer_types:
        evidence.append(version_evidence(facts))
        impact["drafter_attention"] = "full context (this SGLang ignores layer_types)"
    ctx, ctx_evidence = context_length(facts)
    if ctx is not None and ctx_evidence is not None:
        kv = server_draft_kv(facts, cfg, ctx, window)
        evidence.append(ctx_evidence)
        full = kv.as_impact()
        # The headline numbers; DFD108 gives the whole memory picture.
        for key in (
            "context_tokens",
            "draft_kv_full_gib_per_request_per_gpu",
            "draft_kv_windowed_gib_per_request_per_gpu",
        ):
            impact[key] = full[key]
    probed, probe_impact = probe_evidence(facts, ctx)
    evidence.extend(probed)
    impact.update(probe_impact)
    return [
        Finding(
            check_id="DFD101",
            severity=Severity.ERROR,
            title="Drafter trained with a sliding window runs without a draft window",
            message=(
                f"{len(cfg.sliding_layers)} of {cfg.num_hidden_layers} drafter layers were "
                f"trained with sliding_window={window}, but the server keeps the full draft "
                "KV history (draft_window_size=None, compact_cache=False)."
            ),
            evidence=evidence,
            impact=impact,
            fixes=[set_window_fix(facts, window)],
        )
    ]


@check(
    "DFD102",
    "draft-window-differs-from-sliding-window",
    Severity.WARNING,
    needs=("drafter",),
    needs_any=("launch", "log"),
)
def window_differs(facts: HostFacts) -> list[Finding]:
    """The draft window is set, but not to the drafter's trained `sliding_window`.

    **What it finds.** `--speculative-draft-window-size` (or the 0.5.11 spelling, or the
    logged `draft_window_size=`) differs from the `sliding_window` in the drafter's
    `config.json`.

    **Why it hurts.** A smaller window truncates context the drafter was trained to see,
    which lowers acceptance (an error). A larger window keeps KV the drafter never attends
    to, wasting GPU memory (a warning).

    **How to fix.** Set the draft window to the drafter's `sliding_window`.
    """
    require_dflash(facts)
    cfg = drafter(facts)
    window = cfg.effective_sliding_window
    if window is None:
        raise Skip("drafter has no sliding window")
    state = window_state(facts)
    if state.window is None or state.window == window:
        return []
    smaller = state.window < window
    return [
        Finding(
            check_id="DFD102",
            severity=Severity.ERROR if smaller else Severity.WARNING,
            title=(
                "Draft window is smaller than the drafter's sliding window"
                if smaller
                else "Draft window is larger than the drafter's sliding window"
            ),
            message=(
                f"The server's draft window is {state.window} tokens; the drafter was trained "
                f"with sliding_window={window}. "
                + (
                    "It cannot see context it was trained to use."
                    if smaller
                    else "The extra draft KV is never attended to."
                )
            ),
            evidence=[sliding_evidence(cfg), *state.evidence],
            impact={"draft_window": state.window, "drafter_sliding_window": window},
            fixes=[set_window_fix(facts, window)],
        )
    ]


@check(
    "DFD103",
    "drafter-ignores-layer-types",
    Severity.ERROR,
    needs=("drafter", "sglang_version"),
)
def drafter_ignores_layer_types(facts: HostFacts) -> list[Finding]:
    """The host's SGLang builds every drafter layer with full attention (ignores `layer_types`).

    **What it finds.** SGLang 0.5.11 to 0.5.13 construct the DFlash drafter without reading
    `layer_types`, so layers trained as `sliding_attention` attend over the whole context,
    whatever `sliding_window` says.

    **Why it hurts.** On long prompts the drafter sees far more context than in training;
    its proposals drift from the target and acceptance length falls. With no draft window
    set, the drafter also holds the full KV history (see DFD101).

    **How to fix.** Upgrade SGLang to 0.5.14 or newer, where the drafter honours
    `layer_types`. Until then, set the draft window to `sliding_window` so the compacted
    draft cache limits what the drafter can attend to.
    """
    require_dflash(facts)
    cfg = drafter(facts)
    window = cfg.effective_sliding_window
    if not cfg.sliding_layers or window is None:
        raise Skip("drafter has no sliding_attention layers")
    vf = version_facts(facts)
    if vf is None:
        raise Skip(f"SGLang version not understood: {facts.sglang_version.value}")
    if vf.drafter_honours_layer_types:
        return []
    fixes = [Fix(action="upgrade_sglang", value=format_version(LAYER_TYPES_SINCE))]
    state = window_state(facts)
    if state.window != window:
        fixes.append(set_window_fix(facts, window))
    return [
        Finding(
            check_id="DFD103",
            severity=Severity.ERROR,
            title=f"SGLang {vf.label} runs the sliding-window drafter with full attention",
            message=(
                f"SGLang {vf.label} ignores the drafter's layer_types: its "
                f"{len(cfg.sliding_layers)} sliding_attention layers attend over the whole "
                "context instead of the last "
                f"{window} tokens."
            ),
            evidence=[sliding_evidence(cfg), version_evidence(facts), *state.evidence],
            impact={"drafter_sliding_window": window},
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

    **How to fix.** Replace the flag with the spelling the host's version accepts (the
    finding names it), keeping the value.
    """
    require_dflash(facts)
    launch = facts.launch.value
    assert launch is not None
    vf = version_facts(facts)
    if launch.accepted_window_flags is not None:
        accepted = launch.accepted_window_flags
        label = f"SGLang {launch.parser_version} (its own parser)"
    elif vf is not None:
        accepted = list(vf.window_flags)
        label = f"SGLang {vf.label}"
    else:
        why = facts.sglang_version.error or facts.sglang_version.value
        raise Skip(f"SGLang version unknown or not understood: {why}")
    deprecated = list(vf.deprecated_window_flags) if vf is not None else []
    used = launch.draft_window_flag
    if used is None:
        raise Skip("no draft window flag is set")
    preferred = next((f for f in accepted if f not in deprecated), None)
    value = str(launch.draft_window_size) if launch.draft_window_size is not None else None
    evidence = [flag_evidence(launch, used, f"{used} {value}")]
    if facts.sglang_version.value is not None:
        evidence.append(version_evidence(facts))
    if used not in accepted:
        fix = (
            Fix(action="replace_flag", flag=preferred, value=value, replaces=used)
            if preferred
            else Fix(action="upgrade_sglang", value="0.5.11")
        )
        return [
            Finding(
                check_id="DFD104",
                severity=Severity.ERROR,
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
            Finding(
                check_id="DFD104",
                severity=Severity.WARNING,
                title=f"{used} is deprecated in {label}",
                message=(
                    f"{used} is a deprecated alias of {preferred} in {label} and is "
                    "removed in 0.5.20."
                ),
                evidence=evidence,
                fixes=[Fix(action="replace_flag", flag=preferred, value=value, replaces=used)],
            )
        ]
    return []


@check(
    "DFD108",
    "long-context-without-compaction",
    Severity.WARNING,
    needs=("drafter",),
    needs_any=("launch", "log"),
)
def long_context_without_compaction(facts: HostFacts) -> list[Finding]:
    """Context length is far beyond the drafter's window, and the draft cache is not compacted.

    **What it finds.** The server's context length (`--context-length`, else the target's
    `max_position_embeddings`) is at least four times the drafter's `sliding_window`, and no
    draft window is set, so every request may hold draft KV for its whole context.

    **Why it hurts.** The draft KV pool is sized for full histories: memory that could hold
    more concurrent requests or longer target contexts is spent on draft KV the drafter was
    trained not to use. The finding gives the numbers per request and per GPU at the
    server's `--max-running-requests`.

    **How to fix.** Set the draft window to `sliding_window` (the same fix as DFD101).
    """
    require_dflash(facts)
    cfg = drafter(facts)
    window = cfg.effective_sliding_window
    if window is None:
        raise Skip("drafter has no sliding window")
    state = window_state(facts)
    if state.window is not None:
        return []
    ctx, ctx_evidence = context_length(facts)
    if ctx is None or ctx_evidence is None:
        raise Skip("context length unknown (no --context-length, no target config)")
    if ctx < FAR_BEYOND_WINDOWS * window:
        return []
    launch = facts.launch.value
    kv = server_draft_kv(facts, cfg, ctx, window)
    impact: dict[str, float | int | str] = dict(
        kv.as_impact(launch.max_running_requests if launch else None)
    )
    probed, probe_impact = probe_evidence(facts, ctx)
    impact.update(probe_impact)
    per_req = impact["draft_kv_full_gib_per_request_per_gpu"]
    win_req = impact["draft_kv_windowed_gib_per_request_per_gpu"]
    return [
        Finding(
            check_id="DFD108",
            severity=Severity.WARNING,
            title=f"Context {ctx} is {ctx // window}x the drafter window with no draft compaction",
            message=(
                f"At {ctx} tokens each request holds {per_req} GiB of draft KV per GPU; with a "
                f"{window}-token draft window it would hold {win_req} GiB."
            ),
            evidence=[
                ctx_evidence,
                config_evidence(cfg, "sliding_window", f"sliding_window={window}"),
                Evidence(
                    kind="derived",
                    text=(
                        f"draft KV per token per GPU: 2 x {cfg.num_hidden_layers} layers x "
                        f"{cfg.num_key_value_heads} kv heads / tp {kv.tp_size} x "
                        f"{cfg.head_dim} head_dim x dtype bytes = {int(kv.bytes_per_token)} B"
                    ),
                ),
                *state.evidence,
                *probed,
            ],
            impact=impact,
            fixes=[set_window_fix(facts, window)],
        )
    ]
