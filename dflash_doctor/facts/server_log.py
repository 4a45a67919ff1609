"""Turn an SGLang server log into LogFacts, in bounded memory, at close to grep's speed.

Two stages: `log_filter` finds the lines that matter in the raw bytes (in-process, or on
the host over SSH); this module reads those lines into facts about the latest server start.
The accept-length/throughput series keeps at most MAX_SERIES points.

Formats, from SGLang's source (read in the published wheels):
- the startup args dump, python/sglang/srt/entrypoints/engine.py: `server_args=ServerArgs(
  model_path='...', ...)` (`logger.info(f"{server_args=}")`, 0.5.11-0.5.18) and
  `server_args={'model_path': '...', ...}` (`resolved_dict()`, 0.5.19-0.5.23). The window
  field is `speculative_dflash_draft_window_size` in 0.5.11 and
  `speculative_draft_window_size` from 0.5.12.
- `Initialized DFLASH draft runner. attention_backend=..., model=..., block_size=...,
  draft_window_size=..., compact_cache=...`: speculative/dflash_worker.py (0.5.11-0.5.23).
- `DFLASH block size mismatch: using speculative_num_draft_tokens=N but draft config
  block_size=M.`: dflash_worker.py (0.5.11-0.5.23).
- `DFLASH draft worker only supports attention_backend in (...) for now, but got 'X'.
  Falling back to 'Y'.` and `DFLASH draft worker does not support 'trtllm_mha' ...
  Falling back to 'Y'.`: dflash_worker.py (0.5.11-0.5.23).
- `Decode batch. #running-req: N, #token: N, token usage: F, accept len: F, [accept rate: F,]
  cuda graph: B, gen throughput (token/s): F, #queue-req: N`: observability/scheduler_
  metrics_mixin.py (0.5.11), managers/scheduler_components/metrics_reporter.py (0.5.13 on);
  `cpu graph` replaces `cuda graph` on CPU.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from dflash_doctor.errors import FactError
from dflash_doctor.facts.log_filter import LogFilter
from dflash_doctor.facts.models import DecodePoint, DecodeStats, LogFacts, LogLine
from dflash_doctor.redact import redact_text

MAX_SERIES = 256
MAX_EVIDENCE_CHARS = 400
MAX_KEPT_LINES = 20
MAX_RECORD_BYTES = 2 * 1024 * 1024

SERVER_ARGS_MARKS = ("server_args=ServerArgs(", "server_args={")
_FIELD_RE = re.compile(r"(\w+)=('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^,()\s]+)")
# The dict form of 0.5.19+: 'key': value
_DICT_FIELD_RE = re.compile(r"'(\w+)': ('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|[^,{}\[\]\s]+)")
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


class LogFactsBuilder:
    """Reads the filter's records (in stream order) into facts about the latest start."""

    def __init__(self, path: str) -> None:
        self.facts = LogFacts(path=path)
        self._reset_run()

    def _reset_run(self) -> None:
        self._series = _Series()
        self._last_decode: tuple[int, str | None] = (0, None)
        self._decode_n = 0
        self._accept_sum = 0.0
        self._tput_sum = 0.0

    def on_decode(self, offset: int, accept: float, tput: float, ts: str | None) -> None:
        self._decode_n += 1
        self._accept_sum += accept
        self._tput_sum += tput
        self._last_decode = (offset, ts)
        if self._series.add(accept, tput):
            self._series.close(offset, ts)

    def on_marked(self, line: int, raw: bytes) -> None:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            self.facts.undecodable_lines += 1
            text = raw.decode("utf-8", "replace")
        text = redact_text(text.rstrip("\r"))
        mark = next((m for m in SERVER_ARGS_MARKS if m in text), None)
        if mark is not None:
            self._on_startup(line, text, mark)
        else:
            self._on_dflash(LogLine(line=line, text=text[:MAX_EVIDENCE_CHARS]), text)

    def finish(self, lines: int, size: int, overlong: int) -> LogFacts:
        f = self.facts
        f.lines, f.bytes_scanned, f.overlong_lines = lines, size, overlong
        d = f.decode
        d.count = self._decode_n
        if self._decode_n:
            d.accept_len_mean = round(self._accept_sum / self._decode_n, 4)
            d.gen_throughput_mean = round(self._tput_sum / self._decode_n, 4)
        d.series = self._series.export(*self._last_decode)
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
        ):
            setattr(f, name, None)
        f.backend_fallbacks = []
        f.draft_oom = []
        f.decode = DecodeStats()
        self._reset_run()
        f.server_args = LogLine(line=line, text=text[:MAX_EVIDENCE_CHARS])
        dump = text[text.find(mark) :]
        pattern = _DICT_FIELD_RE if mark.endswith("{") else _FIELD_RE
        f.server_args_fields = {
            k: _unquote(v) for k, v in pattern.findall(dump) if k in SERVER_ARGS_KEYS
        }

    def _on_dflash(self, line: LogLine, text: str) -> None:
        f = self.facts
        m = _INIT_RE.search(text)
        if m:
            fields = {k: _unquote(v) for k, v in _FIELD_RE.findall(m.group(1))}
            f.dflash_init = line
            f.dflash_attention_backend = fields.get("attention_backend")
            f.dflash_block_size = _opt_int(fields.get("block_size"))
            f.draft_window_size = _opt_int(fields.get("draft_window_size"))
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
    """Scan raw log bytes in-process."""
    builder = LogFactsBuilder(path)
    log_filter = LogFilter(builder.on_marked, builder.on_decode)
    for chunk in chunks:
        log_filter.feed(chunk)
    log_filter.finish()
    return builder.finish(log_filter.lines, log_filter.bytes, log_filter.overlong)


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


def read_filter_output(chunks: Iterable[bytes], path: str) -> LogFacts:
    """Read the records that `log_filter.main` wrote on a host."""
    builder = LogFactsBuilder(path)
    for record in _records(chunks):
        kind, _, rest = record.partition(b"\t")
        try:
            if kind == b"M":
                line, _, raw = rest.partition(b"\t")
                builder.on_marked(int(line), raw)
            elif kind == b"D":
                offset, accept, tput, ts = rest.split(b"\t")
                builder.on_decode(
                    int(offset), float(accept), float(tput), None if ts == b"-" else ts.decode()
                )
            elif kind == b"E":
                lines, size, overlong = (int(x) for x in rest.split(b"\t"))
                return builder.finish(lines, size, overlong)
            else:
                raise ValueError(kind)
        except ValueError:
            raise FactError(f"unexpected log filter output: {record[:60]!r}") from None
    raise FactError("log filter output ended before its end record")
