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

KEYS = (
    "model_path",
    "speculative_algorithm",
    "speculative_draft_model_path",
    "speculative_num_draft_tokens",
    "speculative_dflash_block_size",
    "speculative_draft_window_size",
    "speculative_dflash_draft_window_size",
    "attention_backend",
    "speculative_draft_attention_backend",
    "page_size",
    "context_length",
    "mem_fraction_static",
    "cuda_graph_max_bs",
    "max_running_requests",
    "tp_size",
    "tensor_parallel_size",  # --tp-size's dest in the older releases
    "cuda_graph_max_bs_decode",  # --cuda-graph-max-bs's dest from 0.5.14
    "kv_cache_dtype",
    "pp_size",
    "pipeline_parallel_size",  # --pp-size's dest in the older releases
    "dp_size",
    "data_parallel_size",  # --dp-size's dest in the older releases
    "attn_dp_size",
    "enable_dp_attention",
    "enable_dp_lm_head",
    "prefill_attention_backend",
    "decode_attention_backend",
    "quantization",
)
WINDOW_FLAGS = ("--speculative-draft-window-size", "--speculative-dflash-draft-window-size")


def resolve(parser: argparse.ArgumentParser, name: str) -> str | None:
    """The option string `name` means: itself, or the one option it abbreviates."""
    options = parser._option_string_actions
    if name in options:
        return name
    matches = [s for s in options if s.startswith(name)]
    return matches[0] if len(matches) == 1 else None


def main() -> int:
    argv = json.loads(sys.argv[1])
    try:
        import sglang
        from sglang.srt.server_args import ServerArgs
    except Exception as e:  # any import failure means: no usable SGLang here
        print(json.dumps({"error": f"cannot import sglang: {type(e).__name__}: {e}"}))
        return 0
    parser = argparse.ArgumentParser(prog="sglang.launch_server")
    ServerArgs.add_cli_args(parser)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            ns, unknown = parser.parse_known_args(argv)
    except SystemExit:
        lines = err.getvalue().strip().splitlines()
        print(json.dumps({"version": sglang.__version__, "rejected": lines[-1] if lines else "?"}))
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
                    k: v for k, v in values.items() if isinstance(v, int | float | str | type(None))
                },
                "unknown": [u for u in unknown if u.startswith("-")],
                "window_flags": [s for s in WINDOW_FLAGS if s in parser._option_string_actions],
                "window_flag_used": used,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
