"""Stream an SGLang server log into LogFacts, in bounded memory, at close to grep's speed.

The log is read as byte chunks and never held whole. Rare lines (the startup server-args
dump, the DFlash worker's lines) are located with `bytes.find`; the frequent decode lines
are matched by one compiled regex over each chunk, so the per-line work stays in C. The
accept-length/throughput series keeps at most MAX_SERIES points, merging neighbours.

Formats, from SGLang's source:
- `server_args=ServerArgs(...)`: python/sglang/srt/entrypoints/http_server.py logs the
  parsed args at startup (0.5.11-0.5.23); the window field is `speculative_dflash_draft_
  window_size` in 0.5.11 and `speculative_draft_window_size` from 0.5.12.
- `Initialized DFLASH draft runner. attention_backend=..., model=..., block_size=...,
  draft_window_size=..., compact_cache=...`: speculative/dflash_worker.py (0.5.11-0.5.23).
- `DFLASH block size mismatch: using speculative_num_draft_tokens=N but draft config
  block_size=M.`: dflash_worker.py (0.5.11-0.5.23).
- `DFLASH draft worker only supports attention_backend in (...) for now, but got 'X'.
  Falling back to 'Y'.` and `DFLASH draft worker does not support 'trtllm_mha' ...
  Falling back to 'Y'.`: dflash_worker.py (0.5.11-0.5.23).
- `Decode batch. #running-req: N, #token: N, token usage: F, accept len: F, [accept rate: F,]
  cuda graph: B, gen throughput (token/s): F, #queue-req: N`: managers/scheduler_metrics_
  mixin.py; `accept rate` appears from 0.5.14, `cpu graph` replaces `cuda graph` on CPU.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from dflash_doctor.facts.models import DecodePoint, DecodeStats, LogFacts, LogLine
from dflash_doctor.redact import redact_text

MAX_LINE_BYTES = 1024 * 1024
MAX_SERIES = 256
MAX_EVIDENCE_CHARS = 400
MAX_KEPT_LINES = 20

SERVER_ARGS_MARK = b"server_args=ServerArgs("
# One scan finds both the DFlash worker lines and the startup dump of a DFLASH server
# (its args say speculative_algorithm='DFLASH'); starts of non-DFlash servers are not ours.
DFLASH_MARK = b"DFLASH"
# Decode lines are parsed exactly in the first EXACT_PREFIX_BYTES of the log, then in the
# first SAMPLE_WINDOW_BYTES of every SAMPLE_PERIOD_BYTES: a systematic ~3% sample that keeps
# a multi-GB scan within a few times grep. Line numbers stay exact.
EXACT_PREFIX_BYTES = 2 * 1024 * 1024
SAMPLE_PERIOD_BYTES = 1024 * 1024
SAMPLE_WINDOW_BYTES = 32 * 1024
# "accept len" appears only in decode lines; no "(" stands between it and the throughput,
# so a greedy negated class matches without backtracking.
DECODE_RE = re.compile(rb"accept len: ([0-9.]+),[^(\n]*\(token/s\): ([0-9.]+)")
_TIMESTAMP_RE = re.compile(r"^\[(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)")
_FIELD_RE = re.compile(r"(\w+)=('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^,()\s]+)")
_INIT_RE = re.compile(r"Initialized DFLASH draft runner\.\s*(.*)$")
_FALLBACK_RE = re.compile(r"DFLASH draft worker .*Falling back to '([^']+)'")

SERVER_ARGS_KEYS = frozenset(
    {
        "model_path",
        "speculative_algorithm",
        "speculative_draft_model_path",
        "speculative_num_draft_tokens",
        "speculative_draft_window_size",
        "speculative_dflash_draft_window_size",
        "speculative_dflash_block_size",
        "attention_backend",
        "speculative_draft_attention_backend",
        "page_size",
        "context_length",
        "tp_size",
        "kv_cache_dtype",
        "max_running_requests",
        "mem_fraction_static",
    }
)


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _opt_int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


class _Series:
    """Accept length and throughput over the log: at most MAX_SERIES points, each the mean
    of the same number of consecutive parsed decode lines (doubling as the log grows)."""

    def __init__(self) -> None:
        self.points: list[DecodePoint] = []
        self.per_point = 1
        self._n = 0
        self._accept = 0.0
        self._tput = 0.0

    def add(self, accept: float, tput: float) -> bool:
        """Add one decode line; True when it closed a point (then call `close`)."""
        self._n += 1
        self._accept += accept
        self._tput += tput
        return self._n >= self.per_point

    def close(self, offset: int, timestamp: str | None) -> None:
        self.points.append(self._point(offset, timestamp))
        self._n, self._accept, self._tput = 0, 0.0, 0.0
        if len(self.points) >= MAX_SERIES:
            self.points = [
                self._merge(a, b) for a, b in zip(self.points[::2], self.points[1::2], strict=True)
            ]
            self.per_point *= 2

    def _point(self, offset: int, timestamp: str | None) -> DecodePoint:
        return DecodePoint(
            offset=offset,
            timestamp=timestamp,
            accept_len=round(self._accept / self._n, 4),
            gen_throughput=round(self._tput / self._n, 4),
        )

    @staticmethod
    def _merge(a: DecodePoint, b: DecodePoint) -> DecodePoint:
        return DecodePoint(
            offset=b.offset,
            timestamp=b.timestamp,
            accept_len=round(((a.accept_len or 0) + (b.accept_len or 0)) / 2, 4),
            gen_throughput=round(((a.gen_throughput or 0) + (b.gen_throughput or 0)) / 2, 4),
        )

    def export(self, last_offset: int, last_timestamp: str | None) -> list[DecodePoint]:
        if self._n:
            return [*self.points, self._point(last_offset, last_timestamp)]
        return list(self.points)


class LogScanner:
    """Feed byte chunks with `feed`, then `result()`. Restarts reset the per-start facts."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._carry = b""
        self._skipping = False
        self._stream_offset = 0  # stream offset of the next byte given to _scan
        self._buf_stream_offset = 0  # stream offset of buf[0] in the current _scan
        self._lines_before = 0  # complete lines before the current buffer
        self._cursor = self._cursor_line = 0
        self.facts = LogFacts(path=path)
        self._reset_run()

    def _reset_run(self) -> None:
        self._series = _Series()
        self._last_decode: tuple[int, str | None] = (0, None)
        self._decode_n = 0
        self._accept_sum = 0.0
        self._tput_sum = 0.0

    def feed(self, chunk: bytes) -> None:
        self.facts.bytes_scanned += len(chunk)
        start = 0
        if self._carry or self._skipping:
            # Finish the line left over from the last chunk without copying this chunk.
            nl = chunk.find(b"\n")
            if nl < 0:
                self._hold(chunk)
                return
            if not self._skipping and len(self._carry) + nl > MAX_LINE_BYTES:
                self.facts.overlong_lines += 1
                self._skipping = True
            head = self._carry + chunk[: nl + 1] if not self._skipping else chunk[: nl + 1]
            if self._skipping:
                self._skipping = False
                self._stream_offset += len(self._carry) + len(head)
                self._lines_before += 1
            else:
                self._scan(head, 0, len(head))
            self._carry = b""
            start = nl + 1
        cut = chunk.rfind(b"\n")
        if cut >= start:
            self._scan(chunk, start, cut + 1)
            self._hold(chunk[cut + 1 :])
        else:
            self._hold(chunk[start:])

    def _hold(self, tail: bytes) -> None:
        """Keep an unfinished line for the next chunk, unless it is overlong."""
        if self._skipping:
            self._stream_offset += len(tail)
            return
        self._carry += tail
        if len(self._carry) > MAX_LINE_BYTES:
            # A line this long is no SGLang log line (binary junk, a dumped blob): skip it.
            self.facts.overlong_lines += 1
            self._stream_offset += len(self._carry)
            self._carry = b""
            self._skipping = True

    def result(self) -> LogFacts:
        if self._carry and not self._skipping:
            self._scan(self._carry + b"\n", 0, len(self._carry) + 1)
            self._carry = b""
        self.facts.lines = self._lines_before
        self._flush_decode()
        return self.facts

    def _flush_decode(self) -> None:
        d = self.facts.decode
        d.count = self._decode_n
        if self._decode_n:
            d.accept_len_mean = round(self._accept_sum / self._decode_n, 4)
            d.gen_throughput_mean = round(self._tput_sum / self._decode_n, 4)
        d.series = self._series.export(*self._last_decode)

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
            # Decode lines before a restart belong to the old run: scan them first.
            self._scan_decode(buf, pos, line_start)
            self._on_marked_line(buf, line_start, line_end)
            pos = line_end + 1
        self._stream_offset += end - start
        self._lines_before = self._cursor_line + buf.count(b"\n", self._cursor, end)

    def _line_at(self, buf: bytes, offset: int) -> int:
        """1-based line number of buf[offset]; marked lines are visited in stream order."""
        self._cursor_line += buf.count(b"\n", self._cursor, offset)
        self._cursor = offset
        return self._cursor_line + 1

    def _scan_decode(self, buf: bytes, start: int, end: int) -> None:
        if start >= end:
            return
        for a, b in self._sample_ranges(start, end):
            self._parse_decode(buf, a, b)

    def _sample_ranges(self, start: int, end: int) -> list[tuple[int, int]]:
        """Parts of buf[start:end] inside the sampling windows, as buffer offsets."""
        base = self._buf_stream_offset
        lo, hi = base + start, base + end
        if hi <= EXACT_PREFIX_BYTES:
            return [(start, end)]
        ranges = []
        if lo < EXACT_PREFIX_BYTES:
            ranges.append((start, EXACT_PREFIX_BYTES - base))
            lo = EXACT_PREFIX_BYTES
        period_start = lo - lo % SAMPLE_PERIOD_BYTES
        while period_start < hi:
            a = max(lo, period_start)
            b = min(hi, period_start + SAMPLE_WINDOW_BYTES)
            if a < b:
                ranges.append((a - base, b - base))
            period_start += SAMPLE_PERIOD_BYTES
        return ranges

    def _parse_decode(self, buf: bytes, start: int, end: int) -> None:
        series = self._series
        for m in DECODE_RE.finditer(buf, start, end):
            try:
                accept, tput = float(m.group(1)), float(m.group(2))
            except ValueError:
                continue
            self._decode_n += 1
            self._accept_sum += accept
            self._tput_sum += tput
            offset = m.start()
            self._last_decode = (self._buf_stream_offset + offset, self._timestamp(buf, offset))
            if series.add(accept, tput):
                series.close(*self._last_decode)

    @staticmethod
    def _timestamp(buf: bytes, offset: int) -> str | None:
        ls = buf.rfind(b"\n", 0, offset) + 1
        m = _TIMESTAMP_RE.match(buf[ls : ls + 32].decode("ascii", "replace"))
        return m.group(1) if m else None

    def _on_marked_line(self, buf: bytes, line_start: int, line_end: int) -> None:
        if buf.find(SERVER_ARGS_MARK, line_start, line_end) >= 0:
            self._on_startup(buf, line_start, line_end)
        else:
            self._on_dflash(buf, line_start, line_end)

    def _text(self, raw: bytes) -> str:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            self.facts.undecodable_lines += 1
            text = raw.decode("utf-8", "replace")
        return redact_text(text.rstrip("\r"))

    def _on_startup(self, buf: bytes, line_start: int, line_end: int) -> None:
        f = self.facts
        f.startups += 1
        # Facts of an earlier server start do not describe the running server.
        for name in (
            "dflash_init",
            "dflash_attention_backend",
            "dflash_block_size",
            "draft_window_size",
            "compact_cache",
            "block_size_mismatch",
        ):
            setattr(f, name, None)
        f.backend_fallbacks = []
        f.draft_oom = []
        f.decode = DecodeStats()
        self._reset_run()
        text = self._text(buf[line_start:line_end])
        number = self._line_at(buf, line_start)
        f.server_args = LogLine(line=number, text=text[:MAX_EVIDENCE_CHARS])
        dump = text[text.find("server_args=ServerArgs(") :]
        f.server_args_fields = {
            k: _unquote(v) for k, v in _FIELD_RE.findall(dump) if k in SERVER_ARGS_KEYS
        }

    def _on_dflash(self, buf: bytes, line_start: int, line_end: int) -> None:
        f = self.facts
        text = self._text(buf[line_start:line_end])
        line = LogLine(
            line=self._line_at(buf, line_start),
            text=text[:MAX_EVIDENCE_CHARS],
        )
        m = _INIT_RE.search(text)
        if m:
            fields = {k: _unquote(v) for k, v in _FIELD_RE.findall(m.group(1))}
            f.dflash_init = line
            f.dflash_attention_backend = fields.get("attention_backend")
            f.dflash_block_size = _opt_int(fields.get("block_size"))
            window = fields.get("draft_window_size")
            f.draft_window_size = _opt_int(window)
            compact = fields.get("compact_cache")
            f.compact_cache = None if compact is None else compact == "True"
        elif "DFLASH block size mismatch" in text:
            f.block_size_mismatch = line
        elif _FALLBACK_RE.search(text):
            if len(f.backend_fallbacks) < MAX_KEPT_LINES:
                f.backend_fallbacks.append(line)
        elif "DFLASH draft OOM" in text and len(f.draft_oom) < MAX_KEPT_LINES:
            f.draft_oom.append(line)


def scan_log(chunks: Iterable[bytes], path: str) -> LogFacts:
    scanner = LogScanner(path)
    for chunk in chunks:
        scanner.feed(chunk)
    return scanner.result()
