"""Turn an SGLang server log into LogFacts, in bounded memory, at close to grep's speed.

Two stages: `log_filter` finds the lines that matter in the raw bytes and totals every
decode line (in-process, or on the host over SSH); this module reads the marked lines
into facts about the latest server start, naming each text by its id in
data/log_patterns.json (generated from the wheels of every release; every format, its
version range and file:line are there).

What belongs to which start: a `server_args=` dump opens a start (srt/entrypoints/
engine.py: `server_args=ServerArgs(...)` 0.5.11-0.5.18, `server_args={...}` 0.5.19+).
Most DFLASH lines follow the dump of their start, but some are logged while ServerArgs is
resolved, BEFORE that dump:
- the draft backend fallbacks from 0.5.15 (srt/arg_groups/speculative_hook.py
  `_resolve_dflash_draft_attention_backend`: 0.5.15:255, run by ServerArgs.__post_init__
  (server_args.py:2772); 0.5.19+ by `resolve_once` (launch_server.py:21 in 0.5.19, :29
  in 0.5.23; engine.py:1153 in 0.5.23, before the dump at engine.py:1185); 0.5.11-0.5.14
  log them in the draft worker (dflash_worker.py:114 (0.5.11), dflash_worker_v2.py:121
  (0.5.14)), after it;
- `Max running requests is reset to 48 ...` in every release (server_args.py:3433 in
  0.5.11; arg_groups/speculative_hook.py `_handle_dflash` from 0.5.13, 0.5.23:445).
So a start-up line seen before any dump, or after its start has already initialised the
draft runner, is held for the next dump instead of being cleared by it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from dflash_doctor.errors import FactError
from dflash_doctor.facts.log_patterns import LogPattern, patterns
from dflash_doctor.facts.models import (
    DecodePoint,
    DecodeStats,
    LogEvent,
    LogFacts,
    LogLine,
)
from dflash_doctor.on_host.log_filter import (
    EXACT_BYTES,
    SAMPLE,
    SERVER_ARGS_MARKS,
    DecodeSeries,
    LogFilter,
    Point,
)
from dflash_doctor.on_host.sglang_args import SGLANG_FIELDS
from dflash_doctor.redact import redact_text

MAX_SERIES = 256
MAX_EVIDENCE_CHARS = 400
MAX_KEPT_LINES = 20
MAX_RECORD_BYTES = 2 * 1024 * 1024

_SERVER_ARGS_TEXT = tuple(m.decode() for m in SERVER_ARGS_MARKS)
_FIELD_RE = re.compile(r"(\w+)=('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^,()\s]+)")
# The dict form of 0.5.19+: 'key': value
_DICT_FIELD_RE = re.compile(r"'(\w+)': ('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^,{}\[\]\s]+)")
_INIT_FIELDS_RE = re.compile(r"Initialized DFLASH draft runner\.\s*(.*)$")

# Lines logged while ServerArgs is resolved: before the dump of their start (see above).
_FALLBACKS = (
    "backend_fallback_unsupported",
    "backend_fallback_trtllm",
    "backend_fallback_trtllm_layers",
    "backend_fallback_platform",
)
# `speculative_adaptive disabled: ...` too: logged while ServerArgs is resolved
# (srt/server_args.py 0.5.11:3619-3630; arg_groups/speculative_hook.py 0.5.23:1374-1389).
STARTUP_PATTERNS = frozenset({*_FALLBACKS, "slow_max_running_48", "adaptive_disabled"})
# Known texts of the latest start kept as LogFacts.events.
EVENT_KINDS = frozenset({"reject", "slow"})
EVENT_FACTS = frozenset({"draft_max_position_override", "adaptive_disabled"})

# The server_args fields kept from the log's dump (the table marks them `logged`).
SERVER_ARGS_KEYS = frozenset(key for key, f in SGLANG_FIELDS.items() if f.logged)


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


def _evidence(line: int, text: str) -> LogLine:
    return LogLine(line=line, text=redact_text(text[:MAX_EVIDENCE_CHARS]))


@dataclass
class _Seen:
    count: int
    first: tuple[int, str]
    last: tuple[int, str]


class _Events:
    """Count, first and last line per pattern id; texts redacted only when kept."""

    def __init__(self) -> None:
        self._seen: dict[str, _Seen] = {}

    def add(self, pattern_id: str, line: int, text: str) -> None:
        seen = self._seen.get(pattern_id)
        if seen is None:
            self._seen[pattern_id] = _Seen(1, (line, text), (line, text))
        else:
            seen.count += 1
            seen.last = (line, text)

    def export(self) -> dict[str, LogEvent]:
        return {
            pid: LogEvent(
                pattern=pid,
                count=seen.count,
                first=_evidence(*seen.first),
                last=_evidence(*seen.last),
            )
            for pid, seen in self._seen.items()
        }


def decode_stats(points: list[Point], series: DecodeSeries) -> DecodeStats:
    """DecodeStats from the filter's totals and series (in-process or from the host)."""
    stats = DecodeStats(
        count=series.weight,
        parsed_lines=series.parsed,
        first_timestamp=series.first_ts,
        last_timestamp=series.last_ts,
        graph_off_count=series.graph_off,
        graph_off_first_line=series.graph_off_first,
        graph_off_last_line=series.graph_off_last,
    )
    if series.weight:
        stats.accept_len_mean = round(series.sum_accept / series.weight, 4)
    if series.tput_samples:
        stats.gen_throughput_mean = round(series.sum_tput / series.tput_samples, 4)
    stats.series = [
        DecodePoint(
            offset=offset,
            timestamp=ts,
            accept_len=round(accept / n, 4),
            gen_throughput=round(tput / tput_n, 4) if tput_n else None,
            lines=n,
        )
        for offset, ts, n, accept, tput, tput_n in points
        if n
    ]
    return stats


class LogFactsBuilder:
    """Reads the filter's marked lines (in stream order) into facts about the latest start."""

    def __init__(self, path: str) -> None:
        self.facts = LogFacts(path=path)
        self._patterns = [p for p in patterns().values() if p.kind != "decode"]
        self._pending: list[tuple[LogPattern, int, str]] = []
        self._initialised = False
        self._events = _Events()
        self._crashes = _Events()

    def on_marked(self, line: int, raw: bytes) -> None:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            self.facts.undecodable_lines += 1
            text = raw.decode("utf-8", "replace")
        text = text.rstrip("\r")
        mark = next((m for m in _SERVER_ARGS_TEXT if m in text), None)
        if mark is not None:
            self._on_startup(line, redact_text(text), mark)
            return
        for p in self._patterns:
            m = p.search(text)
            if m is not None:
                self._on_pattern(p, m, line, text)

    def finish(self, lines: int, size: int, overlong: int, decode: DecodeStats) -> LogFacts:
        f = self.facts
        if f.startups == 0:
            # No dump in this log (rotated away): the held lines describe the only start seen.
            for p, line, text in self._pending:
                self._attach(p, line, text)
        f.lines, f.bytes_scanned, f.overlong_lines = lines, size, overlong
        f.decode = decode
        f.events = self._events.export()
        f.crashes = self._crashes.export()
        return f

    def _on_startup(self, line: int, text: str, mark: str) -> None:
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
            "draft_max_position_override",
        ):
            setattr(f, name, None)
        f.backend_fallbacks = []
        f.draft_oom = []
        f.decode = DecodeStats()
        self._events = _Events()
        self._initialised = False
        f.server_args = LogLine(line=line, text=text[:MAX_EVIDENCE_CHARS])
        dump = text[text.find(mark) :]
        pattern = _DICT_FIELD_RE if mark.endswith("{") else _FIELD_RE
        f.server_args_fields = {
            k: _unquote(v) for k, v in pattern.findall(dump) if k in SERVER_ARGS_KEYS
        }
        # What was logged while this start's ServerArgs was resolved belongs to it.
        pending, self._pending = self._pending, []
        for p, pline, ptext in pending:
            self._attach(p, pline, ptext)

    def _on_pattern(self, p: LogPattern, m: re.Match[str], line: int, text: str) -> None:
        if p.kind == "crash":
            self._crashes.add(p.id, line, text)
        if p.id in STARTUP_PATTERNS and (self.facts.startups == 0 or self._initialised):
            self._pending.append((p, line, text))
            return
        if p.id == "dflash_init":
            self._on_init(line, text)
        elif p.id == "draft_max_position_override":
            self.facts.draft_max_position_override = _opt_int(m.group(1))
        self._attach(p, line, text)

    def _attach(self, p: LogPattern, line: int, text: str) -> None:
        f = self.facts
        if p.id in _FALLBACKS:
            if len(f.backend_fallbacks) < MAX_KEPT_LINES:
                f.backend_fallbacks.append(_evidence(line, text))
        elif p.id == "block_size_mismatch":
            f.block_size_mismatch = _evidence(line, text)
        elif p.id == "crash_draft_oom" and len(f.draft_oom) < MAX_KEPT_LINES:
            f.draft_oom.append(_evidence(line, text))
        if p.kind in EVENT_KINDS or p.id in EVENT_FACTS:
            self._events.add(p.id, line, text)

    def _on_init(self, line: int, text: str) -> None:
        f = self.facts
        self._initialised = True
        m = _INIT_FIELDS_RE.search(text)
        fields = {k: _unquote(v) for k, v in _FIELD_RE.findall(m.group(1) if m else "")}
        f.dflash_init = _evidence(line, text)
        f.dflash_attention_backend = fields.get("attention_backend")
        f.dflash_block_size = _opt_int(fields.get("block_size"))
        f.draft_window_size = _opt_int(fields.get("draft_window_size"))
        compact = fields.get("compact_cache")
        f.compact_cache = None if compact is None else compact == "True"


def scan_log(
    chunks: Iterable[bytes],
    path: str,
    *,
    exact_bytes: int = EXACT_BYTES,
    sample: int = SAMPLE,
) -> LogFacts:
    """Scan raw log bytes in-process (exact_bytes and sample: see log_filter)."""
    builder = LogFactsBuilder(path)
    log_filter = LogFilter(builder.on_marked, exact_bytes=exact_bytes, sample=sample)
    for chunk in chunks:
        log_filter.feed(chunk)
    log_filter.finish()
    decode = decode_stats(log_filter.decode.export(), log_filter.decode)
    return builder.finish(log_filter.lines, log_filter.bytes, log_filter.overlong, decode)


def _records(chunks: Iterable[bytes]) -> Iterable[bytes]:
    carry = b""
    for chunk in chunks:
        carry += chunk
        *records, carry = carry.split(b"\n")
        if len(carry) > MAX_RECORD_BYTES:
            raise FactError("log filter output has an overlong record")
        yield from records
    if carry:
        raise FactError("log filter output ended mid-record (was it cut off?)")


def _ts(raw: bytes) -> str | None:
    return None if raw == b"-" else raw.decode("ascii")


def read_filter_output(chunks: Iterable[bytes], path: str) -> LogFacts:
    """Read the records that `log_filter.main` wrote on a host."""
    builder = LogFactsBuilder(path)
    points: list[Point] = []
    series = DecodeSeries()
    for record in _records(chunks):
        kind, _, rest = record.partition(b"\t")
        try:
            if kind == b"M":
                line, _, raw = rest.partition(b"\t")
                builder.on_marked(int(line), raw)
            elif kind == b"P":
                if len(points) >= MAX_SERIES:
                    raise ValueError("too many points")
                offset, ts, n, accept, tput, tput_n = rest.split(b"\t")
                points.append(
                    (int(offset), _ts(ts), int(n), float(accept), float(tput), int(tput_n))
                )
            elif kind == b"T":
                parsed, weight, accept, tput, tput_n, *more = rest.split(b"\t")
                per_point, off, off_first, off_last, first, last, at = more
                series.parsed, series.weight = int(parsed), int(weight)
                series.sum_accept = float(accept)
                series.sum_tput, series.tput_samples = float(tput), int(tput_n)
                series.per_point, series.graph_off = int(per_point), int(off)
                series.graph_off_first = int(off_first) or None
                series.graph_off_last = int(off_last) or None
                series.first_ts, series.last_ts, series.last_offset = _ts(first), _ts(last), int(at)
            elif kind == b"E":
                lines, size, overlong = (int(x) for x in rest.split(b"\t"))
                return builder.finish(lines, size, overlong, decode_stats(points, series))
            else:
                raise ValueError(kind)
        except (ValueError, UnicodeDecodeError):
            raise FactError(f"unexpected log filter output: {record[:60]!r}") from None
    raise FactError("log filter output ended before its end record")
