"""DFD160: a quantized drafter whose quantized tensors SGLang's DFlash loader drops."""

from __future__ import annotations

from dflash_doctor.checks.base import Evidence, Finding, Fix, Severity, Skip, Unjudged, check
from dflash_doctor.checks.views import config_evidence, drafter, require_dflash, version_evidence
from dflash_doctor.facts.models import DrafterConfig, DrafterFiles, HostFacts
from dflash_doctor.sglang_versions import format_version, parse_version

# The Nemotron-3.5 draft layout (speculative/dflash_utils.py is_nemotron_35_draft_config,
# 0.5.19:469-506) is the one DFlash drafter SGLang builds quantizable, from 0.5.19.
NEMOTRON_QUANT_SINCE = (0, 5, 19)
# From 0.5.15 the decoder layers receive quant_config (0.5.14 and older build them without).
LAYERS_GET_QUANT_CONFIG_SINCE = (0, 5, 15)


@check("DFD160", "quantized-drafter-ignored", Severity.ERROR, needs=("drafter",))
def quantized_drafter_ignored(facts: HostFacts) -> list[Finding]:
    """A quantized drafter: SGLang's DFlash loader drops its quantized tensors silently.

    **What it finds.** A drafter whose `config.json` has a `quantization_config`, or whose
    `model.safetensors.index.json` names packed or quantized tensors (`*.weight_packed`,
    `*.weight_scale`, `*.qweight`, `*.qzeros`, `*.input_scale`, ...), on a release that
    does not build that drafter quantized. Only the Nemotron-3.5 draft layout
    (`is_nemotron_35_draft_config`: `has_embed_tokens`, no `has_lm_head`,
    `quant_algo: W4A16_NVFP4`, `eagle_aux_hidden_state_layer_ids` one past
    `target_layer_ids`, `sample_from_anchor: false`) is built quantized, from 0.5.19.
    An index that is present but cannot be read (too large, not JSON), beside a config
    without `quantization_config`, leaves the check unjudged rather than passed.

    **Why it hurts.** The server starts and logs nothing alarming, but the drafter's
    projection `fc` is a plain `nn.Linear` and every tensor name the model has no parameter
    for is skipped (`# Ignore unexpected weights`): the packed weights never load, the
    layers keep uninitialised or unscaled values, and acceptance sits near 1.0
    (sgl-project/sglang#39087). 0.5.11-0.5.14 build the decoder layers without
    `quant_config` at all; 0.5.15-0.5.23 pass it but under bare prefixes (`qkv_proj`,
    not `layers.N.self_attn.qkv_proj`) and keep `fc` unquantized.

    **Example.** A compressed-tensors W4A16 export of a Qwen3 DFlash drafter
    (`layers.0.self_attn.q_proj.weight_packed`, `fc.weight_scale`) on SGLang 0.5.23.

    **How to fix.** Serve the drafter's unquantized (bf16) checkpoint; a drafter is small
    next to its target, so quantizing it saves little. A Nemotron-3.5 draft needs SGLang
    0.5.19 or newer.

    **Fix safety.** Manual: it changes the model the server loads. The bf16 drafter's
    memory is the draft pool's weights only (a few GiB at most).

    **Versions.** Every release 0.5.11-0.5.23 skips names it does not expect
    (models/dflash.py 0.5.11:381-383, 0.5.23:944-946) and builds a non-Nemotron `fc` as
    `nn.Linear` (models/dflash.py 0.5.11:288, 0.5.23:771-774); 0.5.11-0.5.14 build the
    layers without quant_config (models/dflash.py 0.5.11:217-219); from 0.5.22
    `supports_quantization = False` names it (models/dflash.py 0.5.23:685,707,736-740).
    Nemotron-3.5 quantized path: models/dflash.py 0.5.19:569,624-632 and
    speculative/dflash_utils.py 0.5.19:469-506.
    """
    require_dflash(facts)
    cfg = drafter(facts)
    files = facts.drafter_files.value
    quantized = files is not None and files.quantized_tensors > 0
    if cfg.quantization is None and not quantized:
        if files is not None and files.index_error is not None:
            # The index is there but could not be read: its tensor names are unknown, and a
            # packed export need not carry a quantization_config.
            raise Unjudged(f"the drafter's weight index could not be read: {files.index_error}")
        # Without an index (a single-file checkpoint) the config alone says it: quantizers
        # write a quantization_config for transformers to load the checkpoint at all.
        return []
    version = parse_version(facts.sglang_version.value or "")
    if cfg.nemotron_35_draft:
        if version is None:
            raise Skip("a Nemotron-3.5 draft: quantized from 0.5.19, and the version is unknown")
        if version >= NEMOTRON_QUANT_SINCE:
            return []
    return [_finding(facts, cfg, files, version)]


def _finding(
    facts: HostFacts,
    cfg: DrafterConfig,
    files: DrafterFiles | None,
    version: tuple[int, int, int] | None,
) -> Finding:
    """The finding: what says the drafter is quantized, and what this release does."""
    evidence: list[Evidence] = []
    if cfg.quantization is not None:
        evidence.append(
            config_evidence(cfg, "quantization_config", f"quantization_config: {cfg.quantization}")
        )
    if files is not None and files.quantized_tensors and files.index_path:
        evidence.append(
            Evidence(
                kind="config",
                text=f"{files.quantized_tensors} of {files.tensors} tensors are quantized "
                f"or packed (e.g. {', '.join(files.quantized_names[:3])})",
                file=files.index_path,
                key="weight_map",
            )
        )
    if version is not None:
        evidence.append(version_evidence(facts))
    layers = (
        "builds the decoder layers without quant_config"
        if version is not None and version < LAYERS_GET_QUANT_CONFIG_SINCE
        else "keeps the drafter's fc an unquantized nn.Linear"
    )
    label = f"SGLang {format_version(version)}" if version is not None else "SGLang"
    if cfg.nemotron_35_draft:
        fixes = [Fix(action="upgrade_sglang", value=format_version(NEMOTRON_QUANT_SINCE))]
    else:
        fixes = [Fix(action="manual", note="serve the drafter's unquantized (bf16) checkpoint")]
    return quantized_drafter_ignored.finding(
        title="Quantized drafter: SGLang drops its quantized tensors without a word",
        message=(
            f"{label} {layers} and skips every tensor name the DFlash draft model has no "
            "parameter for, so the quantized weights never load; the server starts, and "
            "acceptance sits near 1.0. Only the Nemotron-3.5 draft layout is built "
            f"quantized (from {format_version(NEMOTRON_QUANT_SINCE)})."
        ),
        evidence=evidence,
        impact={"Expected acceptance length": "about 1.0 (drafts rejected)"},
        fixes=fixes,
    )
