"""Ask SGLang itself how it parses a launch command (run on the host, with the server's Python).

Stdlib + the host's `sglang` only, nothing from dflash_doctor: the gatherer ships this file
and runs `python -c SOURCE '<json argv>'`. SGLang's own parser (`ServerArgs.add_cli_args`)
then judges abbreviations, defaults and unknown flags exactly as the server does, and says
which spellings of the draft window flag this SGLang accepts. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from typing import NamedTuple


class SGLangField(NamedTuple):
    """One ServerArgs attribute dflash-doctor reads, by SGLang's namespace name."""

    # The LaunchArgs field it fills; None where it is read apart (the window, the decode
    # batch size that stands in for --cuda-graph-max-bs).
    field: str | None
    # The option string that sets it.
    flag: str
    # Kept from the `server_args=` dump of the server log (facts/server_log.py).
    logged: bool = False
    # Compared with the running server's /server_info where the launch file sets it (DFD141).
    compared: bool = False


# The one table of SGLang's fields: the host's parser (this script), the offline replay
# (facts/launch.py LAUNCH_FIELDS), the log's server_args (facts/server_log.py
# SERVER_ARGS_KEYS) and DFD141's comparison (checks/launch_file_not_what_runs.py) all
# derive from it.
# Several names fill one field where older releases used another dest: --tp-size's is
# tensor_parallel_size in 0.5.11 (srt/server_args.py:4663); --pp-size / --dp-size keep
# pipeline_parallel_size / data_parallel_size there (0.5.11 server_args.py:4685, 5117);
# --attn-dp-size exists from 0.5.22 (arg_groups/fields/parallel.py:81).
# Rows in the order DFD141 reports differences.
SGLANG_FIELDS: dict[str, SGLangField] = {
    "model_path": SGLangField("model_path", "--model-path", logged=True),
    "context_length": SGLangField("context_length", "--context-length", logged=True, compared=True),
    "speculative_algorithm": SGLangField(
        "speculative_algorithm", "--speculative-algorithm", logged=True, compared=True
    ),
    "speculative_draft_model_path": SGLangField(
        "draft_model_path", "--speculative-draft-model-path", logged=True, compared=True
    ),
    "speculative_num_draft_tokens": SGLangField(
        "num_draft_tokens", "--speculative-num-draft-tokens", logged=True, compared=True
    ),
    "speculative_dflash_block_size": SGLangField(
        "dflash_block_size", "--speculative-dflash-block-size", logged=True
    ),
    "speculative_draft_window_size": SGLangField(
        None, "--speculative-draft-window-size", logged=True
    ),
    "speculative_dflash_draft_window_size": SGLangField(
        None, "--speculative-dflash-draft-window-size", logged=True
    ),
    # 0.5.21+ (arg_groups/arg_utils.py:417); refused without a window (startup_refusals.py).
    "speculative_draft_sink_size": SGLangField(
        "draft_sink_size", "--speculative-draft-sink-size", logged=True
    ),
    "page_size": SGLangField("page_size", "--page-size", logged=True, compared=True),
    "attention_backend": SGLangField(
        "attention_backend", "--attention-backend", logged=True, compared=True
    ),
    "speculative_draft_attention_backend": SGLangField(
        "draft_attention_backend",
        "--speculative-draft-attention-backend",
        logged=True,
        compared=True,
    ),
    "max_running_requests": SGLangField(
        "max_running_requests", "--max-running-requests", logged=True, compared=True
    ),
    "mem_fraction_static": SGLangField(
        "mem_fraction_static", "--mem-fraction-static", logged=True, compared=True
    ),
    "cuda_graph_max_bs": SGLangField("cuda_graph_max_bs", "--cuda-graph-max-bs"),
    # --cuda-graph-max-bs's dest from 0.5.14
    "cuda_graph_max_bs_decode": SGLangField(None, "--cuda-graph-max-bs"),
    "tp_size": SGLangField("tp_size", "--tp-size", logged=True, compared=True),
    "tensor_parallel_size": SGLangField("tp_size", "--tp-size"),
    "kv_cache_dtype": SGLangField("kv_cache_dtype", "--kv-cache-dtype", logged=True, compared=True),
    # pp_size and the per-phase backends are ServerArgs fields in every release (0.5.11
    # server_args.py:390, 498-499; 0.5.14 server_args.py:856, 1348, 1355; 0.5.23
    # arg_groups/fields/parallel.py:59, exec_.py:215, 235), so the logged dump names them:
    # DFD124 and DFD123 read them on a host known only by its log (unset ones log as None).
    "pp_size": SGLangField("pp_size", "--pp-size", logged=True),
    "pipeline_parallel_size": SGLangField("pp_size", "--pp-size"),
    "dp_size": SGLangField("dp_size", "--dp-size"),
    "data_parallel_size": SGLangField("dp_size", "--dp-size"),
    "attn_dp_size": SGLangField("attn_dp_size", "--attn-dp-size"),
    "enable_dp_attention": SGLangField("enable_dp_attention", "--enable-dp-attention"),
    "enable_dp_lm_head": SGLangField("enable_dp_lm_head", "--enable-dp-lm-head"),
    "prefill_attention_backend": SGLangField(
        "prefill_attention_backend", "--prefill-attention-backend", logged=True
    ),
    "decode_attention_backend": SGLangField(
        "decode_attention_backend", "--decode-attention-backend", logged=True
    ),
    "quantization": SGLangField("quantization", "--quantization"),
    # ServerArgs fields in every release (adaptive: `srt/server_args.py` 0.5.11:532 and
    # `arg_groups/fields/spec.py` 0.5.23:237; disaggregation: `srt/server_args.py`
    # 0.5.11:724 and `arg_groups/fields/disagg.py` 0.5.23:55): DFD165 and DFD166 read
    # them from a log's dump too.
    "speculative_adaptive": SGLangField(
        "speculative_adaptive", "--speculative-adaptive", logged=True
    ),
    "disaggregation_mode": SGLangField("disaggregation_mode", "--disaggregation-mode", logged=True),
}
KEYS = tuple(SGLANG_FIELDS)
WINDOW_FLAGS = ("--speculative-draft-window-size", "--speculative-dflash-draft-window-size")


def resolve(parser: argparse.ArgumentParser, name: str) -> str | None:
    """The option string `name` means: itself, or the one option it abbreviates."""
    options = parser._option_string_actions
    if name in options:
        return name
    matches = [s for s in options if s.startswith(name)]
    return matches[0] if len(matches) == 1 else None


def installed() -> str | None:
    """What importlib.metadata holds for sglang here (None: nothing), the answer the version
    query (finders/version.VERSION_QUERY) would get from this interpreter: given with the
    parse, the doctor need not start the interpreter again to ask it."""
    try:
        import importlib.metadata as m

        return str(m.version("sglang"))
    except Exception:
        return None


def main() -> int:
    argv = json.loads(sys.argv[1])
    try:
        import sglang
        from sglang.srt.server_args import ServerArgs
    except Exception as e:  # any import failure means: no usable SGLang here
        error = f"cannot import sglang: {type(e).__name__}: {e}"
        print(json.dumps({"error": error, "installed": installed()}))
        return 0
    parser = argparse.ArgumentParser(prog="sglang.launch_server")
    ServerArgs.add_cli_args(parser)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            ns, unknown = parser.parse_known_args(argv)
    except SystemExit:
        lines = err.getvalue().strip().splitlines()
        rejected = lines[-1] if lines else "?"
        print(
            json.dumps(
                {"version": sglang.__version__, "rejected": rejected, "installed": installed()}
            )
        )
        return 0
    values = {k: getattr(ns, k) for k in KEYS if hasattr(ns, k)}
    # The window flag the command used, as this parser resolves it (abbreviations too).
    used = None
    for arg in argv:
        if arg.startswith("--"):
            option = resolve(parser, arg.split("=", 1)[0])
            if option in WINDOW_FLAGS:
                used = option
    print(
        json.dumps(
            {
                "version": sglang.__version__,
                "values": {
                    k: v for k, v in values.items() if isinstance(v, (int, float, str, type(None)))
                },
                "unknown": [u for u in unknown if u.startswith("-")],
                "window_flags": [s for s in WINDOW_FLAGS if s in parser._option_string_actions],
                "window_flag_used": used,
                "installed": installed(),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
