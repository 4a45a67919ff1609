"""vLLM's /version and /metrics as the shipped client asks them (on_host/server_http.py ops
`version`, `vllm_metrics`) from a real HTTP server on 127.0.0.1, then typed
(facts/vllm_metrics.py): the counters of a good answer, and one line for a hostile one."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from dflash_doctor.errors import FactError
from dflash_doctor.facts.vllm_metrics import parse_vllm_runtime, spec_decode
from dflash_doctor.on_host import server_http

LABELS = 'engine="0",model_name="m"'
GOOD = "\n".join(
    [
        "# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.",
        "# TYPE vllm:spec_decode_num_drafts_total counter",
        f"vllm:spec_decode_num_drafts_total{{{LABELS}}} 200.0",
        f"vllm:spec_decode_num_drafts_created{{{LABELS}}} 1.7963211308041646e+09",
        f"vllm:spec_decode_num_draft_tokens_total{{{LABELS}}} 600.0",
        f"vllm:spec_decode_num_accepted_tokens_total{{{LABELS}}} 50.0",
        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{LABELS},position="0"}} 40.0',
        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{LABELS},position="1"}} 10.0',
        f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{LABELS},position="2"}} 0.0',
        'vllm:num_requests_running{engine="0",model_name="m"} 1.0',
        "sglang:token_usage 0.5",
    ]
)


@contextlib.contextmanager
def serving(routes: dict[str, tuple[int, bytes]]) -> Iterator[int]:
    """A real HTTP server on 127.0.0.1 answering each path with (status, body)."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            status, body = routes.get(self.path, (404, b"{}"))
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()


def ask(routes: dict[str, tuple[int, bytes]]) -> list[dict[str, Any]]:
    with serving(routes) as port:
        ops = [{"op": "version"}, {"op": "vllm_metrics"}]
        request = {"host": "127.0.0.1", "port": port, "pid": None, "timeout": 10, "ops": ops}
        results: list[dict[str, Any]] = json.loads(server_http.answer(request))["results"]
        return results


def test_a_served_answer_is_the_counters_and_the_running_release() -> None:
    """Only the spec-decode samples travel; the counters and rates are vLLM's recipes."""
    version, metrics = ask(
        {"/version": (200, b'{"version": "0.34.0"}'), "/metrics": (200, GOOD.encode())}
    )
    assert set(metrics["samples"]) == {
        "vllm:spec_decode_num_drafts_total",
        "vllm:spec_decode_num_drafts_created",
        "vllm:spec_decode_num_draft_tokens_total",
        "vllm:spec_decode_num_accepted_tokens_total",
        "vllm:spec_decode_num_accepted_tokens_per_pos_total",
        # the scheduler's gauges travel too: bench refuses a busy server by them
        "vllm:num_requests_running",
    }  # only spec-decode samples and the request gauges travel, never sglang:token_usage
    runtime = parse_vllm_runtime(version, metrics, "http://127.0.0.1:8000")
    assert runtime.version == "0.34.0"
    spec = runtime.spec_decode
    assert spec is not None and (spec.drafts, spec.draft_tokens, spec.accepted) == (200, 600, 50)
    assert spec.accepted_per_pos == [40, 10, 0]
    assert spec.mean_acceptance_length == 1.25
    assert spec.per_position_rates == [0.2, 0.05, 0.0]


def test_two_engines_are_summed() -> None:
    """Data-parallel engines each report their own label set; the fact sums them."""
    text = GOOD + "\n" + GOOD.replace('engine="0"', 'engine="1"')
    _, metrics = ask({"/metrics": (200, text.encode())})
    spec = spec_decode(metrics)
    assert spec is not None and spec.drafts == 400 and spec.accepted_per_pos == [80, 20, 0]


def test_a_server_without_speculative_decoding_has_no_counters() -> None:
    """No spec-decode counter at all: no fact, and no error either."""
    _, metrics = ask({"/metrics": (200, b'vllm:num_requests_running{engine="0"} 1.0\n')})
    assert spec_decode(metrics) is None


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (GOOD.replace("600.0", "-1.0"), "not a count"),
        (GOOD.replace("50.0", "0.5"), "not a count"),
        (GOOD.replace("200.0", "1e300"), "not a count"),
        (GOOD.replace('position="2"', 'position="x"'), "is not a position"),
        (GOOD.replace('position="2"', 'position="9"'), "positions are not 0..k-1"),
        (GOOD.replace('position="2"', 'position="99999999999999999999"'), "is not a position"),
        ("\n".join(GOOD.splitlines()[:4]), "num_draft_tokens_total is missing"),  # truncated
    ],
)
def test_a_hostile_count_is_one_line(body: str, said: str) -> None:
    """A count that is not one, a bad position, a truncated answer: one FactError line."""
    _, metrics = ask({"/metrics": (200, body.encode())})
    with pytest.raises(FactError, match=said):
        spec_decode(metrics)


def test_binary_and_huge_answers_are_bounded_lines() -> None:
    """Binary and huge answers: bounded samples, one-line reasons, never a traceback."""
    junk = bytes(range(256)) * 4096 + b"\nvllm:spec_decode_num_drafts_total{\xff} 1\n"
    huge = (f'vllm:spec_decode_num_drafts_total{{engine="{"e" * 50}"}} 1.0\n' * 200_000).encode()
    for body in (junk, huge, b"\x00" * 1000):
        version, metrics = ask({"/version": (200, body), "/metrics": (200, body)})
        assert "error" in version and len(version["error"]) < 400
        rows = sum(len(v) for v in metrics.get("samples", {}).values())
        assert rows <= server_http.MAX_METRIC_SAMPLES
        runtime = parse_vllm_runtime(version, metrics, "http://127.0.0.1:8000")
        assert runtime.version is None and runtime.version_error
        assert runtime.spec_decode is None and "\n" not in (runtime.metrics_error or "")


def test_an_unanswered_metrics_is_its_status() -> None:
    """A 404 and an unprintable version are said as such."""
    version, metrics = ask({"/version": (200, b'{"version": "0.33.0\\u0000"}')})
    assert version == {"error": "/version: no version string"}
    assert metrics["error"].startswith("/metrics: HTTP 404")
    runtime = parse_vllm_runtime(version, metrics, "http://127.0.0.1:8000")
    assert runtime.spec_decode is None
    assert (runtime.metrics_error or "").startswith("/metrics: HTTP 404")
