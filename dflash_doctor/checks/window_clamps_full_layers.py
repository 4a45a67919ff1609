"""DFD130: the draft window clamps full_attention draft layers.

Served and trained spans per layer come from `dflash_doctor.spans`, which cites SGLang's
file:line for each rule.
"""

from __future__ import annotations

from dflash_doctor.checks.base import Finding, Fix, Severity, check
from dflash_doctor.checks.startup_refusals import require_starts
from dflash_doctor.checks.views import (
    LAYER_TYPES_UPGRADE,
    behaviour_evidence,
    drafter,
    layer_list,
    remove_window_fix,
    require_dflash,
    span_evidence,
    span_model,
    window_state,
)
from dflash_doctor.facts.models import HostFacts


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
        [Fix(action="upgrade_sglang", value=LAYER_TYPES_UPGRADE)]
        if lesser_evil
        else [remove_window_fix(facts)]
    )
    if lesser_evil:
        tail = (
            f" On this SGLang ({b.source}) the flag stays as the lesser evil: without it the "
            f"sliding layers {layer_list(model.with_verdict('as_trained'))} would see the "
            f"whole context. Upgrade to {LAYER_TYPES_UPGRADE}+, then remove the flag."
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
