"""Checks that the drafter fits the target model it drafts for."""

from __future__ import annotations

from dflash_doctor.checks.base import Evidence, Finding, Fix, Severity, Skip, check
from dflash_doctor.checks.views import config_evidence, drafter, require_dflash
from dflash_doctor.facts.models import DrafterConfig, HostFacts, TargetConfig


@check("DFD106", "drafter-target-mismatch", Severity.ERROR, needs=("drafter", "target"))
def drafter_target_mismatch(facts: HostFacts) -> list[Finding]:
    """The drafter was built for another target: layer ids out of range, or hidden sizes differ.

    **What it finds.** A DFlash drafter conditions on hidden states tapped from target
    layers `dflash_config.target_layer_ids`, and shares the target's hidden size. This check
    fires when a layer id is not a layer of the target (`>= num_hidden_layers`), when the
    drafter's `num_target_layers` differs from the target's layer count, or when the
    drafter's `hidden_size` differs from the target's.

    **Why it hurts.** Out-of-range layer ids fail at load or, worse, tap the wrong layers;
    a drafter for a different target proposes tokens the target rarely accepts. Hidden
    sizes that differ do not run at all: the drafter's `fc` projects
    `len(target_layer_ids) x hidden_size` features and SGLang raises `DFLASH target_hidden
    feature dim mismatch.` as soon as the draft model runs on the target's hidden states.

    **Example.** z-lab's Qwen3-4B-DFlash-b16 (hidden size 2560)
    served beside Qwen3-8B (hidden size 4096): the hidden sizes differ.

    **How to fix.** Use the drafter released for this target model (the drafter's model
    card names it), or point `--model-path` at the target the drafter was trained on.

    **Fix safety.** Manual: the tool cannot know which drafter was meant; changing the
    model pair changes what the server serves.

    **Versions.** Every release 0.5.11-0.5.23: SGLang refuses a layer id outside the
    target (`DFLASH target_layer_ids contains an out-of-range layer id.`,
    `speculative/dflash_utils.py` 0.5.11:307, 0.5.23:582); a hidden-size mismatch raises in
    `project_target_hidden` (`models/dflash.py` 0.5.11:298-300, 0.5.23:833-835; a crash signature
    DFD152 knows in a log); a layer-count mismatch is not checked by SGLang and only costs
    acceptance.
    """
    require_dflash(facts)
    cfg = drafter(facts)
    target = facts.target.value
    assert target is not None
    target_evidence = Evidence(
        kind="config",
        text=f"target num_hidden_layers={target.num_hidden_layers}, "
        f"hidden_size={target.hidden_size}",
        file=target.path,
        line=target.key_lines.get("num_hidden_layers"),
        key="num_hidden_layers",
    )
    fix = Fix(action="manual", note="use the drafter trained for this target model")
    findings = [
        drafter_target_mismatch.finding(
            title=title, message=message, evidence=[evidence, target_evidence], fixes=[fix]
        )
        for title, message, evidence in _mismatches(cfg, target)
    ]
    if not cfg.target_layer_ids and not findings and cfg.num_target_layers is None:
        raise Skip("drafter declares neither target_layer_ids nor num_target_layers")
    return findings


def _mismatches(cfg: DrafterConfig, target: TargetConfig) -> list[tuple[str, str, Evidence]]:
    """Each way the drafter does not fit the target: (title, message, drafter evidence)."""
    found: list[tuple[str, str, Evidence]] = []
    ids = cfg.target_layer_ids or []
    bad = [i for i in ids if i < 0 or i >= target.num_hidden_layers]
    if bad:
        found.append(
            (
                "target_layer_ids out of range of the target model",
                f"dflash_config.target_layer_ids {bad} are not layers of the target "
                f"(layers 0-{target.num_hidden_layers - 1}).",
                config_evidence(cfg, "target_layer_ids", f"target_layer_ids={ids}"),
            )
        )
    if cfg.num_target_layers is not None and cfg.num_target_layers != target.num_hidden_layers:
        found.append(
            (
                "Drafter was trained for a target with another layer count",
                f"The drafter's num_target_layers={cfg.num_target_layers}, but the target "
                f"has {target.num_hidden_layers} layers.",
                config_evidence(
                    cfg, "num_target_layers", f"num_target_layers={cfg.num_target_layers}"
                ),
            )
        )
    if cfg.hidden_size != target.hidden_size:
        found.append(
            (
                "Drafter and target hidden sizes differ",
                f"Drafter hidden_size={cfg.hidden_size}, target hidden_size={target.hidden_size}: "
                "SGLang raises `DFLASH target_hidden feature dim mismatch.` as soon as the "
                "draft model runs (models/dflash.py project_target_hidden).",
                config_evidence(cfg, "hidden_size", f"hidden_size={cfg.hidden_size}"),
            )
        )
    return found
