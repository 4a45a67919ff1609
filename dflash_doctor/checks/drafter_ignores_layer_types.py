"""DFD103: sliding draft layers served beyond the window they were trained with.

Served and trained spans per layer come from `dflash_doctor.spans`, which cites SGLang's
file:line for each rule.
"""

from __future__ import annotations

from dflash_doctor.checks.base import Finding, Fix, Severity, Skip, check
from dflash_doctor.checks.startup_refusals import require_starts
from dflash_doctor.checks.views import (
    LAYER_TYPES_UPGRADE,
    behaviour_evidence,
    context_length,
    drafter,
    layer_list,
    no_window_reason,
    probe_evidence,
    require_dflash,
    require_layer_types,
    set_window_fix,
    sliding_evidence,
    span_evidence,
    span_model,
    window_state,
)
from dflash_doctor.facts.models import DrafterConfig, HostFacts
from dflash_doctor.spans import SpanModel


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
            fixes=[Fix(action="upgrade_sglang", value=LAYER_TYPES_UPGRADE), window_fix],
        )
    ]


def _window_fix(facts: HostFacts, cfg: DrafterConfig, window: int) -> tuple[Fix, SpanModel]:
    """The set-window fix for DFD103, noting what it costs, and the spans it would serve."""
    fixed = span_model(facts, cfg, flag=window)
    clamped = fixed.with_verdict("clamped")
    fix_note = (
        f"also clamps full_attention layer(s) {layer_list(clamped)} to about {window} tokens; "
        f"upgrading to {LAYER_TYPES_UPGRADE} serves every layer as trained"
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
