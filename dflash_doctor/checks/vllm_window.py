"""A DFlash drafter's sliding layers without a window, as vLLM builds them."""

from __future__ import annotations

from dflash_doctor.checks.base import Finding, Fix, Severity, Unjudged, check
from dflash_doctor.checks.views import config_evidence, drafter
from dflash_doctor.checks.vllm_views import vllm_dflash
from dflash_doctor.errors import FactError
from dflash_doctor.facts.models import HostFacts
from dflash_doctor.facts.vllm_drafter import WINDOW_REFUSAL, sliding_flags, vllm_layers


@check(
    "DFD302",
    "vllm-dflash-window-missing",
    Severity.ERROR,
    needs=("vllm_launch", "drafter"),
    engine="vllm",
)
def vllm_dflash_window_missing(facts: HostFacts) -> list[Finding]:
    """vLLM builds sliding DFlash draft layers that have no window, and refuses to load.

    **What it finds.** A layer of the DFlash drafter is sliding as vLLM resolves it
    (`layer_types`, or `dflash_config.use_swa` when no layer type says sliding), but
    neither `dflash_config.swa_window_size` nor the top-level `sliding_window` (as
    transformers resolves it: Qwen3Config drops it unless `use_sliding_window` is true)
    gives a window.

    **Why it hurts.** vLLM raises `ValueError: DFlash sliding attention requires a window
    size configured in dflash_config.swa_window_size or the top-level sliding_window.`
    while building the drafter: the server does not start.

    **Example.** A Qwen3-style drafter with five `sliding_attention` layers and
    `sliding_window: 2048`, but `use_sliding_window: false`: transformers hands vLLM
    `sliding_window = None`.

    **How to fix.** Give the window the drafter was trained with as
    `dflash_config.swa_window_size` in its `config.json` (or set `use_sliding_window: true`
    beside `sliding_window`), and relaunch.

    **Fix safety.** Needs review: the window must be the one used in training (its
    trainer's config or model card); a guessed window serves the drafter out of
    distribution.

    **Versions.** Every vLLM release read, 0.27.1-0.34.0: the config copy
    (vllm/transformers_utils/configs/eagle.py 0.27.1:83-86, 0.34.0:85-88) and the
    refusal (vllm/model_executor/models/qwen3_dflash.py 0.27.1:136-144, 0.28.0:159-167,
    0.29.0:139-147, 0.30.0:140-148, 0.31.0:170-178, 0.32.0:170-178, 0.33.0:146-154,
    0.34.0:177-185).
    """
    vllm_dflash(facts)
    cfg = drafter(facts)
    try:
        vllm_layers(cfg)
        return []
    except FactError as e:
        if str(e) != WINDOW_REFUSAL:
            raise Unjudged(str(e)) from None
    sliding = [i for i, s in enumerate(sliding_flags(cfg)) if s]
    shown = f"{len(sliding)} of {cfg.num_hidden_layers} layers are sliding as vLLM builds them"
    key = "layer_types" if cfg.layer_types_source == "config" else "dflash_config"
    return [
        vllm_dflash_window_missing.finding(
            title="vLLM will not load this DFlash drafter",
            message=f"{shown}, and no window is set: vLLM refuses it ({WINDOW_REFUSAL})",
            evidence=[
                config_evidence(cfg, key, shown),
                config_evidence(
                    cfg,
                    "sliding_window",
                    f"sliding_window={cfg.sliding_window}, use_sliding_window="
                    f"{str(cfg.use_sliding_window).lower()}, no dflash_config.swa_window_size",
                ),
            ],
            fixes=[
                Fix(
                    action="manual",
                    note="set dflash_config.swa_window_size to the drafter's training window",
                )
            ],
        )
    ]
