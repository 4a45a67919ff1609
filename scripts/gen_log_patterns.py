"""Generate dflash_doctor/data/log_patterns.json from SGLang's published wheels.

    python scripts/gen_log_patterns.py [--wheels /work/wheels/src] [--check]

Every SGLang log text that dflash-doctor reads is listed once in SPEC below: an id, a
needle (a piece of the text as SGLang writes it) and, for crash signatures, what it means
and the workaround. For each release unpacked under WHEELS/<version>/sglang this script
finds the string expressions that contain the needle (Python's parser joins implicit
concatenation, so a text split over source lines is found whole), and writes, per
pattern, the version ranges where each distinct format appears with its file:line and a
regex derived from the format. A needle found in no release is an error: a SPEC line that
the wheels do not back is never written.

Adding a pattern or a crash signature is one SPEC line; rerun, then add a test.
`--check` exits 1 when the committed file differs from what the wheels give.
"""

# ruff: noqa: E501  (SPEC rows keep each SGLang text and its advice whole, one entry each)
from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "dflash_doctor" / "data" / "log_patterns.json"
WHEELS = Path("/work/wheels/src")


@dataclass(frozen=True)
class Spec:
    id: str
    kind: str  # "fact" (read into LogFacts), "reject", "slow", "crash", "decode"
    needle: str
    files: tuple[str, ...] = ()  # restrict the search to these files (relative to sglang/)
    meaning: str = ""
    workaround: str = ""
    # f-string fields the caller always fills the same way (`field_name="DFLASH block_size"`
    # for a generic helper's text): put into the format before its regex is derived, so the
    # pattern matches only that use of the helper.
    fill: tuple[tuple[str, str], ...] = ()


_METRICS = (
    "srt/observability/scheduler_metrics_mixin.py",  # 0.5.11-0.5.12.post1
    "srt/managers/scheduler_components/metrics_reporter.py",  # 0.5.13 on
)

SPEC: tuple[Spec, ...] = (
    # Startup facts ------------------------------------------------------------------------
    Spec("server_args_dump", "fact", "server_args=", ("srt/entrypoints/engine.py",)),
    Spec("dflash_init", "fact", "Initialized DFLASH draft runner."),
    Spec("block_size_mismatch", "fact", "DFLASH block size mismatch"),
    Spec("backend_fallback_unsupported", "fact", "draft worker only supports attention_backend"),
    Spec("backend_fallback_trtllm", "fact", "DFLASH draft worker does not support 'trtllm_mha'"),
    Spec("backend_fallback_trtllm_layers", "fact", "DFLASH only enables 'trtllm_mha'"),
    Spec(
        "backend_fallback_platform",
        "fact",
        "DFLASH draft worker does not support attention_backend %r on %s",
    ),
    Spec("draft_max_position_override", "fact", "Overriding the draft model's max_position"),
    Spec("request_abort", "fact", "self.rid=", ("srt/managers/schedule_batch.py",)),
    # --speculative-adaptive turned off while ServerArgs is resolved (issue 25 item 5, DFD165),
    # for the algorithm: the reason `adaptive_unsupported_reason` gives it (every release,
    # srt/speculative/adaptive_spec_params.py), so the line names the algorithm it refused.
    Spec(
        "adaptive_disabled",
        "fact",
        "speculative_adaptive disabled: ",
        fill=(("reason", "speculative_algorithm={algorithm} (only EAGLE/EAGLE3 are supported)"),),
    ),
    # Decode lines: built piece by piece (msg += ...); each piece is cited.
    Spec("decode_head", "decode", "Decode batch{", _METRICS),
    Spec("decode_accept", "decode", "accept len: {", _METRICS),
    Spec("decode_tail", "decode", "gen throughput (token/s): {", _METRICS),
    # Requests DFLASH rejects (issue 11 item 1): logged by Req.set_finish_with_abort as
    # "{error_msg}, self.rid=..." and answered with HTTP 400 while the server stays healthy.
    Spec(
        "reject_return_logprob",
        "reject",
        "DFLASH speculative decoding does not support return_logprob yet.",
        meaning="requests asking for log probabilities (return_logprob / logprobs)",
        workaround="drop logprobs from these requests, or serve them without DFLASH",
    ),
    Spec(
        "reject_grammar",
        "reject",
        "DFLASH speculative decoding does not support grammar-constrained decoding yet.",
        meaning="structured-output requests (json_schema, regex, ebnf, structural_tag)",
        workaround="drop the constraint from these requests, or serve them without DFLASH",
    ),
    Spec(
        "reject_return_hidden_states",
        "reject",
        "DFLASH speculative decoding does not support return_hidden_states yet.",
        meaning="requests asking for hidden states while overlap scheduling is on",
        workaround="launch with --disable-overlap-schedule (DFLASH rejects them only with overlap scheduling) or drop return_hidden_states",
    ),
    # Silent slow paths (issue 11 item 4) ----------------------------------------------------
    Spec(
        "slow_draft_cuda_graph_off",
        "slow",
        "Disable DFLASH draft cuda graph because",
        meaning="the draft model runs eagerly, without CUDA graphs, on every step",
        workaround="leave more GPU memory after the target loads (lower --mem-fraction-static a little) so the draft graph fits; or drop what the message names (dp attention, an unsupported device)",
    ),
    Spec(
        "slow_fused_kv_sequential",
        "slow",
        "DFLASH fused KV initialization failed, falling back",
        meaning="draft KV materialisation runs layer by layer instead of the fused kernel",
        workaround="read the error after 'sequential path:' (usually a missing or mismatched sgl-kernel/triton build) and fix the install",
    ),
    Spec(
        "slow_selector_torch_topk",
        "slow",
        "flashinfer is unavailable; the DFlash2 selector",
        meaning="the DFlash2 candidate selector uses torch.topk (SGLang says it roughly halves end-to-end throughput on a large vocabulary)",
        workaround="install the flashinfer build that matches the host's torch/CUDA",
    ),
    Spec(
        "slow_max_running_48",
        "slow",
        "Max running requests is reset to 48",
        meaning="SGLang caps concurrent requests at 48 for DFLASH when --max-running-requests is not given: a load above 48 only queues",
        workaround="set --max-running-requests to the concurrency the host must serve (size the KV budget for it)",
    ),
    Spec(
        "slow_greedy_verify",
        "slow",
        "DFLASH non-greedy verification is unavailable on this build/device; falling back to greedy",
        meaning="sampled requests are verified with greedy argmax: outputs do not follow the requested sampling distribution",
        workaround="install the sgl-kernel build with the non-greedy verification kernels, or expect greedy outputs",
    ),
    # Crash signatures (issue 11 item 10): raise texts on DFLASH code paths ------------------
    Spec(
        "crash_pp_size",
        "crash",
        "DFLASH speculative decoding only supports pp_size == 1",
        meaning="SGLang refuses DFLASH with pipeline parallelism at start-up.",
        workaround="launch with --pp-size 1 (use tensor parallelism instead)",
    ),
    Spec(
        "crash_dp_attention",
        "crash",
        "DFLASH speculative decoding does not support dp",
        meaning="SGLang refuses DFLASH with DP attention at start-up.",
        workaround="remove --enable-dp-attention (0.5.23 accepts it on NPU with --enable-dp-lm-head)",
    ),
    Spec(
        "crash_no_draft_model",
        "crash",
        "DFLASH speculative decoding requires setting --speculative-draft-model-path",
        meaning="DFLASH was asked for without a drafter.",
        workaround="add --speculative-draft-model-path <drafter>",
    ),
    Spec(
        "crash_device",
        "crash",
        "DFLASH speculative decoding only supports CUDA and NPU devices",
        meaning="DFLASH was launched on a device SGLang does not serve it on (0.5.17-0.5.19).",
        workaround="serve DFLASH on CUDA or NPU, or drop --speculative-algorithm DFLASH",
    ),
    Spec(
        "crash_mask_token_outside_vocab",
        "crash",
        "DFLASH mask_token_id is outside the target vocab size",
        meaning="The drafter's mask token id is not in the target's vocabulary: drafter and target do not belong together.",
        workaround="serve the drafter trained for this target, or set dflash_config.mask_token_id to an id inside the target vocab",
    ),
    Spec(
        "crash_mask_embedding_mismatch",
        "crash",
        "DFLASH mask_embedding.pt was trained with mask_token_id=",
        meaning="The drafter's mask_embedding.pt was trained with another mask token id than the one resolved.",
        workaround="make dflash_config.mask_token_id match the id mask_embedding.pt was trained with",
    ),
    Spec(
        "crash_no_aux_hidden",
        "crash",
        "DFLASH requires target aux hidden capture for prefill",
        meaning="The target model did not capture the hidden states the drafter is conditioned on.",
        workaround="use a target architecture that implements set_dflash_layers_to_capture in the installed SGLang, or upgrade SGLang",
    ),
    Spec(
        "crash_layers_to_capture",
        "crash",
        "set_dflash_layers_to_capture, ",
        (
            "srt/model_executor/model_runner.py",
            "srt/model_executor/model_runner_components/attention_backend_setup.py",
        ),
        meaning="The installed SGLang cannot capture hidden states from this target architecture for DFLASH.",
        workaround="upgrade SGLang to a release whose target model file implements set_dflash_layers_to_capture",
    ),
    Spec(
        "crash_verify_no_hidden",
        "crash",
        "DFLASH verify requires target hidden states",
        meaning="The target forward returned no hidden states to verify against (target not wired for DFLASH).",
        workaround="check the target architecture is supported by the installed SGLang's DFLASH path",
    ),
    Spec(
        "crash_quantized_lm_head_tp",
        "crash",
        "DFLASH with a quantized target lm_head is only supported at",
        meaning="A quantized target lm_head is served with DFLASH only at tp=1 (0.5.18+).",
        workaround="serve with --tp-size 1 or an unquantized lm_head",
    ),
    # Start-up refusals after parsing (issue 21): ValueErrors SGLang raises from its
    # post-parse hooks and while building the draft model; checks/startup_refusals.py (DFD111)
    # predicts each from the launch and the configs, and quotes these texts.
    Spec(
        "crash_sliding_window_required",
        "crash",
        "DFLASH sliding_attention layers require config.sliding_window.",
        meaning="The drafter marks layers sliding_attention but its transformers config class leaves no sliding_window (0.5.14+ builds sliding layers from it).",
        workaround="set use_sliding_window: true (Qwen3Config drops sliding_window without it) or an explicit sliding_window in the drafter's config.json",
    ),
    Spec(
        "crash_window_positive_0511",
        "crash",
        "DFLASH requires --speculative-dflash-draft-window-size to be positive",
        meaning="The draft window is zero or negative (0.5.11 spelling).",
        workaround="set the draft window to the drafter's trained sliding_window, or remove the flag",
    ),
    Spec(
        "crash_window_positive",
        "crash",
        "--speculative-draft-window-size must be positive",
        meaning="The draft window is zero or negative.",
        workaround="set the draft window to the drafter's trained sliding_window, or remove the flag",
    ),
    Spec(
        "crash_window_below_block",
        "crash",
        "--speculative-num-draft-tokens (block_size)",
        meaning="The draft window is smaller than the DFlash block size (--speculative-num-draft-tokens, else the drafter's block_size, else 16).",
        workaround="raise the draft window to at least the block size, or remove the flag",
    ),
    Spec(
        "crash_sink_negative",
        "crash",
        "--speculative-draft-sink-size must be non-negative",
        meaning="The draft sink size is negative (0.5.21+).",
        workaround="remove --speculative-draft-sink-size, or set it to 0 or more",
    ),
    Spec(
        "crash_sink_without_window",
        "crash",
        "--speculative-draft-sink-size requires --speculative-draft-window-size.",
        meaning="A draft sink size is set without a draft window (0.5.21+).",
        workaround="remove --speculative-draft-sink-size, or set --speculative-draft-window-size too",
    ),
    Spec(
        "crash_block_size_positive",
        "crash",
        "DFLASH requires --speculative-dflash-block-size to be positive",
        meaning="--speculative-dflash-block-size is zero or negative.",
        workaround="set --speculative-num-draft-tokens to the drafter's block_size and drop --speculative-dflash-block-size",
    ),
    Spec(
        "crash_block_size_flags_differ",
        "crash",
        "but they differ. For DFLASH they must match.",
        meaning="--speculative-num-draft-tokens and its alias --speculative-dflash-block-size are both set, to different values.",
        workaround="keep one of the two flags, at the drafter's block_size",
    ),
    Spec(
        "crash_draft_block_size_positive",
        "crash",
        "must be {comparator}, got {parsed}.",
        ("srt/speculative/dflash_utils.py",),
        meaning="The drafter's block_size (dflash_config first, then the top level) is below 1: the draft model is not built.",
        workaround="set the drafter's block_size (dflash_config.block_size) to the block it was trained with",
        fill=(("field_name", "DFLASH block_size"),),
    ),
    Spec(
        "crash_draft_block_size_invalid",
        "crash",
        "Invalid {field_name}={value!r}.",
        ("srt/speculative/dflash_utils.py",),
        meaning="The drafter's block_size (dflash_config first, then the top level) is not an integer: the draft model is not built.",
        workaround="set the drafter's block_size (dflash_config.block_size) to the integer block it was trained with",
        fill=(("field_name", "DFLASH block_size"),),
    ),
    Spec(
        "crash_unsupported_layer_type",
        "crash",
        "Unsupported DFLASH draft layer type.",
        ("srt/models/dflash.py",),
        meaning="A drafter layer_types entry is neither sliding_attention nor full_attention (0.5.14+ builds each layer from it).",
        workaround="write each drafter layer as sliding_attention or full_attention in layer_types",
    ),
    Spec(
        "crash_target_layer_out_of_range",
        "crash",
        "DFLASH target_layer_ids contains an out-of-range layer id.",
        meaning="The drafter taps a target layer the target model does not have: drafter and target do not belong together.",
        workaround="serve the drafter trained for this target model",
    ),
    Spec(
        "crash_target_hidden_mismatch",
        "crash",
        "DFLASH target_hidden feature dim mismatch.",
        ("srt/models/dflash.py",),
        meaning="The target's captured hidden states do not have the width the drafter's fc layer expects: the drafter was built for another target (hidden size or captured layer count).",
        workaround="serve the drafter trained for this target model",
    ),
    # The decode server of a prefill/decode split (issue 25 item 6, DFD166): 0.5.11-0.5.13.post1
    # build no DFLASH draft input for a request that arrives from the prefill server.
    Spec(
        "crash_pd_no_draft_input",
        "crash",
        "DFLASH decode requires DFlashDraftInput state on the running batch.",
        meaning="The DFLASH decode step found no draft state for a request: on the decode server of a prefill/decode split (--disaggregation-mode decode) every request arrives so before 0.5.20.",
        workaround="serve DFLASH without --disaggregation-mode, or upgrade SGLang to 0.5.20 or newer (its decode side builds the DFLASH draft input)",
    ),
    # ... and every release refuses a PD decode server's radix cache with DFLASH (DFD166).
    Spec(
        "crash_pd_decode_radix_cache",
        "crash",
        "--disaggregation-decode-enable-radix-cache is incompatible with speculative decoding",
        meaning="SGLang refuses --disaggregation-decode-enable-radix-cache on a PD decode server with DFLASH at start-up (every release; 0.5.21+ allow DSPARK, 0.5.23 EAGLE/EAGLE3 too).",
        workaround="remove --disaggregation-decode-enable-radix-cache from the decode server's launch",
        # the algorithm field, as each release spells it: DFLASH's refusal only
        fill=(
            ("self.speculative_algorithm", "DFLASH"),
            ("server_args.speculative_algorithm", "DFLASH"),
            ("cfg.speculative_algorithm", "DFLASH"),
        ),
    ),
    Spec(
        "crash_draft_oom",
        "crash",
        "DFLASH draft OOM when allocating",
        meaning="The draft worker ran out of KV slots for a block (0.5.11-0.5.13 only).",
        workaround="lower --max-running-requests or --mem-fraction-static headroom, or upgrade to 0.5.14+",
    ),
)


def version_key(v: str) -> tuple[int, ...]:
    main, _, post = v.partition(".post")
    return (*(int(x) for x in main.split(".")), int(post or 0))


def render(node: ast.expr) -> str | None:
    """The format text of a string expression: literal parts kept, f-string fields as
    {expr[!conv][:spec]} exactly as written."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        out = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                out.append(str(part.value))
            elif isinstance(part, ast.FormattedValue):
                conv = "" if part.conversion == -1 else "!" + chr(part.conversion)
                spec = ""
                if part.format_spec is not None:
                    spec = ":" + (render(part.format_spec) or "")
                out.append("{" + ast.unparse(part.value) + conv + spec + "}")
        return "".join(out)
    return None


@cache
def strings_of(path: Path) -> tuple[tuple[int, str, str], ...]:
    """(line, style, text) of every string expression in a file; nested f-string specs excluded."""
    try:
        tree = ast.parse(path.read_bytes())
    except (SyntaxError, ValueError):
        return ()
    found: list[tuple[int, str, str]] = []
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            # Parts of an f-string (and its format specs) are not texts of their own.
            skip.update(id(sub) for sub in ast.walk(node) if sub is not node)
    for node in ast.walk(tree):
        if id(node) in skip or not isinstance(node, ast.Constant | ast.JoinedStr):
            continue
        text = render(node)
        if text is None:
            continue
        style = (
            "f"
            if isinstance(node, ast.JoinedStr)
            else ("%" if re.search(r"%[-.\d]*[sdrf]", text) else "plain")
        )
        found.append((node.lineno, style, text))
    return tuple(found)


def _placeholder(field: str, last: bool) -> str:
    if re.fullmatch(r"%\.\d+f|\{[^{}]*:\.\d+f\}", field):
        return r"(-?[0-9.]+|nan|inf)"
    if field == "%d":
        return r"(-?\d+)"
    return "(.*)" if last else "(.*?)"


def derive_regex(fmt: str, style: str) -> str:
    if style == "%":
        fields = r"%[-.\d]*[sdrf]"
    elif style == "f":
        fields = r"\{[^{}]*\}"
    else:
        return re.escape(fmt)
    pieces = re.split(f"({fields})", fmt)
    n_fields = len(pieces) // 2
    out, seen = [], 0
    for i, piece in enumerate(pieces):
        if i % 2:
            seen += 1
            out.append(_placeholder(piece, last=seen == n_fields and not pieces[-1]))
        else:
            out.append(re.escape(piece))
    return "".join(out)


def _sources(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted(root.rglob("*.py"))}


def sites(root: Path, sources: dict[Path, bytes], spec: Spec) -> list[dict[str, object]]:
    if spec.files:
        paths = [root / f for f in spec.files if (root / f) in sources]
    else:
        # A piece of the needle that sits inside one source literal finds the candidates.
        hint = max(re.split(r"[{%]", spec.needle), key=len)[:24].encode()
        paths = [p for p, data in sources.items() if hint in data]
    out = []
    for path in paths:
        for line, style, text in strings_of(path):
            if spec.needle in text:
                rel = str(path.relative_to(root))
                for name, value in spec.fill:
                    text = text.replace("{" + name + "}", value)
                out.append({"file": rel, "line": line, "style": style, "format": text})
    return out


def generate(
    wheels: Path, package: str = "sglang", specs: tuple[Spec, ...] = SPEC
) -> dict[str, object]:
    """Every spec's formats per release of `package` unpacked under WHEELS/<version>/
    (scripts/gen_vllm_rules.py reads vLLM's texts with it)."""
    versions = sorted((d.name for d in wheels.iterdir() if (d / package).is_dir()), key=version_key)
    found: dict[str, dict[str, list[dict[str, object]]]] = {s.id: {} for s in specs}
    for v in versions:
        root = wheels / v / package
        sources = _sources(root)
        for spec in specs:
            found[spec.id][v] = sites(root, sources, spec)
        strings_of.cache_clear()
    patterns = []
    for spec in specs:
        per_version = found[spec.id]
        formats: dict[tuple[str, str], dict[str, object]] = {}
        for v in versions:
            for s in per_version[v]:
                key = (str(s["style"]), str(s["format"]))
                entry = formats.setdefault(
                    key,
                    {
                        "format": s["format"],
                        "style": s["style"],
                        "regex": derive_regex(str(s["format"]), str(s["style"])),
                        "first": v,
                        "last": v,
                        "sites": {},
                    },
                )
                entry["last"] = v
                sites_of = entry["sites"]
                assert isinstance(sites_of, dict)
                sites_of.setdefault(v, []).append(f"{s['file']}:{s['line']}")
        present = [v for v in versions if per_version[v]]
        if not present:
            raise SystemExit(f"{spec.id}: {spec.needle!r} is in no release under {wheels}")
        lo, hi = version_key(present[0]), version_key(present[-1])
        gaps = [v for v in versions if lo <= version_key(v) <= hi and not per_version[v]]
        extra = {"meaning": spec.meaning, "workaround": spec.workaround} if spec.meaning else {}
        if spec.fill:
            extra["fill"] = dict(spec.fill)
        patterns.append(
            {
                "id": spec.id,
                "kind": spec.kind,
                "needle": spec.needle,
                "first": present[0],
                "last": present[-1],
                "absent_within": gaps,
                **extra,
                "formats": list(formats.values()),
            }
        )
    return {
        "generated_by": "scripts/gen_log_patterns.py from the wheels of every release",
        "releases": versions,
        "patterns": patterns,
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--wheels", type=Path, default=WHEELS)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    text = json.dumps(generate(args.wheels), indent=1, sort_keys=False) + "\n"
    if args.check:
        if OUT.read_text() != text:
            print(f"{OUT} is stale: rerun scripts/gen_log_patterns.py", file=sys.stderr)
            return 1
        return 0
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text)
    print(f"wrote {OUT} ({len(SPEC)} patterns)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
