"""DFD161: a drafter's window or causality declared in keys SGLang never reads."""

from __future__ import annotations

from dflash_doctor.checks.base import Evidence, Finding, Fix, Severity, Skip, check
from dflash_doctor.checks.startup_refusals import require_starts
from dflash_doctor.checks.views import (
    config_evidence,
    context_length,
    drafter,
    layer_list,
    page_size,
    require_dflash,
    set_window_fix,
    span_evidence,
    version_evidence,
    window_state,
)
from dflash_doctor.facts.models import DrafterConfig, HostFacts
from dflash_doctor.sglang_versions import LAYER_TYPES_SINCE, format_version, parse_version
from dflash_doctor.spans import FULL, SLIDING, Behaviour, LayerSpan, served_spans

# models/dflash.py reads the top-level `is_causal` from 0.5.17 for full_attention layers
# (models/dflash.py 0.5.17:58-66) and from 0.5.18 for both kinds (models/dflash.py
# 0.5.18:46-52); sliding layers are causal
# (AttentionType.DECODER) from 0.5.14 whatever it says, unless 0.5.18+ reads an explicit false.
IS_CAUSAL_SINCE = (0, 5, 17)
EXPLICIT_FALSE_SINCE = (0, 5, 18)
NOT_READ = (
    "SGLang reads no dflash_config.use_swa, dflash_config.swa_window_size (outside the "
    "Nemotron-3.5 layout) or dflash_config.causal"
)


@check(
    "DFD161",
    "window-or-causality-in-unread-dialect",
    Severity.ERROR,
    needs=("drafter",),
    needs_any=("launch", "log"),
)
def unread_window_dialect(facts: HostFacts) -> list[Finding]:
    """The drafter declares its window or causality in keys SGLang never reads.

    **What it finds.** `dflash_config.use_swa` / `dflash_config.swa_window_size` (a
    window written as other trainers and servers write it; the Nemotron-3.5 draft layout
    excepted) with no `layer_types` + `sliding_window` that SGLang reads, and
    `dflash_config.causal: true` with no top-level `is_causal: true`. Per layer, the span
    it was trained with against the one SGLang serves, and whether it is served causal.
    The dialect names no layers, so every layer is taken as trained with that window.

    **Why it hurts.** SGLang builds draft layers only from `layer_types` (text config
    first, then top level), the top-level `sliding_window` and, from 0.5.17, `is_causal`:
    the windowed layers attend over the whole context and the causal-trained
    `full_attention` layers attend bidirectionally inside the draft block. The server
    starts clean; acceptance falls, most at long contexts.

    **Example.** A drafter exported with `"dflash_config": {"use_swa": true,
    "swa_window_size": 2048, "causal": true}` and no `layer_types`, on SGLang 0.5.23.

    **How to fix.** Write the window and causality in SGLang's keys: `layer_types`
    (`sliding_attention` per windowed layer), top-level `sliding_window` and
    `is_causal: true` (0.5.14+ reads the first two, 0.5.17+ the third). Until then the
    draft window flag set to W clamps every layer to W (exact when every layer was trained
    sliding).

    **Fix safety.** The window flag only changes what the draft attends over; the
    config edit changes a model file (manual, keep a copy).

    **Versions.** No release 0.5.11-0.5.23 reads `use_swa` or `causal` in
    `dflash_config`. Window: speculative/dflash_utils.py 0.5.14:341-356, 0.5.23:400-416
    (`swa_window_size` only for the Nemotron-3.5 draft, from 0.5.19:
    speculative/dflash_utils.py 0.5.19:418);
    layer types: models/dflash.py 0.5.14:44-66, 0.5.23:166-190; 0.5.11-0.5.13 build every
    layer full and bidirectional (models/dflash.py 0.5.11:112-118). Causality:
    models/dflash.py 0.5.17:58-66, 0.5.18:46-52, 0.5.23:157-163.
    """
    require_dflash(facts)
    cfg = drafter(facts)
    if cfg.dflash_use_swa is None and cfg.swa_window_size is None and cfg.dflash_causal is None:
        raise Skip("the drafter declares no window or causality in dflash_config")
    require_starts(facts)
    version = parse_version(facts.sglang_version.value or "")
    found: list[Finding] = []
    window = _dialect_window(cfg)
    if window is not None:
        found.extend(_window_finding(facts, cfg, window))
    if cfg.dflash_causal is True and not _causal_read(cfg, version):
        found.extend(_causal_finding(facts, cfg, version))
    return found


def _causal_read(cfg: DrafterConfig, version: tuple[int, int, int] | None) -> bool:
    """Whether SGLang builds the layers causal from the top-level is_causal: read from
    0.5.17, and only when the config has layer_types (models/dflash.py 0.5.23:169-171
    builds every layer bidirectional without them)."""
    if cfg.is_causal_declared is not True or version is None or version < IS_CAUSAL_SINCE:
        return False
    return bool(cfg.layer_types) and cfg.layer_types_source != "class_default"


def _dialect_window(cfg: DrafterConfig) -> int | None:
    """The window the dialect declares where SGLang reads none, else None."""
    if cfg.dflash_use_swa is False or not cfg.swa_window_size or cfg.swa_window_size <= 0:
        return None
    if cfg.nemotron_35_draft or cfg.sliding_layers:
        return None  # SGLang reads a window (Nemotron's swa_window_size, or sliding_window)
    return cfg.swa_window_size


def _window_finding(facts: HostFacts, cfg: DrafterConfig, window: int) -> list[Finding]:
    """Trained (every layer sliding with `window`) vs served spans."""
    state = window_state(facts)
    if not state.known:
        raise Skip("draft window unknown (no launch command and no DFlash log line)")
    ctx, ctx_evidence = context_length(facts)
    model = served_spans(
        behaviour=Behaviour(False, NOT_READ),
        layer_types=[SLIDING] * cfg.num_hidden_layers,
        sliding_window=window,
        window_flag=state.window,
        page_size=page_size(facts),
        block_size=cfg.block_size,
        context=ctx,
    )
    off = model.with_verdict("wider", "truncated")
    if not off:
        return []
    evidence = [
        config_evidence(
            cfg,
            "swa_window_size",
            f"dflash_config.use_swa={cfg.dflash_use_swa}, swa_window_size={window}; "
            f"layer_types as SGLang reads them: {_kinds(cfg)}",
        ),
        *state.evidence,
        *([ctx_evidence] if ctx_evidence is not None else []),
        span_evidence(model),
    ]
    return [
        unread_window_dialect.finding(
            title=f"Draft layers {layer_list(off)} trained on a {window}-token window are "
            f"served {off[0].describe_served()}",
            message=(
                f"{NOT_READ}: the window sits in dflash_config.swa_window_size, so SGLang "
                f"serves {len(off)} layer(s) trained on {window} tokens "
                f"{off[0].describe_served()}."
            ),
            evidence=evidence,
            impact={
                "Layers served beyond their window": layer_list(off),
                "Trained window (tokens)": window,
                "Served span": off[0].describe_served(),
            },
            fixes=[
                set_window_fix(facts, window),
                Fix(
                    action="manual",
                    note=f"write layer_types and top-level sliding_window={window} into the "
                    f"drafter's config.json (read from {format_version(LAYER_TYPES_SINCE)})",
                ),
            ],
        )
    ]


def _kinds(cfg: DrafterConfig) -> str:
    if not cfg.layer_types:
        return "none"
    return ", ".join(sorted(set(cfg.layer_types)))


def _noncausal_layers(cfg: DrafterConfig, version: tuple[int, int, int] | None) -> list[int]:
    """Layers SGLang builds bidirectional (AttentionType.ENCODER_ONLY) for this drafter."""
    every = list(range(cfg.num_hidden_layers))
    if version is None or version < LAYER_TYPES_SINCE or not cfg.layer_types:
        return every  # 0.5.11-0.5.13, or no layer_types: every layer full and bidirectional
    if version >= EXPLICIT_FALSE_SINCE and cfg.is_causal_declared is False:
        return every  # 0.5.18+ reads an explicit false for sliding layers too
    return [i for i, t in enumerate(cfg.layer_types) if t != SLIDING]


def _causal_finding(
    facts: HostFacts, cfg: DrafterConfig, version: tuple[int, int, int] | None
) -> list[Finding]:
    """dflash_config.causal: true, served bidirectional in the full_attention layers."""
    layers = _noncausal_layers(cfg, version)
    if not layers:
        return []
    ids = layer_list([LayerSpan(i, FULL, None, None, None, "as_trained") for i in layers])
    evidence: list[Evidence] = [
        config_evidence(
            cfg,
            "causal",
            "dflash_config.causal=true, top-level is_causal "
            + {None: "absent", True: "true", False: "false"}[cfg.is_causal_declared],
        )
    ]
    if version is not None:
        evidence.append(version_evidence(facts))
    upgrade = version is not None and version < IS_CAUSAL_SINCE
    fixes = [
        Fix(
            action="manual",
            note="add top-level is_causal: true (and layer_types) to the drafter's "
            f"config.json (read from {format_version(IS_CAUSAL_SINCE)})",
        )
    ]
    if upgrade:
        fixes.insert(0, Fix(action="upgrade_sglang", value=format_version(IS_CAUSAL_SINCE)))
    return [
        unread_window_dialect.finding(
            title=f"Causal-trained draft layers {ids} are served bidirectional",
            message=(
                f"{NOT_READ}: dflash_config.causal=true is not read, so layer(s) {ids} "
                "(trained causal) attend bidirectionally inside the draft block."
            ),
            evidence=evidence,
            impact={"Layers served non-causal": ids, "Trained": "causal"},
            fixes=fixes,
        )
    ]
