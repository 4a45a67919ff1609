from __future__ import annotations

import resource

import pytest

from bench.gen_log import HEADER, lines
from dflash_doctor.errors import FactError
from dflash_doctor.facts import log_filter, server_log
from dflash_doctor.facts.server_log import read_filter_output, scan_log
from tests.conftest import DEMO_HOST, FIXTURE_HOSTS

SEED_LOG = (DEMO_HOST / "var/log/sglang/server.log").read_bytes()


def chunked(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


def test_seed_log() -> None:
    f = scan_log([SEED_LOG], "server.log")
    assert f.startups == 1
    assert f.server_args is not None and f.server_args.line == 2
    assert f.server_args_fields["speculative_draft_window_size"] == "None"
    assert f.dflash_init is not None and f.dflash_init.line == 4
    assert (f.draft_window_size, f.compact_cache, f.dflash_block_size) == (None, False, 16)
    assert f.decode.count == 40
    assert f.decode.series[0].accept_len == 3.4 and f.decode.series[-1].accept_len == 2.1
    assert "sk-fixture" not in f.server_args.text


def test_tuned_and_0511_logs() -> None:
    tuned = scan_log([(FIXTURE_HOSTS / "tuned/var/log/sglang/server.log").read_bytes()], "l")
    # tuned is 0.5.23 serving the drafter as trained: no draft window
    assert (tuned.draft_window_size, tuned.compact_cache) == (None, False)
    old = scan_log([(FIXTURE_HOSTS / "v0511/var/log/sglang/server.log").read_bytes()], "l")
    assert old.server_args_fields["speculative_dflash_draft_window_size"] == "2048"
    assert len(old.backend_fallbacks) == 1 and old.dflash_attention_backend == "flashinfer"
    mismatch = scan_log([(FIXTURE_HOSTS / "v0513/var/log/sglang/server.log").read_bytes()], "l")
    assert mismatch.block_size_mismatch is not None
    # 0.5.13's deprecated alias stores into speculative_draft_window_size
    # (server_args.py 0.5.13:5921-5928), so the worker keeps that window
    assert (mismatch.draft_window_size, mismatch.compact_cache) == (4096, True)


@pytest.mark.parametrize("size", [1, 7, 64, 4096, 1 << 20])
def test_chunking_does_not_change_result(size: int) -> None:
    whole = scan_log([SEED_LOG], "l")
    assert scan_log(chunked(SEED_LOG, size), "l") == whole


def test_restart_resets_to_latest_start() -> None:
    second = SEED_LOG.replace(
        b"draft_window_size=None, compact_cache=False",
        b"draft_window_size=2048, compact_cache=True",
    )
    f = scan_log(chunked(SEED_LOG + second, 100), "l")
    assert f.startups == 2
    assert (f.draft_window_size, f.compact_cache) == (2048, True)
    assert f.dflash_init is not None
    assert f.dflash_init.line == SEED_LOG.count(b"\n") + 4
    assert f.decode.count == 40


def test_binary_junk_truncation_and_overlong_lines() -> None:
    junk = b"\x00\xff\xfe" * 1000 + b"\n"
    overlong = b"x" * (log_filter.MAX_LINE_BYTES + 10) + b" DFLASH nonsense\n"
    head = b"".join(SEED_LOG.splitlines(keepends=True)[:4])  # up to the DFlash init line
    oom = b"[t] DFLASH draft OOM \xff\xfe here\n"
    truncated = b"[2026-11-30 10:00:09 TP0] Decode batch. #running-req: 1, accept len: 3."
    f = scan_log(chunked(junk + overlong + head + oom + truncated, 4096), "l")
    assert f.overlong_lines == 1
    assert f.server_args is not None and f.server_args.line == 2 + 2
    assert f.dflash_init is not None and f.dflash_init.line == 2 + 4
    assert len(f.draft_oom) == 1 and f.draft_oom[0].line == 2 + 5
    assert f.undecodable_lines == 1 and "\ufffd" in f.draft_oom[0].text
    assert f.lines == 2 + 6 and f.decode.count == 0  # the unfinished last line counts


def test_empty_log() -> None:
    f = scan_log([], "l")
    assert f.startups == 0 and f.dflash_init is None and f.decode.count == 0


def test_sampling_beyond_exact_prefix() -> None:
    import random

    block = "".join(lines(random.Random(1))).encode()
    data = HEADER.encode() + block * ((8 << 20) // len(block))
    f = scan_log(chunked(data, 1 << 20), "l")
    total = data.count(b"accept len: ")
    assert 0 < f.decode.count < total  # a sample beyond the exact prefix ...
    exact = data[: log_filter.EXACT_PREFIX_BYTES].count(b"accept len: ")
    assert f.decode.count > exact  # ... on top of every line in it
    assert len(f.decode.series) <= server_log.MAX_SERIES
    assert 1.5 <= (f.decode.accept_len_mean or 0) <= 6.5


def test_one_gib_log_streams_in_bounded_memory() -> None:
    import random

    block = "".join(lines(random.Random(2))).encode()
    chunk = block * ((1 << 20) // len(block) + 1)
    n_chunks = (1 << 30) // len(chunk) + 1

    def stream():  # type: ignore[no-untyped-def]
        yield HEADER.encode()
        for _ in range(n_chunks):
            yield chunk

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    f = scan_log(stream(), "huge.log")
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert f.bytes_scanned >= 1 << 30
    assert f.dflash_init is not None and f.dflash_init.line == 2
    assert f.lines == 2 + n_chunks * chunk.count(b"\n")
    # The scan may hold a chunk, its carry and the bounded series; never the log.
    assert (after - before) < 64 * 1024


def test_filter_script_output_equals_in_process_scan(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import random
    import subprocess
    import sys

    block = "".join(lines(random.Random(3))).encode()
    junk = b"\xff\x00 binary DFLASH junk \xfe\n" + b"y" * (log_filter.MAX_LINE_BYTES + 5) + b"\n"
    data = SEED_LOG + junk + block * ((5 << 20) // len(block)) + SEED_LOG + b"tail DFLASH"
    path = tmp_path / "server.log"
    path.write_bytes(data)
    out = subprocess.run(
        [sys.executable, log_filter.__file__, str(path)], capture_output=True, check=True
    ).stdout
    remote = read_filter_output(chunked(out, 333), str(path))
    local = scan_log(chunked(data, 1 << 20), str(path))
    assert remote == local
    assert local.startups == 2 and local.overlong_lines == 1


@pytest.mark.parametrize(
    ("output", "message"),
    [
        (b"", "ended before its end record"),
        (b"M\t1\tx\nD\t5\t1.0\n", "unexpected log filter output"),
        (b"M\tone\tx\nE\t1\t1\t0\n", "unexpected log filter output"),
        (b"M\t1\tDFLASH x", "ended mid-record"),
        (b"Z\t1\n", "unexpected"),
    ],
)
def test_hostile_filter_output(output: bytes, message: str) -> None:
    with pytest.raises(FactError, match=message):
        read_filter_output([output], "l")


def test_both_server_args_dump_formats() -> None:
    old = (
        b"[t] server_args=ServerArgs(model_path='m', api_key='sk-old-secret', "
        b"speculative_algorithm='DFLASH', speculative_dflash_draft_window_size=None)\n"
    )  # 0.5.11-0.5.18
    new = (
        b"[t] server_args={'model_path': 'm2', 'api_key': 'sk-new-secret', 'lora_paths': [], "
        b"'speculative_algorithm': 'DFLASH', 'speculative_draft_window_size': 2048}\n"
    )  # 0.5.19+: resolved_dict()
    f = scan_log([old + new], "l")
    assert f.startups == 2 and f.server_args is not None and f.server_args.line == 2
    assert f.server_args_fields["model_path"] == "m2"
    assert f.server_args_fields["speculative_draft_window_size"] == "2048"
    assert "sk-new-secret" not in f.server_args.text
    f = scan_log([old], "l")
    assert f.server_args_fields["speculative_dflash_draft_window_size"] == "None"
