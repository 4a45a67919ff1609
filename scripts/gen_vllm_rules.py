"""Generate dflash_doctor/data/vllm_rules.json from vLLM's published wheels.

    python3 scripts/gen_vllm_rules.py [--wheels /work/wheels/vllm/src] [--check]

Two lists, both read from the wheels (never importing vLLM):

- TEXTS: every vLLM text a vLLM check reads or quotes, one Spec line each (an id, a needle
  as vLLM writes it, the files it is looked for in, relative to the `vllm/` package) and,
  for crash texts, what it means and the fix. scripts/gen_log_patterns.py's reader finds
  each text's formats per release with file:line and a regex, exactly as for SGLang.
- RULES: the version-keyed failures of issue 29, one Rule line each: the check that
  applies it, the release range, the texts that must be in every release of the range
  (`present`) and in none (`absent`), what vLLM does and the fix. A rule whose range the
  wheels do not back (a present text missing from a release of it, an absent one found)
  is an error: no rule is written that the source does not show.

`--check` exits 1 when the committed file differs from what the wheels give.
"""

# ruff: noqa: E501  (TEXTS and RULES keep each vLLM text and its advice whole, one line each)
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_log_patterns import Spec, generate, version_key

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "dflash_doctor" / "data" / "vllm_rules.json"
WHEELS = Path("/work/wheels/vllm/src")

_SPEC = ("config/speculative.py",)
_VLLM = ("config/vllm.py",)
_DFLASH = ("model_executor/models/qwen3_dflash.py",)

TEXTS: tuple[Spec, ...] = (
    # The draft's positions (DFD305) ---------------------------------------------------------
    # 0.27.1-0.32.0 raise only EAGLE drafts' max_position_embeddings (the line says so) ...
    Spec(
        "positions_raised_eagle", "fact", "EAGLE drafts share the target's positional space", _SPEC
    ),
    # ... 0.33.0+ every draft but an independent model whose RoPE only sizes its cache.
    Spec("positions_raised", "fact", "the draft shares the target's positional space", _SPEC),
    Spec(
        "max_model_len_lowered",
        "warning",
        "The draft model's max_model_len (%d) is smaller than the target",
        _VLLM,
    ),
    # Prefix caching (DFD306) ----------------------------------------------------------------
    Spec(
        "block_drop_disabled",
        "warning",
        "EAGLE trailing prefix-cache block dropping is disabled.",
        ("v1/core/sched/scheduler.py",),
    ),
    Spec(
        "block_drop_not_dflash",
        "source",
        "DFlash/DSpark build it from the target hidden state",
        _SPEC,
    ),
    # DFlash 2 checkpoints and the V1 runner (DFD307) ---------------------------------------
    Spec(
        "dflash2_architecture",
        "source",
        "DFlash2DraftModel",
        ("model_executor/models/registry.py",),
    ),
    Spec(
        "v1_refuses",
        "crash",
        "Model Runner V1 does not support: {",
        _VLLM,
        meaning="vLLM refuses the launch at start-up: the V1 model runner was chosen (VLLM_USE_V2_MODEL_RUNNER=0, or V2 unsupported) for a feature only V2 has.",
        workaround="unset VLLM_USE_V2_MODEL_RUNNER (or set it to 1) and drop what keeps the V2 runner off",
    ),
    Spec(
        "v1_dflash2",
        "crash",
        "dflash2 drafts",
        _VLLM,
        meaning="a DFlash 2 checkpoint (DFlash2DraftModel) on the V1 model runner, which has no DFlash 2 candidate selector.",
        workaround="unset VLLM_USE_V2_MODEL_RUNNER (or set it to 1): vLLM serves DFlash 2 drafts on the V2 runner",
    ),
    Spec(
        "v1_candidate_head",
        "crash",
        "DFlash candidate-head drafts",
        _VLLM,
        meaning="a DFlash 2 (or LiLiCorr) candidate-head checkpoint on the V1 model runner, which has no candidate head.",
        workaround="unset VLLM_USE_V2_MODEL_RUNNER (or set it to 1): vLLM serves these drafts on the V2 runner",
    ),
    # Crash texts on DFlash paths (DFD308) ---------------------------------------------------
    Spec(
        "mixed_needs_v2",
        "crash",
        "DFlash drafters with mixed sliding/full attention require the V2 model runner",
        _DFLASH,
        meaning="a DFlash drafter mixing sliding and full attention layers on the V1 model runner.",
        workaround="unset VLLM_USE_V2_MODEL_RUNNER (or set it to 1) and relaunch",
    ),
    Spec(
        "window_missing",
        "crash",
        "DFlash sliding attention requires a window size configured in",
        _DFLASH,
        meaning="the drafter has sliding layers but no window (neither dflash_config.swa_window_size nor sliding_window).",
        workaround="set dflash_config.swa_window_size in the drafter's config.json to its training window",
    ),
    Spec(
        "aux_hidden_mismatch",
        "crash",
        "concatenated aux hidden features but received",
        _DFLASH,
        meaning="the drafter's target_layer_ids name hidden states the target does not hand over: the drafter was trained for another target.",
        workaround="serve the drafter with the target it was trained for (its model card), or a drafter trained for this target",
    ),
    Spec(
        "mask_embedding_mismatch",
        "crash",
        "mask_token_id does not match dflash_config.mask_token_id",
        _DFLASH,
        meaning="the drafter's mask embedding file was trained with another mask token than its config names.",
        workaround="use the drafter's files from one revision (config.json and the mask embedding together)",
    ),
    Spec(
        "dcp_sliding",
        "crash",
        "use sliding-window attention, which cannot run at decode_context_parallel_size",
        ("v1/worker/gpu/spec_decode/dflash/speculator.py",),
        meaning="sliding-window draft layers under decode context parallelism.",
        workaround='add "draft_decode_context_parallel_size": 1 to --speculative-config',
    ),
    Spec(
        "v1_removed",
        "crash",
        "is no longer supported: Model Runner V1 has been removed",
        ("platforms/interface.py",),
        meaning="VLLM_USE_V2_MODEL_RUNNER is set to something other than 1 on a release without the V1 runner.",
        workaround="unset VLLM_USE_V2_MODEL_RUNNER (or set it to 1)",
    ),
)


@dataclass(frozen=True)
class Rule:
    id: str
    check: str
    first: str
    last: str
    present: tuple[str, ...]
    absent: tuple[str, ...]
    does: str
    fix: str


RULES: tuple[Rule, ...] = (
    Rule(
        "long_prompt_dies",
        "DFD305",
        "0.27.1",
        "0.32.0",
        ("positions_raised_eagle",),
        ("positions_raised",),
        "only EAGLE drafts have max_position_embeddings raised to the target's max_model_len: a DFlash drafter's rotary cache keeps its own length while positions up to the target's max_model_len reach it, so the first prompt past the drafter's positions reads past the cache and the engine dies (vLLM writes no text of its own for it)",
        "launch with --max-model-len at most the drafter's max_position_embeddings, or upgrade to vLLM 0.33.0 or later",
    ),
    Rule(
        "positions_raised",
        "DFD305",
        "0.33.0",
        "0.34.0",
        ("positions_raised", "max_model_len_lowered"),
        ("positions_raised_eagle",),
        "a drafter whose RoPE types only size its rotary cache (default, linear, llama3, ntk, proportional) has max_position_embeddings raised to the target's max_model_len and logs the override: it serves, but drafts positions it never trained",
        "keep --max-model-len within the drafter's trained positions where long prompts matter, or use a drafter trained for the served length",
    ),
    Rule(
        "max_model_len_lowered",
        "DFD305",
        "0.33.0",
        "0.34.0",
        ("max_model_len_lowered",),
        ("positions_raised_eagle",),
        "a drafter with another RoPE type (yarn, dynamic, longrope, ...) keeps its positions and vLLM lowers the server's max_model_len to the drafter's with a warning (0.33.0: on the V2 runner only; on V1 the first long prompt dies as before)",
        "launch with --max-model-len at most the drafter's, or use a drafter trained for the served length",
    ),
    Rule(
        "block_drop_disabled",
        "DFD306",
        "0.30.0",
        "0.32.0",
        ("block_drop_disabled",),
        ("block_drop_not_dflash",),
        "DFlash counts as EAGLE for prefix caching: `disable_eagle_block_drop: true` keeps the trailing prefix-cache block on a cache hit, which vLLM warns is experimental and may affect acceptance",
        'remove "disable_eagle_block_drop" from --speculative-config (or launch with --no-enable-prefix-caching)',
    ),
    Rule(
        "block_drop_not_dflash",
        "DFD306",
        "0.33.0",
        "0.34.0",
        ("block_drop_not_dflash",),
        (),
        "DFlash needs no trailing-block drop (its draft KV depends on the target hidden state alone): `disable_eagle_block_drop` changes nothing for it and prefix caching is left on",
        "",
    ),
    Rule(
        "dflash2_unknown",
        "DFD307",
        "0.27.1",
        "0.27.1",
        (),
        ("dflash2_architecture",),
        "no DFlash2DraftModel in the model registry: the DFlash 2 checkpoint is not loaded as DFlash 2",
        "upgrade to vLLM 0.28.0 or later (DFlash 2 from 0.28.0, on the V2 runner)",
    ),
    Rule(
        "dflash2_v1_silent",
        "DFD307",
        "0.28.0",
        "0.28.0",
        ("dflash2_architecture",),
        ("v1_dflash2", "v1_candidate_head"),
        "VLLM_USE_V2_MODEL_RUNNER=0 keeps the V1 runner, whose DFlashProposer never calls the DFlash 2 candidate selector: the checkpoint is served as DFlash 1 with no message",
        "unset VLLM_USE_V2_MODEL_RUNNER (or set it to 1): vLLM then moves DFlash 2 drafts to the V2 runner itself",
    ),
    Rule(
        "dflash2_v1_refused",
        "DFD307",
        "0.29.0",
        "0.30.0",
        ("v1_dflash2", "v1_refuses"),
        ("v1_candidate_head",),
        "the V1 runner refuses the DFlash 2 checkpoint at start-up",
        "unset VLLM_USE_V2_MODEL_RUNNER (or set it to 1)",
    ),
    Rule(
        "candidate_head_v1_refused",
        "DFD307",
        "0.31.0",
        "0.33.0",
        ("v1_candidate_head", "v1_refuses"),
        ("v1_dflash2",),
        "the V1 runner refuses the DFlash 2 (candidate-head) checkpoint at start-up",
        "unset VLLM_USE_V2_MODEL_RUNNER (or set it to 1)",
    ),
    Rule(
        "v1_removed",
        "DFD307",
        "0.34.0",
        "0.34.0",
        ("v1_removed",),
        ("v1_refuses",),
        "the V1 runner is gone: any VLLM_USE_V2_MODEL_RUNNER but 1 is refused at start-up",
        "unset VLLM_USE_V2_MODEL_RUNNER (or set it to 1)",
    ),
)


def _in_range(v: str, rule: Rule) -> bool:
    return version_key(rule.first) <= version_key(v) <= version_key(rule.last)


def verified_rules(texts: dict[str, object], versions: list[str]) -> list[dict[str, object]]:
    """Each rule with the texts' sites in its range; SystemExit where the wheels disagree."""
    by_id = {p["id"]: p for p in texts["patterns"]}  # type: ignore[attr-defined]
    out = []
    for rule in RULES:
        span = [v for v in versions if _in_range(v, rule)]
        if not span or span[0] != rule.first or span[-1] != rule.last:
            raise SystemExit(f"{rule.id}: {rule.first}..{rule.last} are not both releases read")
        cited: dict[str, list[str]] = {}
        for tid in (*rule.present, *rule.absent):
            sites = {v: s for f in by_id[tid]["formats"] for v, s in f["sites"].items()}
            for v in span:
                if (v in sites) != (tid in rule.present):
                    where = "missing from" if tid in rule.present else "found in"
                    raise SystemExit(f"{rule.id}: text {tid} {where} vLLM {v}")
            if tid in rule.present:
                cited[tid] = [f"vllm/{sites[v][0].replace(':', f' {v}:')}" for v in span]
        out.append(
            {
                **rule.__dict__,
                "present": list(rule.present),
                "absent": list(rule.absent),
                "cited": cited,
            }
        )
    return out


def build(wheels: Path) -> dict[str, object]:
    texts = generate(wheels, "vllm", TEXTS)
    versions = [str(v) for v in texts["releases"]]  # type: ignore[attr-defined]
    return {
        "generated_by": "scripts/gen_vllm_rules.py from the vLLM wheels of every release",
        "releases": versions,
        "patterns": texts["patterns"],
        "rules": verified_rules(texts, versions),
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--wheels", type=Path, default=WHEELS)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    text = json.dumps(build(args.wheels), indent=1) + "\n"
    if args.check:
        return 0 if OUT.is_file() and OUT.read_text() == text else 1
    OUT.write_text(text)
    print(f"wrote {OUT} ({len(TEXTS)} texts, {len(RULES)} rules)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
