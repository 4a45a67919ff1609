"""Write realistic SGLang server logs: decode, prefill and HTTP lines, and accept-length profiles.

    python -m bench.gen_log PATH SIZE [PROFILE]

Line texts follow SGLang 0.5.23 (srt/managers/scheduler_components/metrics_reporter.py:963
`Decode batch{iter_msg}, #running-req: ...` with the accept fields of :1005 and the tail of
:1040; `Prefill batch, ...` of :754; the line prefix of srt/utils/common.py configure_logger).

Profiles of the accept length over the run (the DFD109 cases of issue 15):
- steady: one level with noise;
- late_drop: a level, then the last 20% of decode lines far lower (a real drop);
- warm_up: a high-acceptance warm-up in the first ~2% of the log, then steady;
- bursts: low-acceptance bursts at the start of every MiB of the log, steady overall
  (aligned with where a 32 KiB-per-MiB sample looks).
"""

from __future__ import annotations

import random
import sys
from collections.abc import Iterator
from pathlib import Path

PROFILES = ("steady", "late_drop", "warm_up", "bursts")

HEADER = (
    "[2026-11-30 09:59:58] server_args=ServerArgs(model_path='/models/Kimi-K2.6', "
    "speculative_algorithm='DFLASH', speculative_draft_model_path='/models/Kimi-K2.6-DFlash', "
    "speculative_num_draft_tokens=16, speculative_draft_window_size=None, page_size=64, "
    "context_length=262144, tp_size=8)\n"
    "[2026-11-30 10:00:05 TP0] Initialized DFLASH draft runner. attention_backend=flashinfer, "
    "model=DFlashDraftModel, block_size=16, draft_window_size=None, compact_cache=False\n"
)


def _ts(i: int) -> str:
    return f"2026-11-30 {10 + i // 3600 % 10:02d}:{i // 60 % 60:02d}:{i % 60:02d}"


def decode_line(ts: str, accept: float, rng: random.Random, graph: bool = True) -> str:
    return (
        f"[{ts} TP0] Decode batch, #running-req: {rng.randint(1, 64)}, "
        f"#token: {rng.randint(1000, 900000)}, token usage: {rng.random():.2f}, "
        f"accept len: {accept:.2f}, accept rate: {rng.random():.2f}, "
        f"cuda graph: {graph}, gen throughput (token/s): {rng.uniform(50, 4000):.2f}, "
        f"#queue-req: {rng.randint(0, 9)}\n"
    )


def other_line(ts: str, rng: random.Random) -> str:
    if rng.random() < 0.5:
        return (
            f"[{ts} TP0] Prefill batch, #new-seq: 1, #new-token: {rng.randint(1, 8192)}, "
            f"#cached-token: {rng.randint(0, 90000)}, token usage: {rng.random():.2f}, "
            f"#running-req: {rng.randint(0, 64)}, #queue-req: 0\n"
        )
    return (
        f"[{ts}] INFO:     127.0.0.1:{rng.randint(30000, 60000)} - "
        f'"POST /v1/chat/completions HTTP/1.1" 200 OK\n'
    )


def lines(rng: random.Random) -> list[str]:
    """2,000 lines, 60% decode lines with accept len uniform in 1.5..6.5."""
    out = []
    for i in range(2000):
        if rng.random() < 0.6:
            out.append(decode_line(_ts(i), rng.uniform(1.5, 6.5), rng))
        else:
            out.append(other_line(_ts(i), rng))
    return out


def accept_for(profile: str, offset: int, size: int, rng: random.Random) -> float:
    """The accept length a decode line at byte `offset` of a `size`-byte log gets."""
    noise = rng.uniform(-0.6, 0.6)
    if profile == "late_drop":
        return (2.4 if offset > 0.8 * size else 4.0) + noise
    if profile == "late_collapse":  # speculation stops in the last 5% of the run
        return 1.0 if offset > 0.95 * size else 4.1 + noise
    if profile == "warm_up":
        return (6.2 if offset < 0.02 * size else 3.5) + noise
    if profile == "bursts":
        return (1.6 if offset % (1 << 20) < (32 << 10) else 4.0) + noise
    if profile == "steady":
        return 3.8 + noise
    raise ValueError(f"unknown profile {profile!r}")


def profile_chunks(profile: str, size: int, seed: int = 0) -> Iterator[bytes]:
    """About `size` bytes of log with the accept-length profile, in ~64 KiB chunks."""
    rng = random.Random(seed)
    offset = len(HEADER)
    yield HEADER.encode()
    i = 0
    while offset < size:
        parts = []
        for _ in range(256):
            ts = _ts(i)
            i += 1
            if rng.random() < 0.6:
                line = decode_line(ts, max(1.0, accept_for(profile, offset, size, rng)), rng)
            else:
                line = other_line(ts, rng)
            parts.append(line)
            offset += len(line)
        yield "".join(parts).encode()


def write_log(path: Path, size_bytes: int, seed: int = 0, profile: str | None = None) -> int:
    """Write about size_bytes of log to path; returns the number of decode lines."""
    n_decode = 0
    with path.open("wb") as f:
        if profile is not None:
            for chunk in profile_chunks(profile, size_bytes, seed):
                f.write(chunk)
                n_decode += chunk.count(b"Decode batch,")
            return n_decode
        rng = random.Random(seed)
        block = "".join(lines(rng)).encode()
        decode_per_block = block.count(b"Decode batch,")
        written = 0
        f.write(HEADER.encode())
        while written < size_bytes:
            f.write(block)
            written += len(block)
            n_decode += decode_per_block
    return n_decode


if __name__ == "__main__":
    profile = sys.argv[3] if len(sys.argv) > 3 else None
    print(write_log(Path(sys.argv[1]), int(float(sys.argv[2])), profile=profile))
