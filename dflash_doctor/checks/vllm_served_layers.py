"""Each DFlash draft layer as vLLM serves it, against what its config says it was trained with.

Served: `facts/vllm_drafter.vllm_layers` (vLLM's own `_resolve_layer_attention`). The
runner does not change it for any drafter that starts: the V1 runner builds one causality
for the whole draft (`vllm/v1/spec_decode/dflash.py 0.27.1:79-81, 0.33.0:79-81`), which is
every layer's own wherever V1 accepts the drafter (causality differs between layers only
where sliding and full layers are mixed, refused on V1: DFD300); the V2 runner takes each
KV group's causality from its layers (`vllm/v1/worker/gpu/spec_decode/dflash/speculator.py
0.27.1:210-215, 0.34.0:327-332`); both hand each layer's window to its attention as built
(`vllm/model_executor/models/qwen3_dflash.py 0.27.1:229, 0.34.0:273`).
"""

from __future__ import annotations

from dflash_doctor.checks.base import Evidence, Finding, Fix, Severity, Skip, Unjudged, check
from dflash_doctor.checks.views import config_evidence, drafter, layer_list
from dflash_doctor.checks.vllm_runner import V1_REMOVED, mixed_layers, runner_value
from dflash_doctor.checks.vllm_views import version_evidence, vllm_dflash
from dflash_doctor.errors import FactError
from dflash_doctor.facts.models import DrafterConfig, HostFacts
from dflash_doctor.facts.vllm_drafter import SLIDING, VllmLayer, vllm_layers
from dflash_doctor.facts.vllm_models import RUNNER_ENV
from dflash_doctor.sglang_versions import parse_version
from dflash_doctor.spans import LayerSpan, Verdict

IS_CAUSAL_READ = (0, 28, 0)  # `_dflash_layer_causal` reads the top-level is_causal from 0.28.0
IS_CAUSAL_UPGRADE = "0.28.0"


def trained_layers(cfg: DrafterConfig) -> list[tuple[str, int | None]]:
    """(layer type, window) per layer as the config declares training: `layer_types` with
    the resolved top-level `sliding_window` (as transformers and SGLang read it), else
    `dflash_config.swa_window_size`; a config naming no sliding layer but `use_swa`
    declares every layer sliding with `swa_window_size`, else `sliding_window` (the
    reading SGLang's dialect check DFD161 takes too)."""
    types = cfg.layer_types if cfg.layer_types_source != "class_default" else []
    if types and SLIDING in types:
        window = cfg.effective_sliding_window or cfg.swa_window_size
        return [(t, window if t == SLIDING else None) for t in types]
    if cfg.dflash_use_swa:
        window = cfg.swa_window_size or cfg.effective_sliding_window
        return [(SLIDING, window)] * cfg.num_hidden_layers
    return [(t, None) for t in types] or [("full_attention", None)] * cfg.num_hidden_layers


def trained_causal(cfg: DrafterConfig) -> bool | None:
    """The causality the config declares for every layer (top-level `is_causal`, else
    `dflash_config.causal`); None where it declares none (nothing to judge)."""
    if cfg.is_causal_declared is not None:
        return cfg.is_causal_declared
    return cfg.dflash_causal


def _verdict(trained: int | None, served: int | None) -> Verdict:
    if trained == served:
        return "as_trained"
    if served is None:
        return "wider"
    if trained is None:
        return "clamped"
    return "wider" if served > trained else "truncated"


def _span(layer: int, kind: str, trained: int | None, served: VllmLayer) -> LayerSpan:
    w = served.sliding_window
    return LayerSpan(layer, kind, trained, w, w, _verdict(trained, w))


def _row(s: LayerSpan, want: bool | None, causal: bool) -> str:
    trained = s.describe_trained() + ("" if want is None else _causal_word(want))
    served = s.describe_served() + _causal_word(causal)
    return f"({s.layer_type}): trained {trained}, served {served}"


def _causal_word(causal: bool) -> str:
    return ", causal" if causal else ", bidirectional in the block"


def table(spans: list[LayerSpan], served: list[VllmLayer], want: bool | None) -> str:
    """One line per group of alike layers: trained vs served window and causality."""
    groups: dict[str, list[LayerSpan]] = {}
    for s, built in zip(spans, served, strict=True):
        groups.setdefault(_row(s, want, built.causal), []).append(s)
    return "; ".join(
        f"layer{'s' if len(ls) > 1 else ''} {layer_list(ls)} {row}" for row, ls in groups.items()
    )


@check(
    "DFD310",
    "vllm-draft-layers-served-differently",
    Severity.WARNING,
    needs=("vllm_launch", "drafter"),
    engine="vllm",
)
def vllm_draft_layers_served_differently(facts: HostFacts) -> list[Finding]:
    """vLLM serves some DFlash draft layers with another window or causality than declared.

    **What it finds.** Per draft layer, the span and causality its config declares it was
    trained with (`layer_types` with the top-level `sliding_window`; `dflash_config.use_swa`
    with `swa_window_size` when no layer is typed sliding; the top-level `is_causal`, else
    `dflash_config.causal`) against what the running vLLM release builds and serves. Two
    readings of vLLM's differ: it takes `dflash_config.swa_window_size` before the top-level
    `sliding_window` for every sliding layer (all releases read), and 0.27.1 never reads the
    top-level `is_causal` (causal then comes from `dflash_config.causal`, else "sliding
    layers causal, full ones not"). Refusals are other checks' (DFD300, DFD302, DFD307).

    **Why it hurts.** A layer served over another window, or bidirectionally where it was
    trained causal (or the reverse), drafts outside its training: acceptance falls, most on
    long prompts, and nothing is logged.

    **Example.** A drafter with five `sliding_attention` layers, `sliding_window: 2048`
    (`use_sliding_window: true`) and a stale `dflash_config.swa_window_size: 4096`: vLLM
    serves those layers 4096 tokens. Or `is_causal: true` alone on vLLM 0.27.1: the full
    layer is served bidirectional in the block.

    **How to fix.** Window: make `dflash_config.swa_window_size` the training window (or
    remove it) in the drafter's `config.json`. Causality on 0.27.1: upgrade vLLM to 0.28.0+,
    or write the same value as `dflash_config.causal`. Relaunch.

    **Fix safety.** Needs review: which window the drafter was trained on is its trainer's
    word (model card, training config); the config edit changes a model file (keep a copy).

    **Versions.** vLLM 0.27.1-0.34.0. Window precedence
    (vllm/model_executor/models/qwen3_dflash.py 0.27.1:137-139, 0.28.0:160-162,
    0.29.0:140-142, 0.30.0:141-143, 0.31.0:171-173, 0.32.0:171-173, 0.33.0:147-149,
    0.34.0:178-180). `is_causal` read from 0.28.0
    (vllm/model_executor/models/qwen3_dflash.py 0.28.0:58-67), where 0.27.1 reads only
    `dflash_config.causal` (vllm/model_executor/models/qwen3_dflash.py 0.27.1:58-64).
    Served = built on both runners: the V1 runner's one causality
    (vllm/v1/spec_decode/dflash.py 0.27.1:79-81), V2's per group
    (vllm/v1/worker/gpu/spec_decode/dflash/speculator.py 0.34.0:327-332).
    """
    vllm_dflash(facts)
    cfg = drafter(facts)
    refused = runner_refuses(facts, cfg)
    if refused:
        raise Skip(refused)
    version = parse_version(facts.vllm_version.value or "")
    reads_is_causal = version is None or version >= IS_CAUSAL_READ
    try:
        served = vllm_layers(cfg, reads_is_causal=reads_is_causal)
    except FactError as e:
        raise Unjudged(str(e)) from None  # DFD302 reports vLLM's own refusal
    trained = trained_layers(cfg)
    if len(trained) != len(served):
        raise Skip("layer_types and num_hidden_layers disagree")
    want = trained_causal(cfg)
    spans = [_span(i, k, w, s) for i, ((k, w), s) in enumerate(zip(trained, served, strict=True))]
    off_window = [s for s in spans if s.verdict != "as_trained"]
    pairs = zip(spans, served, strict=True)
    off_causal = [s for s, b in pairs if want is not None and b.causal != want]
    if not off_window and not off_causal:
        return []
    fixes = []
    if off_window:
        fixes.append(_window_fix(cfg))
    if off_causal:
        fixes.append(_causal_fix(want))
    return [
        vllm_draft_layers_served_differently.finding(
            title=f"vLLM serves draft layer(s) {layer_list(off_window + off_causal)} "
            "differently from their training",
            message=_message(off_window, off_causal, facts.vllm_version.value),
            evidence=_evidence(
                facts,
                cfg,
                table(spans, served, want),
                "swa_window_size" if off_window else "is_causal",
            ),
            fixes=fixes,
        )
    ]


def _message(off_window: list[LayerSpan], off_causal: list[LayerSpan], version: str | None) -> str:
    said = []
    if off_window:
        s = off_window[0]
        said.append(
            f"layer(s) {layer_list(off_window)} trained over {s.describe_trained()} are served "
            f"{s.describe_served()} (vLLM takes dflash_config.swa_window_size first)"
        )
    if off_causal:
        said.append(
            f"layer(s) {layer_list(off_causal)} are served with the other causality: vLLM "
            f"{version or '0.27.1'} does not read the top-level is_causal"
        )
    return "; ".join(said) + "."


def _evidence(facts: HostFacts, cfg: DrafterConfig, rows: str, key: str) -> list[Evidence]:
    """The config's keys (at the line of the one that differs), the per-layer table, the
    release and the runner."""
    evidence = [
        config_evidence(
            cfg,
            key,
            f"sliding_window={cfg.effective_sliding_window}, dflash_config.swa_window_size="
            f"{cfg.swa_window_size}, is_causal={cfg.is_causal_declared}, "
            f"dflash_config.causal={cfg.dflash_causal}",
        ),
        Evidence(kind="derived", text=rows),
    ]
    if facts.vllm_version.value is not None:
        evidence.append(version_evidence(facts))
    else:
        evidence.append(Evidence(kind="derived", text="vLLM release not known: judged as 0.28.0+"))
    evidence.append(Evidence(kind="derived", text=f"runner: {runner(facts)}"))
    return evidence


def runner_refuses(facts: HostFacts, cfg: DrafterConfig) -> str | None:
    """Why vLLM will not start this draft on the runner the launch forces (DFD300 reports
    it), else None: 0.34.0 refuses any variable but `1`; V1 refuses mixed drafters."""
    launch = facts.vllm_launch.value
    value = launch.environ.get(RUNNER_ENV) if launch is not None else None
    if value is None or value == "1":
        return None
    version = parse_version(facts.vllm_version.value or "")
    if version is not None and version >= V1_REMOVED:
        return f"vLLM {facts.vllm_version.value} refuses {RUNNER_ENV}={value} (DFD300)"
    sliding, layers = mixed_layers(cfg)
    if runner_value(value) is not True and 0 < sliding < layers:
        return "the V1 runner refuses this mixed sliding/full drafter (DFD300)"
    return None


def runner(facts: HostFacts) -> str:
    """Which model runner serves the draft, as far as the launch says; the served spans are
    the same on both for every drafter that starts (the module's docstring)."""
    launch = facts.vllm_launch.value
    value = launch.environ.get(RUNNER_ENV) if launch is not None else None
    version = parse_version(facts.vllm_version.value or "")
    if version is not None and version >= V1_REMOVED:
        return "V2 (the only one from 0.34.0)"
    if value is None:
        return f"the one vLLM picks ({RUNNER_ENV} unset)"
    return f"V2 ({RUNNER_ENV}={value})" if runner_value(value) else f"V1 ({RUNNER_ENV}={value})"


def _window_fix(cfg: DrafterConfig) -> Fix:
    window = cfg.effective_sliding_window
    note = (
        f"set dflash_config.swa_window_size to the training window ({window} as sliding_window "
        "declares) or remove it from the drafter's config.json, then relaunch"
        if window is not None
        else "make dflash_config.swa_window_size the drafter's training window, then relaunch"
    )
    return Fix(action="manual", note=note)


def _causal_fix(want: bool | None) -> Fix:
    value = "true" if want else "false"
    return Fix(
        action="manual",
        note=f"upgrade vLLM to {IS_CAUSAL_UPGRADE}+ (reads is_causal), or add "
        f'"causal": {value} to the drafter\'s dflash_config, then relaunch',
    )
