"""log_filter's fast paths give the answers of the plain ones: the marks found through a
probe byte where `bytes.find` finds them, accept lengths through AcceptCache as float()."""

from __future__ import annotations

import random

from dflash_doctor.on_host import log_filter
from dflash_doctor.on_host.log_filter import AcceptCache, find_mark, probe_index

PIECES = [b"L", b"_", b"DF", b"DFLAS", b"DFLASH", b"speculative", b"speculative_algorithm"]
PIECES += [b"x", b"\n", b"LLLLLLLLLL", b"__________", b"Overriding the draft model's"]


def test_marks_of_the_scan_have_probe_bytes() -> None:
    """The two marks looked for in the whole log are probed (the scan's speed rests on it)."""
    assert [log_filter.MARKS[i][k] for i, (_, k) in enumerate(log_filter._PROBED)] == [
        ord("L"),
        ord("_"),
    ]
    assert probe_index(b"--speculative-draft-") == -1


def test_find_mark_is_bytes_find() -> None:
    """Random buffers, dense in probe bytes too (the fallback after PROBE_MISSES)."""
    rng = random.Random(28)
    marks = [*log_filter.MARKS, *log_filter.STARTUP_MARKS, b"L", b"xL_"]
    for _ in range(20000):
        mark = rng.choice(marks)
        buf = b"".join(rng.choice(PIECES) for _ in range(rng.randrange(0, 60)))
        start, end = rng.randrange(-3, len(buf) + 3), rng.randrange(-3, len(buf) + 3)
        got = find_mark(buf, mark, probe_index(mark), max(start, 0), max(end, 0))
        assert got == buf.find(mark, max(start, 0), max(end, 0)), (buf, mark, start, end)


def test_accept_cache_is_float_and_bounded() -> None:
    cache = AcceptCache()
    texts = [b"%d.%02d" % (i // 100, i % 100) for i in range(6000)] + [b"1" * 40 + b".5"]
    assert [cache[t] for t in texts] == [float(t) for t in texts]
    assert [cache[t] for t in texts] == [float(t) for t in texts]  # now from the cache
    assert len(cache) == log_filter.ACCEPT_CACHE_MAX
    assert b"1" * 40 + b".5" not in cache


def test_marked_lines_where_marks_and_probe_bytes_are_dense() -> None:
    """Past DENSE_MARKED marked lines in a buffer the scan stops probing; every line that
    holds a mark is still reported, with its number, whatever the chunking."""
    rng = random.Random(2028)
    words = [b"L", b"_", b"LL__", b"DFLASH", b"speculative_algorithm", b"DFLAS", b"x y"]
    lines = [b"".join(rng.choice(words) for _ in range(rng.randrange(0, 6))) for _ in range(3000)]
    text = b"\n".join(lines) + b"\n"
    want = [
        (n, line) for n, line in enumerate(lines, 1) if any(m in line for m in log_filter.MARKS)
    ]
    assert len(want) > 10 * log_filter.DENSE_MARKED
    for chunk in (7, 4096, 1 << 20):
        got: list[tuple[int, bytes]] = []

        def on_marked(n: int, line: bytes, got: list[tuple[int, bytes]] = got) -> None:
            got.append((n, line))

        f = log_filter.LogFilter(on_marked)
        for i in range(0, len(text), chunk):
            f.feed(text[i : i + chunk])
        f.finish()
        assert got == want, chunk
        assert f.lines == len(lines)
