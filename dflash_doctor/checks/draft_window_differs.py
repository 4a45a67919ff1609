"""DFD102: a draft window smaller than a trained sliding window truncates those layers.

Served and trained spans per layer come from `dflash_doctor.spans`, which cites SGLang's
file:line for each rule.
"""

from __future__ import annotations

from dflash_doctor.checks.base import Finding, Severity, Skip, check
from dflash_doctor.checks.startup_refusals import require_starts
from dflash_doctor.checks.views import (
    behaviour_evidence,
    drafter,
    layer_list,
    no_window_reason,
    remove_window_fix,
    require_dflash,
    require_layer_types,
    set_window_fix,
    sliding_evidence,
    span_evidence,
    span_model,
    window_state,
)
from dflash_doctor.facts.models import HostFacts


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
    checks the spelling. A window *larger* than W is not this check's: on 0.5.11-0.5.13 it
    is DFD103, on 0.5.14+ DFD130 (it costs no memory: one draft KV slot per target token
    whatever the window).
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
