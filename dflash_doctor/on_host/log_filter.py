"""The byte-level stage of the log scan: find the lines that matter, total the decode lines.

Stdlib only, and imports nothing from dflash_doctor, because the SSH transport runs this
very file on the host (`python3 -c SOURCE PATH`) so that a multi-GB log is filtered where
it lies and only the few lines that matter travel. Locally it runs in-process. Both give
the same result, so a check over SSH sees exactly what a local check sees.

What it reports:
- marked lines: every line containing one of MARKS (the DFlash worker's lines, the
  `server_args=` dump of each start, and the few texts of other modules that the catalog
  reads), with its 1-based line number, in stream order, as they come;
- the decode summary of the latest start: the accept length of `Decode batch, ... accept
  len: F, ...` lines as a series of at most MAX_SERIES points of about `per_point` lines
  each, plus the totals. In the first EXACT_BYTES (64 MiB) of a log EVERY decode line is
  read, so the series is exact; beyond, one 256 KiB block in every SAMPLE (8), each line
  weighing SAMPLE: an unbiased sample whose picks follow no period of the log (the
  2 MiB + 32-KiB-per-MiB sample it replaces overweighted the start and lined up with
  per-MiB bursts). A `server_args=` dump (a new start) resets it.

Decode lines are totalled without a Python step per line: `findall` over a block of the
log, then `sum(map(AcceptCache lookup, ...))` over slices, both in C. Marks are found
through a byte no steady-state line holds (memchr), and newlines are counted once per
chunk, the one pass over every byte besides the read. bench/log_scan.py measures the
scan against `grep -c`.

Texts, from SGLang's wheels (dflash_doctor/data/log_patterns.json cites every release):
- decode line: `Decode batch{iter_msg}, #running-req: N, {token usage parts}, accept len:
  {:.2f}, accept rate: {:.2f}, [cap len, block accept len, disaggregation fields, ...]
  {cuda|cpu|npu|musa} graph: {bool}, gen throughput (token/s): {:.2f}, #queue-req: N`,
  0.5.11 srt/observability/scheduler_metrics_mixin.py:522-565; 0.5.23
  srt/managers/scheduler_components/metrics_reporter.py:963-1042.
- line prefix: `[%Y-%m-%d %H:%M:%S{ms}{prefix}] ` (srt/utils/common.py configure_logger,
  0.5.11:1218).
"""

from __future__ import annotations

import os
import re
import stat
import sys

# typing's, not collections.abc's and builtins': the aliases below are evaluated at import,
# and on a 3.8 host neither collections.abc.Callable nor tuple is subscriptable
# (tests/test_host_side_python.py runs this file under a real 3.8).
from typing import Callable, Dict, Optional, Tuple  # noqa: UP035

MAX_LINE_BYTES = 1024 * 1024
CHUNK_BYTES = 1024 * 1024
# Series points close at the end of a BLOCK_BYTES block of the log: a point's offset and
# timestamp are those of the last decode line of that block (its values are exact).
BLOCK_BYTES = 256 * 1024
# Decode lines are all read in the first EXACT_BYTES of the log; beyond, one 256 KiB block
# in every SAMPLE (see `kept`), each of its lines weighing SAMPLE. Unbiased, and
# tests/facts/test_server_log.py shows the DFD109 profiles (late drop, warm-up, bursts at
# every MiB, steady) judged right with it.
# Marked lines (and their line numbers) are all read, whatever the size.
EXACT_BYTES = 64 * 1024 * 1024
SAMPLE = 8
MAX_SERIES = 256
# Every pattern in data/log_patterns.json contains one of these (a test pins it).
# Every pattern in data/log_patterns.json that the scan reads contains one of these (a
# test pins it). MARKS are looked for in the whole log: "DFLASH", and the field name that
# every `server_args=` dump holds (ServerArgs.speculative_algorithm, srt/server_args.py in
# 0.5.11-0.5.19, arg_groups/field_order.py:264 in 0.5.23), so that a start without DFLASH
# still opens a new start; its "_" lets it be found by memchr (PROBE_BYTES), which
# "server_args=" would allow too. STARTUP_MARKS are texts logged while a start builds its models
# (srt/configs/model_config.py ModelConfig, 0.5.23:1311; srt/models/dflash.py
# CandidateSelector.__init__, 0.5.23:1160), before it serves: they are looked for from
# each dump until that start's first decode line, which saves two passes over the bulk of
# the log. `Max running requests is reset to 48` is not marked: the dump that follows it
# shows max_running_requests=48.
MARKS = (b"DFLASH", b"speculative_algorithm")
STARTUP_MARKS = (
    b"the DFlash2 selector falls back",
    b"Overriding the draft model's max_position_embeddings",
    # Start-up refusals that do not say DFLASH (crash signatures: window, sink, block size;
    # arg_groups/speculative_hook.py 0.5.23:206, 229, 431).
    b"--speculative-draft-",
)
# The start-up dump: `server_args=ServerArgs(...)` (0.5.11-0.5.18) or a dict (0.5.19+),
# srt/entrypoints/engine.py (0.5.11:188, 0.5.19:265, 0.5.23:311).
SERVER_ARGS_MARKS = (b"server_args=ServerArgs(", b"server_args={")
# Only decode lines carry ", accept len: " (formatted {:.2f}); findall over a block is the
# one pass that reads every decode line. The comma keeps out "block accept len: " that
# 0.5.16+ may add after it (metrics_reporter.py:800 (0.5.16), :1009 (0.5.23)).
ACCEPT_RE = re.compile(rb", accept len: (\d+\.\d+)")
ACCEPT_MARK = b", accept len: "
# Throughput is read from one line per block (the block's last decode line): informative,
# not a trend input, and a second per-line pass would cost as much as the first.
TPUT_RE = re.compile(rb"\(token/s\): (\d+\.\d+)")
GRAPH_OFF_TEXT = b"graph: False, gen throughput (token/s)"
TIMESTAMP_RE = re.compile(rb"\[(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)")

# Bytes that SGLang's steady-state lines (decode, prefill, HTTP access) do not hold. A mark
# holding one is searched by that byte first: `bytes.find` of one byte is memchr (tens of
# GB/s), while `bytes.find` of "DFLASH" or "speculative_algorithm" runs at about 1-2 GB/s
# here (its skip test lets most lowercase text through), and was half of a scan's time.
# The order is the preference: "DFLASH" is probed by "L", "speculative_algorithm" by "_".
PROBE_BYTES = b"_=LA"
# Candidates that are no match, per search, before falling back to `bytes.find`: a log
# dense in the probe byte costs at most this many Python steps more than the plain search.
PROBE_MISSES = 8
# Marked lines in one buffer after which its marks are searched with `bytes.find` alone:
# where they are dense, the next one is near and a probe byte that keeps coming without
# them (a hostile log) would cost PROBE_MISSES steps per line.
DENSE_MARKED = 64


def probe_index(mark: bytes) -> int:
    """Where in `mark` its probe byte is (the first of PROBE_BYTES it holds), or -1."""
    for byte in PROBE_BYTES:
        i = mark.find(bytes((byte,)))
        if i >= 0:
            return i
    return -1


def find_mark(buf: bytes, mark: bytes, probe: int, start: int, end: int) -> int:
    """`buf.find(mark, start, end)`, the same answer, found through its probe byte at
    mark[probe] (probe_index) with memchr; a plain search where probe is -1 or the probe
    byte keeps coming without the mark."""
    if probe < 0:
        return buf.find(mark, start, end)
    byte = mark[probe : probe + 1]
    pos = start + probe
    for _ in range(PROBE_MISSES):
        hit = buf.find(byte, pos, end)
        if hit < 0:
            return -1
        if buf.startswith(mark, hit - probe, end):
            return hit - probe
        pos = hit + 1
    return buf.find(mark, pos - probe, end)


OnMarked = Callable[[int, bytes], None]
# (offset, timestamp, weight of its lines, weighted sum of accept len, sum of sampled
# throughput, throughput samples)
Point = Tuple[int, Optional[str], int, float, float, int]  # noqa: UP006, UP045


def kept(block: int, sample: int) -> bool:
    """Whether block number `block` is read beyond the exact prefix: exactly one block of
    every `sample` consecutive ones (a stratum), at a place in it given by a 64-bit mix
    (splitmix64) of the stratum's number. Each block is read with probability 1/sample,
    the read share never drifts, and no period of the log lines up with the picks."""
    z = ((block // sample) * 0x9E3779B97F4A7C15) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return (z ^ (z >> 31)) % sample == block % sample


_MASK64 = (1 << 64) - 1
# (mark, probe_index(mark)) of what _scan looks for; all of them while a start builds.
_PROBED = tuple((m, probe_index(m)) for m in MARKS)
_ALL_PROBED = _PROBED + tuple((m, probe_index(m)) for m in STARTUP_MARKS)


# Accept lengths are `{:.2f}` texts of a few hundred distinct values: a dict from text to
# float is four times faster than float() per line. Bounded: short texts only (a hostile
# `accept len: 1111...1.1` is parsed, not kept) and at most ACCEPT_CACHE_MAX of them.
ACCEPT_CACHE_MAX = 4096
ACCEPT_CACHE_TEXT = 8


class AcceptCache(Dict[bytes, float]):  # noqa: UP006 (3.8 host: dict[...] is not a base)
    """float(text) of accept-length texts, kept for the short and the first few thousand."""

    def __missing__(self, text: bytes) -> float:
        value = float(text)
        if len(text) <= ACCEPT_CACHE_TEXT and len(self) < ACCEPT_CACHE_MAX:
            self[text] = value
        return value


class DecodeSeries:
    """Accept-length totals of the decode lines of one start, and a bounded series: at most
    MAX_SERIES points of about `per_point` decode lines each (`per_point` doubles as the
    log grows). A line read in a sampled block weighs `sample` (it stands for itself and
    the unread lines like it: Horvitz-Thompson), one in the exact prefix weighs 1, so
    weights, sums and means are unbiased; in the exact prefix they are exact."""

    def __init__(self) -> None:
        self._value = AcceptCache().__getitem__
        self.reset()

    def reset(self) -> None:
        self.points: list[Point] = []
        self.per_point = 1
        self.parsed = 0  # the decode lines whose accept length was read
        self.weight = 0  # sum of their weights: the decode lines (exact in the prefix)
        self.sum_accept = 0.0  # weighted
        self.sum_tput = 0.0
        self.tput_samples = 0
        self.graph_off = 0  # weighted: an estimate beyond the exact prefix
        self.graph_off_first: int | None = None  # line numbers
        self.graph_off_last: int | None = None
        self.first_ts: str | None = None
        self.last_ts: str | None = None
        self.last_offset = 0
        self._n = 0
        self._accept = 0.0
        self._tput = 0.0
        self._tput_n = 0

    def add(
        self,
        accepts: list[bytes],
        offset: int,
        ts: str | None,
        tput: float | None,
        weight: int = 1,
    ) -> None:
        """The read decode lines of one block, in order; offset, ts, tput: its last line's."""
        total = len(accepts)
        self.parsed += total
        self.weight += total * weight
        i = 0
        while i < total:
            need = -(-(self.per_point - self._n) // weight)  # lines to fill the point
            take = min(max(need, 1), total - i)
            a = sum(map(self._value, accepts[i : i + take])) * weight
            self._n += take * weight
            self._accept += a
            self.sum_accept += a
            i += take
            if i == total and tput is not None:
                self._tput += tput
                self._tput_n += 1
                self.sum_tput += tput
                self.tput_samples += 1
            if self._n >= self.per_point:
                self._close(offset, ts)

    def _close(self, offset: int, ts: str | None) -> None:
        self.points.append((offset, ts, self._n, self._accept, self._tput, self._tput_n))
        self._n, self._accept, self._tput, self._tput_n = 0, 0.0, 0.0, 0
        if len(self.points) >= MAX_SERIES:
            pts = self.points
            self.points = [
                (b[0], b[1], a[2] + b[2], a[3] + b[3], a[4] + b[4], a[5] + b[5])
                for a, b in zip(pts[::2], pts[1::2])  # noqa: B905 (3.8 host: no strict=)
            ]
            self.per_point *= 2

    def export(self) -> list[Point]:
        """The series, the unfinished last point included."""
        if self._n:
            last = (self.last_offset, self.last_ts, self._n, self._accept, self._tput, self._tput_n)
            return [*self.points, last]
        return list(self.points)


class LogFilter:
    """Feed byte chunks; marked lines go to the callback, decode lines into `decode`."""

    def __init__(
        self, on_marked: OnMarked, *, exact_bytes: int = EXACT_BYTES, sample: int = SAMPLE
    ) -> None:
        self.on_marked = on_marked
        self.exact_bytes = exact_bytes
        self.sample = sample
        self._starting = True  # no decode line since the last start: look for STARTUP_MARKS
        self.decode = DecodeSeries()
        self.bytes = 0
        self.overlong = 0
        self._carry = b""
        self._skipping = False
        self._stream_offset = 0  # stream offset of the next byte given to _scan
        self._buf_stream_offset = 0  # stream offset of buf[0] in the current _scan
        self._lines_before = 0  # complete lines before the current buffer
        self._cursor = 0
        self._cursor_line = 0
        # Decode lines of the current block, not yet in the series.
        self._block = -1
        self._weight = 1
        self._read = True
        self._acc: list[bytes] = []
        self._last: tuple[int, str | None, float | None] = (0, None, None)

    @property
    def lines(self) -> int:
        return self._lines_before

    def feed(self, chunk: bytes) -> None:
        self.bytes += len(chunk)
        start = 0
        if self._carry or self._skipping:
            # Finish the line left over from the last chunk without copying this chunk.
            nl = chunk.find(b"\n")
            if nl < 0:
                self._hold(chunk)
                return
            if not self._skipping and len(self._carry) + nl > MAX_LINE_BYTES:
                self.overlong += 1
                self._skipping = True
            if self._skipping:
                self._skipping = False
                self._stream_offset += len(self._carry) + nl + 1
                self._lines_before += 1
            else:
                head = self._carry + chunk[: nl + 1]
                self._scan(head, 0, len(head))
            self._carry = b""
            start = nl + 1
        cut = chunk.rfind(b"\n")
        if cut >= start:
            self._scan(chunk, start, cut + 1)
            self._hold(chunk[cut + 1 :])
        else:
            self._hold(chunk[start:])

    def finish(self) -> None:
        if self._carry and not self._skipping:
            tail = self._carry + b"\n"
            self._carry = b""
            self._scan(tail, 0, len(tail))
        self._flush()

    def _hold(self, tail: bytes) -> None:
        """Keep an unfinished line for the next chunk, unless it is overlong."""
        if self._skipping:
            self._stream_offset += len(tail)
            return
        self._carry += tail
        if len(self._carry) > MAX_LINE_BYTES:
            # A line this long is no SGLang log line (binary junk, a dumped blob): skip it.
            self.overlong += 1
            self._stream_offset += len(self._carry)
            self._carry = b""
            self._skipping = True

    def _scan(self, buf: bytes, start: int, end: int) -> None:
        """Scan complete lines buf[start:end] (end is just past a newline)."""
        self._buf_stream_offset = self._stream_offset - start
        self._cursor, self._cursor_line = start, self._lines_before
        marks = _ALL_PROBED if self._starting else _PROBED
        nexts = [find_mark(buf, m, k, start, end) for m, k in marks]
        pos, marked = start, 0
        while True:
            found = [n for n in nexts if n >= 0]
            if not found:
                self._scan_decode(buf, pos, end)
                break
            mark = min(found)
            line_start = max(buf.rfind(b"\n", start, mark) + 1, pos)
            line_end = buf.find(b"\n", mark, end)
            # Decode lines before a restart belong to the old run: total them first.
            self._scan_decode(buf, pos, line_start)
            line = buf[line_start:line_end]
            if any(m in line for m in SERVER_ARGS_MARKS):
                # A new start: the decode lines so far described the old one.
                self._acc, self._block = [], -1
                self.decode.reset()
                self._starting = True
            self.on_marked(self._line_at(buf, line_start), line)
            pos, marked = line_end + 1, marked + 1
            if marked == DENSE_MARKED:  # marks are near each other: probing cannot pay
                marks = tuple((m, -1) for m, _ in marks)
            for i, n in enumerate(nexts):
                if 0 <= n < pos:
                    nexts[i] = find_mark(buf, *marks[i], pos, end)
        self._stream_offset += end - start
        self._lines_before = self._cursor_line + buf.count(b"\n", self._cursor, end)

    def _line_at(self, buf: bytes, offset: int) -> int:
        """1-based line number of buf[offset]; asked in stream order."""
        self._cursor_line += buf.count(b"\n", self._cursor, offset)
        self._cursor = offset
        return self._cursor_line + 1

    def _scan_decode(self, buf: bytes, start: int, end: int) -> None:
        """Total the decode lines of buf[start:end] (whole lines).

        Lines are grouped by the BLOCK_BYTES block of the log their start lies in, so the
        result does not depend on how the log was cut into chunks. Every block of the exact
        prefix is read; beyond it, the blocks that `kept` picks (1 in `sample`)."""
        base = self._buf_stream_offset
        while start < end:
            block = (base + start) // BLOCK_BYTES
            if block != self._block:
                self._flush()
                self._block = block
                exact = block < self.exact_bytes // BLOCK_BYTES
                self._weight = 1 if exact else self.sample
                self._read = exact or kept(block, self.sample)
            limit = (block + 1) * BLOCK_BYTES - base  # buffer index of the next block
            stop = end if limit >= end else buf.find(b"\n", limit - 1, end) + 1
            if self._read:  # an unread block costs nothing: not even a count
                self._decode_lines(buf, start, stop)
            start = stop

    def _saw_decode(self, buf: bytes, start: int, end: int) -> None:
        d = self.decode
        self._starting = False
        if d.first_ts is None:
            first = buf.find(ACCEPT_MARK, start, end)
            d.first_ts = self._timestamp(buf, max(buf.rfind(b"\n", start, first) + 1, start))
        last = buf.rfind(ACCEPT_MARK, start, end)
        line_start = max(buf.rfind(b"\n", start, last) + 1, start)
        found = TPUT_RE.search(buf, last, buf.find(b"\n", last, end))
        self._last = (
            self._buf_stream_offset + line_start,
            self._timestamp(buf, line_start),
            float(found.group(1)) if found else None,
        )
        d.last_offset, d.last_ts = self._last[0], self._last[1]

    def _decode_lines(self, buf: bytes, start: int, end: int) -> None:
        accepts = ACCEPT_RE.findall(buf, start, end)
        if not accepts:
            return
        d = self.decode
        self._saw_decode(buf, start, end)
        self._acc.extend(accepts)
        off = buf.find(GRAPH_OFF_TEXT, start, end)
        if off >= 0:
            d.graph_off += buf.count(GRAPH_OFF_TEXT, off, end) * self._weight
            if d.graph_off_first is None:
                d.graph_off_first = self._line_at(buf, off)
            d.graph_off_last = self._line_at(buf, buf.rfind(GRAPH_OFF_TEXT, start, end))

    @staticmethod
    def _timestamp(buf: bytes, line_start: int) -> str | None:
        ts = TIMESTAMP_RE.match(buf, line_start, line_start + 40)
        return ts.group(1).decode("ascii") if ts else None

    def _flush(self) -> None:
        """Hand the read decode lines of the current block to the series."""
        if self._acc:
            self.decode.add(self._acc, *self._last, weight=self._weight)
            self._acc = []


def records(f: LogFilter) -> bytes:
    """The decode summary and end records that follow the marked lines."""
    d = f.decode
    out = [
        b"P\t%d\t%s\t%d\t%r\t%r\t%d\n" % (o, (ts or "-").encode(), n, a, t, tn)
        for o, ts, n, a, t, tn in d.export()
    ]
    out.append(
        b"T\t%d\t%d\t%r\t%r\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%d\n"
        % (
            d.parsed,
            d.weight,
            d.sum_accept,
            d.sum_tput,
            d.tput_samples,
            d.per_point,
            d.graph_off,
            d.graph_off_first or 0,
            d.graph_off_last or 0,
            (d.first_ts or "-").encode(),
            (d.last_ts or "-").encode(),
            d.last_offset,
        )
    )
    out.append(b"E\t%d\t%d\t%d\n" % (f.lines, f.bytes, f.overlong))
    return b"".join(out)


def main(path: str) -> int:
    """Run on a host: write the records of the log at `path` to stdout, one per line."""
    out = sys.stdout.buffer

    def marked(line: int, raw: bytes) -> None:
        out.write(b"M\t%d\t%s\n" % (line, raw))

    f = LogFilter(marked)
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            sys.stderr.write(f"{path}: not a regular file\n")  # a FIFO would block forever
            return 2
        with open(path, "rb") as log:
            while True:
                chunk = log.read(CHUNK_BYTES)
                if not chunk:
                    break
                f.feed(chunk)
    except OSError as e:
        sys.stderr.write(f"{path}: {(e.strerror or type(e).__name__).lower()}\n")
        return 2
    f.finish()
    out.write(records(f))
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
