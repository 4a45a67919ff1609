"""Write a realistic SGLang server log of a given size (decode, prefill and HTTP lines)."""

from __future__ import annotations

import random
import sys
from pathlib import Path

HEADER = (
    "[2026-11-30 09:59:58] server_args=ServerArgs(model_path='/models/Kimi-K2.6', "
    "speculative_algorithm='DFLASH', speculative_draft_model_path='/models/Kimi-K2.6-DFlash', "
    "speculative_num_draft_tokens=16, speculative_draft_window_size=None, page_size=64, "
    "context_length=262144, tp_size=8)\n"
    "[2026-11-30 10:00:05 TP0] Initialized DFLASH draft runner. attention_backend=flashinfer, "
    "model=DFlashDraftModel, block_size=16, draft_window_size=None, compact_cache=False\n"
)


def lines(rng: random.Random) -> list[str]:
    out = []
    for i in range(2000):
        ts = f"2026-11-30 {10 + i // 3600 % 10:02d}:{i // 60 % 60:02d}:{i % 60:02d}"
        kind = rng.random()
        if kind < 0.6:
            out.append(
                f"[{ts} TP0] Decode batch. #running-req: {rng.randint(1, 64)}, "
                f"#token: {rng.randint(1000, 900000)}, token usage: {rng.random():.2f}, "
                f"accept len: {rng.uniform(1.5, 6.5):.2f}, accept rate: {rng.random():.2f}, "
                f"cuda graph: True, gen throughput (token/s): {rng.uniform(50, 4000):.2f}, "
                f"#queue-req: {rng.randint(0, 9)}\n"
            )
        elif kind < 0.8:
            out.append(
                f"[{ts} TP0] Prefill batch. #new-seq: 1, #new-token: {rng.randint(1, 8192)}, "
                f"#cached-token: {rng.randint(0, 90000)}, token usage: {rng.random():.2f}, "
                f"#running-req: {rng.randint(0, 64)}, #queue-req: 0\n"
            )
        else:
            out.append(
                f"[{ts}] INFO:     127.0.0.1:{rng.randint(30000, 60000)} - "
                f'"POST /v1/chat/completions HTTP/1.1" 200 OK\n'
            )
    return out


def write_log(path: Path, size_bytes: int, seed: int = 0) -> int:
    """Write about size_bytes of log to path; returns the number of decode lines."""
    rng = random.Random(seed)
    block = "".join(lines(rng)).encode()
    decode_per_block = block.count(b"Decode batch.")
    written = 0
    n_decode = 0
    with path.open("wb") as f:
        f.write(HEADER.encode())
        while written < size_bytes:
            f.write(block)
            written += len(block)
            n_decode += decode_per_block
    return n_decode


if __name__ == "__main__":
    print(write_log(Path(sys.argv[1]), int(float(sys.argv[2]))))
