"""The byte-level stage of the log scan: find the lines that matter, sample decode lines.

Stdlib only, and imports nothing from dflash_doctor, because the SSH transport runs this
very file on the host (`python3 -c SOURCE PATH`) so that a multi-GB log is filtered where
it lies and only the few lines that matter travel. Locally it runs in-process. Both emit
the same records, so a check over SSH sees exactly what a local check sees.

Records, in stream order:
- marked line: a line containing `DFLASH` (the DFlash worker's lines, and the startup
  `server_args=...` dump of a DFLASH server), with its 1-based line number;
- decode sample: stream offset, accept length, throughput and timestamp of a parsed
  `Decode batch. ... accept len: F, ... gen throughput (token/s): F` line;
- end: total lines, bytes and skipped overlong lines.

Decode lines are parsed exactly in the first EXACT_PREFIX_BYTES of the log, then in the
first SAMPLE_WINDOW_BYTES of every SAMPLE_PERIOD_BYTES: a systematic ~3% sample that keeps
a multi-GB scan within a few times grep. Marked lines and line numbers are exact.
"""

from __future__ import annotations

import os
import re
import stat
import sys
from collections.abc import Callable

MAX_LINE_BYTES = 1024 * 1024
CHUNK_BYTES = 1024 * 1024
DFLASH_MARK = b"DFLASH"
EXACT_PREFIX_BYTES = 2 * 1024 * 1024
SAMPLE_PERIOD_BYTES = 1024 * 1024
SAMPLE_WINDOW_BYTES = 32 * 1024
# "accept len" appears only in decode lines; no "(" stands between it and the throughput,
# so a greedy negated class matches without backtracking.
DECODE_RE = re.compile(rb"accept len: ([0-9.]+),[^(\n]*\(token/s\): ([0-9.]+)")
TIMESTAMP_RE = re.compile(rb"\[(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)")

OnMarked = Callable[[int, bytes], None]
OnDecode = Callable[[int, float, float, "str | None"], None]


class LogFilter:
    """Feed byte chunks; marked lines and decode samples go to the two callbacks."""

    def __init__(self, on_marked: OnMarked, on_decode: OnDecode) -> None:
        self.on_marked = on_marked
        self.on_decode = on_decode
        self.bytes = 0
        self.overlong = 0
        self._carry = b""
        self._skipping = False
        self._stream_offset = 0  # stream offset of the next byte given to _scan
        self._buf_stream_offset = 0  # stream offset of buf[0] in the current _scan
        self._lines_before = 0  # complete lines before the current buffer
        self._cursor = 0
        self._cursor_line = 0

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
        pos = start
        while True:
            mark = buf.find(DFLASH_MARK, pos, end)
            if mark < 0:
                self._scan_decode(buf, pos, end)
                break
            line_start = max(buf.rfind(b"\n", start, mark) + 1, pos)
            line_end = buf.find(b"\n", mark, end)
            # Decode lines before a restart belong to the old run: report them first.
            self._scan_decode(buf, pos, line_start)
            self.on_marked(self._line_at(buf, line_start), buf[line_start:line_end])
            pos = line_end + 1
        self._stream_offset += end - start
        self._lines_before = self._cursor_line + buf.count(b"\n", self._cursor, end)

    def _line_at(self, buf: bytes, offset: int) -> int:
        """1-based line number of buf[offset]; marked lines come in stream order."""
        self._cursor_line += buf.count(b"\n", self._cursor, offset)
        self._cursor = offset
        return self._cursor_line + 1

    def _scan_decode(self, buf: bytes, start: int, end: int) -> None:
        if start >= end:
            return
        base = self._buf_stream_offset
        lo, hi = base + start, base + end
        if hi <= EXACT_PREFIX_BYTES:
            self._parse_decode(buf, start, end)
            return
        if lo < EXACT_PREFIX_BYTES:
            self._parse_decode(buf, start, EXACT_PREFIX_BYTES - base)
            lo = EXACT_PREFIX_BYTES
        period = lo - lo % SAMPLE_PERIOD_BYTES
        while period < hi:
            a = max(lo, period)
            b = min(hi, period + SAMPLE_WINDOW_BYTES)
            if a < b:
                self._parse_decode(buf, a - base, b - base)
            period += SAMPLE_PERIOD_BYTES

    def _parse_decode(self, buf: bytes, start: int, end: int) -> None:
        for m in DECODE_RE.finditer(buf, start, end):
            try:
                accept, tput = float(m.group(1)), float(m.group(2))
            except ValueError:
                continue
            offset = m.start()
            line_start = buf.rfind(b"\n", 0, offset) + 1
            ts = TIMESTAMP_RE.match(buf, line_start, line_start + 32)
            self.on_decode(
                self._buf_stream_offset + offset,
                accept,
                tput,
                ts.group(1).decode("ascii") if ts else None,
            )


def main(path: str) -> int:
    """Run on a host: write the records of the log at `path` to stdout, one per line."""
    out = sys.stdout.buffer

    def marked(line: int, raw: bytes) -> None:
        out.write(b"M\t%d\t%s\n" % (line, raw))

    def decode(offset: int, accept: float, tput: float, ts: str | None) -> None:
        out.write(b"D\t%d\t%r\t%r\t%s\n" % (offset, accept, tput, (ts or "-").encode()))

    f = LogFilter(marked, decode)
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
    out.write(b"E\t%d\t%d\t%d\n" % (f.lines, f.bytes, f.overlong))
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
