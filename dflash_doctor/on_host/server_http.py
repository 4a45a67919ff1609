"""Ask a live SGLang server over its HTTP API, from the host itself (stdlib only).

Shipped to the host and run as `python3 -c SOURCE REQUEST_JSON` through the transport,
so the requests go to 127.0.0.1:PORT on the host (over SSH too) and nothing but this
script's JSON answer travels back. It imports nothing from dflash_doctor.

The API key never crosses the transport: the script reads it on the host from the
server process's own command line (`/proc/PID/cmdline`, `--api-key` / `--admin-api-key`),
else vLLM's VLLM_API_KEY from its environment (`/proc/PID/environ`), and sends it as
`Authorization: Bearer ...` (SGLang's `utils/auth.py`: `_check_bearer_token`, 0.5.11
auth.py:103; /health and /metrics need no key, auth.py:100; vLLM guards only the /v1 paths
among those asked: vllm/entrypoints/serve/middleware/authenticate.py 0.34.0:11, 59).
Every key whose name looks secret is dropped from what the server answers, and the key's
own text is replaced by `***` wherever it appears in the output. A redirect is never
followed (urllib would forward the key to wherever it points) and no proxy from the
environment is used.

Operations (REQUEST_JSON: {"host", "port", "pid", "timeout", "ops": [...]}):
- info: GET /server_info, else /get_server_info (both served 0.5.11..0.5.23:
  srt/entrypoints/http_server.py 0.5.11:621,631 ... 0.5.23:853,863);
- metrics: GET /metrics, the `sglang:*` samples (only when --enable-metrics);
- load: GET /v1/loads?include=core (entrypoints/v1_loads.py 0.5.11:134, 0.5.23:96);
- flush: POST /flush_cache (srt/entrypoints/http_server.py 0.5.11:762 ... 0.5.23:1025);
- cell: `concurrency` concurrent POST /generate. Without `text`: `input_ids` drawn with a
  seeded generator over [0, vocab), `ignore_eos` and a fixed `max_new_tokens` (the
  content-free control). With `text`: real text, `{"payload": base64(zlib(JSON
  {"docs": [...]})), "requests": [{"doc", "start", "end", "task"}], "size": N|null}`;
  each prompt is the doc's [start:end) excerpt (cycled when it must be longer) and the task,
  sized to N tokens with the server's own tokenizer (POST /v1/tokenize, served 0.5.11..
  0.5.23: srt/entrypoints/http_server.py 0.5.11:1525 ... 0.5.23:1907; else the
  chars-per-token hint) or sent as given when N is null; natural stop, `max_new_tokens` a
  cap. Per request the `meta_info` fields SGLang sets (tokenizer_manager.py
  0.5.11:2102-2110, 0.5.23:3164-3172) and the acceptance histogram
  (`spec_accept_histogram` 0.5.11:2118 .. 0.5.20:2991, `spec_correct_drafts_histogram`
  0.5.20:2987, 0.5.23:3199), and whether the response carried reasoning tokens;
- version: GET /version, vLLM's running release (`{"version": ...}`,
  vllm/entrypoints/serve/instrumentator/basic.py 0.34.0:53-56);
- vllm_metrics: GET /metrics, the `vllm:spec_decode_*` samples (vLLM always serves it:
  vllm/v1/spec_decode/metrics.py 0.34.0:229-231, 255-256 name the counters) and the
  scheduler gauges `vllm:num_requests_running` / `_waiting` (vllm/v1/metrics/loggers.py
  0.34.0:528, 538);
- vllm_cell: the cell op against vLLM's OpenAI API, `concurrency` concurrent POST
  /v1/completions (vllm/entrypoints/openai/completion/api_router.py 0.34.0:38), text sized
  with vLLM's POST /tokenize (vllm/entrypoints/serve/tokenize/api_router.py 0.34.0:36; its
  `count`: vllm/entrypoints/serve/tokenize/protocol.py 0.34.0:186-189); per request
  `usage` and, where the server sends it, `metrics.speculative_decoding`;
- wait: sleep a few seconds (bounded) between two scrapes of a window;
- repeat: flush, then the same greedy prompt (`text`, temperature 0) twice to
  POST /generate; both answers' `output_ids` (tokenizer_manager.py 0.5.11:1745, 0.5.23:2653)
  and the second's `cached_tokens` (tokenizer_manager.py 0.5.11:1691, 0.5.23:2557).
"""

from __future__ import annotations

import base64
import contextlib
import json
import random
import re
import sys
import threading
import time
import urllib.error
import urllib.request
import zlib
from typing import Any

MAX_BODY = 32 * 1024 * 1024
MAX_METRIC_SAMPLES = 5000
SECRET_KEY = re.compile(
    # As dflash_doctor/redact.py: "token" only as a whole word (hf_token), never *_tokens.
    r"(api[-_]?key|secret|passw|credential|private[-_]?key"
    r"|(?<![A-Za-z])token(?![A-Za-z_])|(?<![A-Za-z])auth(?![A-Za-z]))",
    re.IGNORECASE,
)
META_KEYS = (
    "prompt_tokens",
    "completion_tokens",
    "spec_accept_length",
    "spec_accept_rate",
    "spec_verify_ct",
    "e2e_latency",
)
HISTOGRAM_KEYS = ("spec_correct_drafts_histogram", "spec_accept_histogram")
THINK_TAGS = ("<think>", "</think>")
MAX_PROBE_IDS = 4096  # output ids kept per answer of the repeated prompt
MAX_TEXT_PAYLOAD = 8 * 1024 * 1024  # the decompressed text of one cell
SIZE_ROUNDS = 6  # tokenize-and-trim rounds to reach a cell's context length
SIZE_TOLERANCE = 0.02
_PROM = re.compile(r"^(sglang:[A-Za-z0-9_:]+)(\{[^}]*\})?\s+(\S+)")
# vLLM's spec-decode counters and its two scheduler gauges (bench refuses a busy server).
_VLLM_PROM = re.compile(
    r"^(vllm:spec_decode_[A-Za-z0-9_:]+|vllm:num_requests_(?:running|waiting))"
    r"(\{[^}]*\})?\s+(\S+)"
)
MAX_WAIT_S = 60.0
MAX_VERSION_CHARS = 64
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def api_keys(pid: int | None) -> tuple[str | None, str | None]:
    """(api_key, admin_api_key) from the server's command line on this host."""
    if pid is None:
        return None, None
    try:
        with open(f"/proc/{int(pid)}/cmdline", "rb") as f:
            argv = [a.decode("utf-8", "replace") for a in f.read(1 << 20).split(b"\0")]
    except OSError:
        return None, None
    found: dict[str, str] = {}
    for i, arg in enumerate(argv):
        for flag in ("--api-key", "--admin-api-key"):
            if arg == flag and i + 1 < len(argv):
                found[flag] = argv[i + 1]
            elif arg.startswith(flag + "="):
                found[flag] = arg[len(flag) + 1 :]
    key = found.get("--api-key") or environ_value(pid, "VLLM_API_KEY")
    return key, found.get("--admin-api-key")


def environ_value(pid: int, name: str) -> str | None:
    """One variable of the server's environment (`/proc/PID/environ`), None where unset or
    unreadable. vLLM takes its key from VLLM_API_KEY when no --api-key is given
    (vllm/entrypoints/serve/middleware/register.py 0.34.0:32-36)."""
    try:
        with open(f"/proc/{int(pid)}/environ", "rb") as f:
            entries = f.read(1 << 20).split(b"\0")
    except OSError:
        return None
    prefix = name.encode() + b"="
    for entry in entries:
        if entry.startswith(prefix):
            return entry[len(prefix) :].decode("utf-8", "replace") or None
    return None


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is answered as its own status, never followed: urllib would re-send every
    header, `Authorization` included, to wherever `Location` points (another host or port)."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


# The server is asked directly: no proxy from the environment (`http_proxy` would receive
# the key too), no redirect followed.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect)


class Client:
    def __init__(self, req: dict[str, Any]) -> None:
        self.base = f"http://{req.get('host') or '127.0.0.1'}:{int(req['port'])}"
        self.timeout = float(req.get("timeout") or 30)
        self.key, self.admin_key = api_keys(req.get("pid"))
        self.engine = "sglang"  # "vllm" while a vLLM op runs (its tokenize endpoint)

    def call(
        self, method: str, path: str, body: Any = None, admin: bool = False
    ) -> tuple[int, bytes]:
        """One request, answered in full within `timeout` seconds of wall time, or OSError.

        The socket timeout bounds each wait for a byte only: a server that drips one byte a
        second keeps a read going for ever. The request runs in a daemon thread that is
        abandoned at the deadline (this process ends after its answer)."""
        box: list[Any] = []

        def work() -> None:
            try:
                box.append(self._call(method, path, body, admin))
            except BaseException as e:  # handed to the caller's thread as it is
                box.append(e)

        worker = threading.Thread(target=work, daemon=True)
        worker.start()
        worker.join(self.timeout)
        if not box:
            raise TimeoutError(f"{path}: no complete answer within {self.timeout:g}s")
        if isinstance(box[0], BaseException):
            raise box[0]
        return box[0]  # type: ignore[no-any-return]

    def _call(self, method: str, path: str, body: Any, admin: bool) -> tuple[int, bytes]:
        data = None if body is None else json.dumps(body).encode()
        r = urllib.request.Request(self.base + path, data=data, method=method)
        if data is not None:
            r.add_header("Content-Type", "application/json")
        key = (self.admin_key or self.key) if admin else self.key
        if key:
            r.add_header("Authorization", "Bearer " + key)
        try:
            with _OPENER.open(r, timeout=self.timeout) as resp:
                return resp.status, resp.read(MAX_BODY)
        except urllib.error.HTTPError as e:
            return e.code, e.read(65536)


def scrub(value: Any, depth: int = 0) -> Any:
    """Drop every secret-looking key; bound the nesting."""
    if depth > 12:
        return None
    if isinstance(value, dict):
        return {
            str(k): scrub(v, depth + 1)
            for k, v in value.items()
            if not SECRET_KEY.search(str(k)) or v in (None, "", False)
        }
    if isinstance(value, list):
        return [scrub(v, depth + 1) for v in value[:1000]]
    return value


def short(data: bytes) -> str:
    return data[:300].decode("utf-8", "replace").strip()


def op_info(c: Client) -> dict[str, Any]:
    tried = []
    for path in ("/server_info", "/get_server_info"):
        status, data = c.call("GET", path)
        if status == 200:
            try:
                body = json.loads(data)
            except ValueError:
                return {"error": f"{path}: not JSON"}
            if not isinstance(body, dict):
                return {"error": f"{path}: not a JSON object"}
            return {"endpoint": path, "body": scrub(body)}
        tried.append(f"{path}: HTTP {status} {short(data)}")
    return {"error": "; ".join(tried)}


def parse_prometheus(text: str, sample: Any = _PROM) -> dict[str, list[dict[str, Any]]]:
    """The samples whose names `sample` matches (SGLang's by default), bounded in count."""
    out: dict[str, list[dict[str, Any]]] = {}
    count = 0
    for line in text.splitlines():
        m = sample.match(line)
        if m is None:
            continue
        try:
            value = float(m.group(3))
        except ValueError:
            continue
        if value != value or value in (float("inf"), float("-inf")):
            continue
        labels = dict(_LABEL.findall(m.group(2) or ""))
        out.setdefault(m.group(1), []).append({"labels": scrub(labels), "value": value})
        count += 1
        if count >= MAX_METRIC_SAMPLES:
            break
    return out


def op_metrics(c: Client) -> dict[str, Any]:
    status, data = c.call("GET", "/metrics")
    if status != 200:
        return {"error": f"/metrics: HTTP {status} (metrics off: --enable-metrics)"}
    return {"samples": parse_prometheus(data.decode("utf-8", "replace"))}


def op_version(c: Client) -> dict[str, Any]:
    """vLLM's running release from GET /version: a short printable string, else an error."""
    status, data = c.call("GET", "/version")
    if status != 200:
        return {"error": f"/version: HTTP {status} {short(data)}"}
    try:
        version = json.loads(data).get("version")
    except (ValueError, AttributeError):
        return {"error": "/version: not a JSON object"}
    if not isinstance(version, str) or not version.isprintable():
        return {"error": "/version: no version string"}
    return {"version": version[:MAX_VERSION_CHARS]}


def op_vllm_metrics(c: Client) -> dict[str, Any]:
    """vLLM's spec-decode counters from GET /metrics (the body is bounded by MAX_BODY)."""
    status, data = c.call("GET", "/metrics")
    if status != 200:
        return {"error": f"/metrics: HTTP {status} {short(data)}"}
    return {"samples": parse_prometheus(data.decode("utf-8", "replace"), _VLLM_PROM)}


def op_load(c: Client) -> dict[str, Any]:
    status, data = c.call("GET", "/v1/loads?include=core")
    if status != 200:
        return {"error": f"/v1/loads: HTTP {status} {short(data)}"}
    try:
        loads = json.loads(data).get("loads") or []
        running = sum(int(x.get("num_running_reqs", 0)) for x in loads)
        waiting = sum(int(x.get("num_waiting_reqs", 0)) for x in loads)
    except (ValueError, AttributeError, TypeError):
        return {"error": "/v1/loads: unexpected answer"}
    return {"running": running, "waiting": waiting}


def op_flush(c: Client) -> dict[str, Any]:
    status, data = c.call("POST", "/flush_cache", admin=True)
    if status != 200:
        return {"error": f"/flush_cache: HTTP {status} {short(data)}"}
    return {"flushed": True}


def prompt(seed: str, index: int, length: int, vocab: int) -> list[int]:
    # A string seed is hashed (random.seed version 2): the same ids on every Python 3.
    rng = random.Random(f"{seed}/{index}")
    return [rng.randrange(vocab) for _ in range(length)]


def unpack_docs(text: dict[str, Any]) -> list[str]:
    """The documents of a text cell: base64 of zlib of {"docs": [str, ...]}, bounded."""
    d = zlib.decompressobj()
    data = d.decompress(base64.b64decode(str(text["payload"])), MAX_TEXT_PAYLOAD)
    if d.unconsumed_tail:
        raise ValueError("text payload over its bound")
    docs = json.loads(data.decode("utf-8"))["docs"]
    if not isinstance(docs, list) or not all(isinstance(x, str) for x in docs):
        raise ValueError("text payload without documents")
    return docs


def excerpt(doc: str, start: int, end: int, chars: int | None) -> str:
    """The doc's [start:end) segment, cut or cycled to `chars` characters (None: as is)."""
    segment = doc[start:end] or doc or " "
    if chars is None or chars <= len(segment):
        return segment if chars is None else segment[: max(1, chars)]
    return (segment * (chars // len(segment) + 1))[:chars]


def compose(body: str, task: str) -> str:
    """A prompt: the excerpt, then the task that depends on it."""
    return f"{body}\n\n{task}" if task else body


def token_counts(c: Client, prompts: list[str]) -> list[int] | None:
    """The server's own token counts of the prompts (POST /v1/tokenize), None without it."""
    if c.engine == "vllm":
        return vllm_token_counts(c, prompts)
    status, data = c.call("POST", "/v1/tokenize", {"prompt": prompts})
    if status != 200:
        return None
    counts = json.loads(data).get("count")
    if not isinstance(counts, list) or len(counts) != len(prompts):
        return None
    return [int(k) for k in counts]


def vllm_token_counts(c: Client, prompts: list[str]) -> list[int] | None:
    """vLLM's own token counts (POST /tokenize, one prompt a request: its `prompt` is one
    string), None without it."""
    counts = []
    for text in prompts:
        status, data = c.call("POST", "/tokenize", {"prompt": text})
        try:
            count = json.loads(data).get("count") if status == 200 else None
        except (ValueError, AttributeError):
            count = None  # not vLLM's answer: sized by the estimate instead
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            return None
        counts.append(count)
    return counts


def next_chars(chars: int, count: int, size: int, bounds: list[list[int]]) -> int:
    """The next excerpt length: between the lengths measured under and over the size,
    interpolated (text density varies along an excerpt); scaled by the ratio until both
    are known. `bounds` is [[chars, count] under, [chars, count] over]."""
    (lo, lo_k), (hi, hi_k) = bounds
    if hi_k <= lo_k or hi <= lo + 1:
        return max(1, int(chars * size / max(count, 1)))
    guess = lo + (size - lo_k) * (hi - lo) // (hi_k - lo_k)
    return min(max(guess, lo + 1), hi - 1)


def text_prompts(c: Client, text: dict[str, Any], n: int) -> tuple[list[str], str]:
    """The cell's n prompts and how they were sized: "tokenize", "estimate", "as given"."""
    docs = unpack_docs(text)
    reqs = [r for r in text.get("requests") or [] if isinstance(r, dict)][:n]
    if len(reqs) < n:
        raise ValueError("fewer text requests than the concurrency")

    def build(chars: list[int | None]) -> list[str]:
        return [
            compose(
                excerpt(docs[int(r["doc"])], int(r["start"]), int(r["end"]), chars[i]),
                str(r.get("task") or ""),
            )
            for i, r in enumerate(reqs)
        ]

    size = text.get("size")
    if not size:
        return build([None] * n), "as given"
    size = int(size)
    chars: list[int | None] = [int(size * float(text.get("chars_per_token") or 4.0))] * n
    best: list[tuple[int, int | None]] = [(1 << 30, ch) for ch in chars]  # (error, chars)
    bounds = [[[0, 0], [0, 0]] for _ in range(n)]  # [chars, count] under / over the size
    sized_by = "estimate"
    for _ in range(SIZE_ROUNDS):
        counts = token_counts(c, build(chars))
        if counts is None:
            break
        sized_by = "tokenize"
        for i, k in enumerate(counts):
            if abs(k - size) < best[i][0]:
                best[i] = (abs(k - size), chars[i])
            bounds[i][0 if k <= size else 1] = [chars[i] or 1, k]
        if all(err <= max(2, size * SIZE_TOLERANCE) for err, _ in best):
            break
        chars = [next_chars(chars[i] or 1, k, size, bounds[i]) for i, k in enumerate(counts)]
    # Send what was measured closest (never an unmeasured last guess).
    chars = [ch for _, ch in best]
    return build(chars), sized_by


def cell_bodies(c: Client, cell: dict[str, Any]) -> tuple[list[dict[str, Any]], str | None]:
    """The /generate bodies of a cell and how its text was sized (None: random ids)."""
    n = int(cell["concurrency"])
    params: dict[str, Any] = {
        "max_new_tokens": int(cell["max_new_tokens"]),
        "temperature": float(cell["temperature"]),
    }
    text = cell.get("text")
    if isinstance(text, dict):
        prompts, sized_by = text_prompts(c, text, n)
        return [{"text": p, "sampling_params": dict(params)} for p in prompts], sized_by
    seed, ctx, vocab = str(cell["seed"]), int(cell["context"]), int(cell["vocab"])
    control: dict[str, Any] = {**params, "ignore_eos": True}  # content-free: run to the cap
    bodies: list[dict[str, Any]] = [
        {"input_ids": prompt(seed, i, ctx, vocab), "sampling_params": dict(control)}
        for i in range(n)
    ]
    return bodies, None


def carried_reasoning(text: Any, meta: dict[str, Any]) -> bool | None:
    """Whether a response carried reasoning tokens: a think tag in its text, or SGLang's own
    count (`reasoning_tokens`, tokenizer_manager.py 0.5.11:1689, 0.5.23:2555; counted only for
    requests that ask for reasoning). None where neither is there to read."""
    count = meta.get("reasoning_tokens")
    if isinstance(count, int) and count > 0:
        return True
    if isinstance(text, str):
        return any(tag in text for tag in THINK_TAGS)
    return False if isinstance(count, int) else None


def request_row(meta: dict[str, Any], latency: float, text: Any = None) -> dict[str, Any]:
    """What one request's `meta_info` and text say, bounded and typed."""
    row: dict[str, Any] = {"latency_s": latency}
    reasoning = carried_reasoning(text, meta)
    if reasoning is not None:
        row["reasoning"] = reasoning
    for key in META_KEYS:
        if isinstance(meta.get(key), (int, float)):
            row[key] = meta[key]
    for key in HISTOGRAM_KEYS:
        hist = meta.get(key)
        if isinstance(hist, list) and all(isinstance(x, int) for x in hist[:64]):
            row["accept_histogram"] = hist[:64]
            break
    finish = meta.get("finish_reason")
    if isinstance(finish, dict) and isinstance(finish.get("type"), str):
        row["finish"] = finish["type"][:20]
    return row


def op_cell(c: Client, cell: dict[str, Any]) -> dict[str, Any]:
    bodies, sized_by = cell_bodies(c, cell)

    def row(out: Any, latency: float) -> dict[str, Any]:
        meta = out.get("meta_info") or {}
        return request_row(meta if isinstance(meta, dict) else {}, latency, out.get("text"))

    answer = concurrent(c, "/generate", bodies, row)
    if sized_by is not None:
        answer["sized_by"] = sized_by
    return answer


def concurrent(c: Client, path: str, bodies: list[dict[str, Any]], row: Any) -> dict[str, Any]:
    """POST each body to `path` at once (a barrier starts them together); each answer's row
    (`row(json, latency)`) or error, and the wall time of them all."""
    n = len(bodies)
    results: list[dict[str, Any]] = [{} for _ in range(n)]
    barrier = threading.Barrier(n)

    def one(i: int) -> None:
        with contextlib.suppress(threading.BrokenBarrierError):
            barrier.wait(timeout=c.timeout)
        start = time.monotonic()
        try:
            status, data = c.call("POST", path, bodies[i])
        except OSError as e:
            results[i] = {"error": f"{path}: {e}"}
            return
        latency = time.monotonic() - start
        if status != 200:
            results[i] = {"error": f"{path}: HTTP {status} {short(data)}"}
            return
        try:
            out = json.loads(data)
            results[i] = row(out, latency)
        except (ValueError, AttributeError, TypeError, KeyError, IndexError):
            results[i] = {"error": f"{path}: not the expected JSON"}

    start = time.monotonic()
    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"wall_s": time.monotonic() - start, "requests": results}


def vllm_bodies(c: Client, cell: dict[str, Any]) -> tuple[list[dict[str, Any]], str | None]:
    """The /v1/completions bodies of a cell and how its text was sized (None: random ids).
    CompletionRequest takes `prompt` as a string or token ids, `max_tokens`, `temperature`,
    `ignore_eos` (vllm/entrypoints/openai/completion/protocol.py 0.34.0:49-85)."""
    c.engine = "vllm"
    n = int(cell["concurrency"])
    params: dict[str, Any] = {
        "max_tokens": int(cell["max_new_tokens"]),
        "temperature": float(cell["temperature"]),
    }
    text = cell.get("text")
    if isinstance(text, dict):
        prompts, sized_by = text_prompts(c, text, n)
        return [{"prompt": p, **params} for p in prompts], sized_by
    seed, ctx, vocab = str(cell["seed"]), int(cell["context"]), int(cell["vocab"])
    ids = [prompt(seed, i, ctx, vocab) for i in range(n)]
    return [{"prompt": p, **params, "ignore_eos": True} for p in ids], None


def vllm_row(out: Any, latency: float) -> dict[str, Any]:
    """One CompletionResponse as a request row: `usage`, the choice's `finish_reason` and
    text, and the per-request `metrics.speculative_decoding` a server started with
    `--per-request-spec-decode-metrics` sends from 0.29.0 on (`mean_acceptance_length`,
    `num_spec_steps`, `acceptance_histogram`:
    vllm/entrypoints/generate/base/protocol.py 0.34.0:100-129)."""
    usage = out.get("usage") or {}
    choices = out.get("choices") or [{}]
    choice = choices[0] if isinstance(choices[0], dict) else {}
    text = choice.get("text")
    row: dict[str, Any] = {"latency_s": latency}
    for key in ("prompt_tokens", "completion_tokens"):
        if isinstance(usage.get(key), int):
            row[key] = usage[key]
    if isinstance(text, str):
        row["reasoning"] = any(tag in text for tag in THINK_TAGS)
    if isinstance(choice.get("finish_reason"), str):
        row["finish"] = choice["finish_reason"][:20]
    spec = (out.get("metrics") or {}).get("speculative_decoding")
    if isinstance(spec, dict):
        if isinstance(spec.get("mean_acceptance_length"), (int, float)):
            row["spec_accept_length"] = spec["mean_acceptance_length"]
        if isinstance(spec.get("num_spec_steps"), int):
            row["spec_verify_ct"] = spec["num_spec_steps"]
        hist = spec.get("acceptance_histogram")
        if isinstance(hist, list) and all(isinstance(x, int) for x in hist[:64]):
            row["accept_histogram"] = hist[:64]
    return row


def op_vllm_cell(c: Client, cell: dict[str, Any]) -> dict[str, Any]:
    """A cell against vLLM's OpenAI API: `concurrency` concurrent POST /v1/completions."""
    bodies, sized_by = vllm_bodies(c, cell)
    answer = concurrent(c, "/v1/completions", bodies, vllm_row)
    if sized_by is not None:
        answer["sized_by"] = sized_by
    return answer


def op_wait(op: dict[str, Any]) -> dict[str, Any]:
    """Sleep `seconds` (at most MAX_WAIT_S) between two scrapes: a window of traffic."""
    seconds = min(max(float(op.get("seconds") or 0), 0.0), MAX_WAIT_S)
    start = time.monotonic()
    time.sleep(seconds)
    return {"waited_s": time.monotonic() - start}


def generate_ids(c: Client, body: dict[str, Any]) -> tuple[list[int], dict[str, Any]]:
    """One /generate: its output ids (bounded) and meta_info; ValueError on a failed one."""
    status, data = c.call("POST", "/generate", body)
    if status != 200:
        raise ValueError(f"/generate: HTTP {status} {short(data)}")
    out = json.loads(data)
    ids = out.get("output_ids") if isinstance(out, dict) else None
    if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids[:MAX_PROBE_IDS]):
        raise ValueError("/generate: no output_ids in the answer")
    meta = out.get("meta_info")
    return ids[:MAX_PROBE_IDS], meta if isinstance(meta, dict) else {}


def op_repeat(c: Client, op: dict[str, Any]) -> dict[str, Any]:
    """The same greedy prompt twice after a cache flush: the second reuses the first's
    prefix from the radix cache. Both answers' ids, and the second's cached tokens."""
    flushed = op_flush(c)
    if "error" in flushed:
        return flushed
    params = {"max_new_tokens": int(op["max_new_tokens"]), "temperature": 0.0}
    body = {"text": str(op["text"]), "sampling_params": params}
    try:
        first, meta1 = generate_ids(c, body)
        second, meta2 = generate_ids(c, body)
    except ValueError as e:
        return {"error": str(e)[:300]}
    answer: dict[str, Any] = {"first": first, "second": second}
    for key, meta in (("prompt_tokens", meta1), ("cached_tokens", meta2)):
        if isinstance(meta.get(key), int):
            answer[key] = meta[key]
    return answer


def main() -> int:
    sys.stdout.write(answer(json.loads(sys.argv[1])) + "\n")
    return 0


def answer(req: dict[str, Any]) -> str:
    """The JSON answer to one request (the bundle calls this in its own process)."""
    c = Client(req)
    out = []
    for op in req.get("ops") or []:
        kind = op.get("op")
        try:
            if kind == "info":
                out.append(op_info(c))
            elif kind == "metrics":
                out.append(op_metrics(c))
            elif kind == "version":
                out.append(op_version(c))
            elif kind == "vllm_metrics":
                out.append(op_vllm_metrics(c))
            elif kind == "load":
                out.append(op_load(c))
            elif kind == "flush":
                out.append(op_flush(c))
            elif kind == "cell":
                out.append(op_cell(c, op))
            elif kind == "vllm_cell":
                out.append(op_vllm_cell(c, op))
            elif kind == "wait":
                out.append(op_wait(op))
            elif kind == "repeat":
                out.append(op_repeat(c, op))
            else:
                out.append({"error": f"unknown op {kind!r}"})
        except OSError as e:
            reason = getattr(e, "reason", None) or e
            out.append({"error": f"{c.base}: {reason}"})
        except (
            ValueError,
            RecursionError,
            TypeError,
            AttributeError,
            KeyError,
            IndexError,
            zlib.error,
        ) as e:
            # A hostile or broken answer: one line, never a traceback.
            out.append({"error": f"{c.base}: unreadable answer ({type(e).__name__})"})
    text = json.dumps({"results": out})
    for secret in (c.key, c.admin_key):
        if secret:
            text = text.replace(secret, "***")
    return text


if __name__ == "__main__":
    sys.exit(main())
