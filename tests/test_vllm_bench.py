"""`bench` and DFD304's window against the stand-in vLLM server (fixtures/fake_vllm), over
the real sshd: acceptance measured from vLLM's own /metrics counter deltas around each
repeat (bench/vllm_run.py), compared with what the stand-in was configured to accept.

The stand-in counts as vLLM does (its docstring): the first token of an answer comes from
the prefill; each later step drafts `num_speculative_tokens` and accepts FAKE_VLLM_ACCEPTED
of them, scaled by FAKE_VLLM_TRAINED_CONTEXT / prompt tokens past that context.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import threading
import urllib.error
from pathlib import Path
from typing import Any

import pytest

from dflash_doctor.facts.models import BenchCell
from dflash_doctor.facts.vllm_metrics import delta, parse_vllm_runtime
from dflash_doctor.facts.vllm_models import VllmSpecDecode
from tests.cli_helper import doctor
from tests.test_vllm_stand_in import get, running

pytestmark = pytest.mark.skipif(shutil.which("pgrep") is None, reason="needs pgrep")

TOKENS = 15  # num_speculative_tokens
NEW = 32  # --max-new-tokens


def reach(sshd: Any) -> list[str]:
    return ["-i", str(sshd.client_key), "--known-hosts", str(sshd.known_hosts),
            "--ssh-config", "/dev/null"]  # fmt: skip


def bench(sshd: Any, pid: int, *extra: str) -> Any:
    argv = ["bench", sshd.address, *reach(sshd), "--pid", str(pid), "--max-new-tokens",
            str(NEW), "--temperature", "0", "--format", "json", *extra]  # fmt: skip
    return doctor(*argv, columns=250, timeout=300)


def expected_length(rate: float) -> float:
    """The stand-in's acceptance for one answer of NEW tokens at `rate` accepted a step
    (its own stepping, written out again here: prefill token, then carry-over)."""
    carry, made, steps = 0.0, 1, []
    while made < NEW:
        carry += rate
        took = min(int(carry), TOKENS)
        carry -= took
        steps.append(took)
        made += took + 1
    return 1 + sum(steps) / len(steps)


def test_bench_measures_acceptance_falling_with_context(tmp_path: Path, sshd: Any) -> None:
    log = tmp_path / "requests.jsonl"
    env = {"FAKE_VLLM_ACCEPTED": "3", "FAKE_VLLM_TRAINED_CONTEXT": "2048",
           "FAKE_VLLM_REQUEST_LOG": str(log)}  # fmt: skip
    with running(sys.executable, env, TOKENS) as (pid, _):
        p = bench(sshd, pid, "--contexts", "512,8192", "--concurrency", "1,2")
    assert p.returncode == 0, p.stdout + p.stderr
    doc = json.loads(p.stdout)
    assert doc["engine"] == "vllm" and doc["vllm_version"] == "0.34.0"
    assert any("not only the bench's" in n for n in doc["notes"])
    assert not any("other traffic" in n for n in doc["notes"])
    cells = {(c["prompts"], c["context"], c["concurrency"]): c for c in doc["cells"]}
    assert len(cells) == 2 * 2 * 2 and doc["repeats"] == 3
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(rows) == sum(3 * conc for _, _, conc in cells)
    for (_, ctx, conc), c in cells.items():
        assert c["sized_by"] == "tokenize" and len(c["per_request"]) == 3 * conc
        assert all(abs(r["prompt_tokens"] - ctx) <= max(3, 0.03 * ctx) for r in c["per_request"])
        deltas = c["counter_deltas"]
        assert len(deltas) == 3 and len(c["accept_length_repeats"]) == 3
        lo, hi = c["accept_length_ci95"]
        assert lo <= c["accept_length"] <= hi
        # every request answered NEW tokens: one from the prefill, the rest from drafts
        for d in deltas:
            steps_tokens = d["drafts"] + d["accepted"]
            assert conc * (NEW - 1) <= steps_tokens <= conc * (NEW - 1 + TOKENS)
            assert d["draft_tokens"] == d["drafts"] * TOKENS
    # Inside the trained context: exactly what the stand-in accepts, positions 0-2 always.
    short = cells[("code", 512, 2)]
    assert short["accept_length"] == expected_length(3.0) == 4.0
    assert short["accept_length_ci95"] == [4.0, 4.0]
    assert short["per_position_rates"][:4] == [1.0, 1.0, 1.0, 0.0]
    # Past it: the rate scales by 2048 / prompt tokens (about 0.75 a step).
    for kind in ("code", "prose"):
        far = cells[(kind, 8192, 1)]
        tokens = far["per_request"][0]["prompt_tokens"]
        assert far["accept_length"] == pytest.approx(expected_length(3.0 * 2048 / tokens))
        assert far["accept_length_ci95"][1] < cells[(kind, 512, 1)]["accept_length_ci95"][0]
    assert doc["collapse"] == []


def test_bench_text_report_and_collapse(tmp_path: Path, sshd: Any) -> None:
    with running(sys.executable, {"FAKE_VLLM_ACCEPTED": "0"}, TOKENS) as (pid, _):
        p = bench(sshd, pid, "--contexts", "512", "--concurrency", "1", "--prompts", "code",
                  "--repeats", "2", "--format", "text")  # fmt: skip
    assert p.returncode == 1, p.stdout + p.stderr
    assert "bench (vLLM 0.34.0)" in p.stdout
    assert "speculation has collapsed" in p.stdout
    assert "likely: the V1 runner (DFD300)" in p.stdout


def test_bench_refuses_a_busy_or_plain_vllm_server(tmp_path: Path, sshd: Any) -> None:
    log = tmp_path / "requests.jsonl"
    env = {"FAKE_VLLM_BUSY": "2", "FAKE_VLLM_REQUEST_LOG": str(log)}
    with running(sys.executable, env, TOKENS) as (pid, _):
        p = bench(sshd, pid, "--contexts", "512", "--concurrency", "1")
    assert p.returncode == 2 and "serving traffic (2 running or waiting" in p.stderr
    assert not log.exists()  # nothing sent
    # --yes loads it anyway; the window then counts the other requests: noted
    with running(sys.executable, env, TOKENS) as (pid, _):
        p = bench(sshd, pid, "--contexts", "512", "--concurrency", "1", "--prompts", "code",
                  "--repeats", "1", "--yes")  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    assert any("other traffic in the window" in n for n in json.loads(p.stdout)["notes"])


def test_delta_refuses_a_restart_and_pools_positions() -> None:
    from dflash_doctor.errors import FactError

    before = VllmSpecDecode(drafts=10, draft_tokens=150, accepted=20, accepted_per_pos=[9, 8])
    after = VllmSpecDecode(drafts=30, draft_tokens=450, accepted=50, accepted_per_pos=[25, 20])
    d = delta(before, after)
    assert (d.drafts, d.accepted, d.accepted_per_pos) == (20, 30, [16, 12])
    assert d.mean_acceptance_length == 2.5
    with pytest.raises(FactError, match="restarted"):
        delta(after, before)
    cell = BenchCell(context=1, concurrency=1, temperature=0, max_new_tokens=8,
                     repeat_counters=[d, None, VllmSpecDecode(drafts=0, draft_tokens=0,
                                                              accepted=0)])  # fmt: skip
    assert cell.accept_length == 2.5  # the unmeasured and the idle repeats add nothing


def samples(drafts: int, accepted: int) -> dict[str, Any]:
    row = [{"labels": {"engine": "0"}, "value": 0.0}]
    return {"samples": {
        "vllm:spec_decode_num_drafts_total": [{"labels": {}, "value": float(drafts)}],
        "vllm:spec_decode_num_draft_tokens_total": [{"labels": {}, "value": drafts * 15.0}],
        "vllm:spec_decode_num_accepted_tokens_total": [{"labels": {}, "value": float(accepted)}],
        "vllm:num_requests_running": row,
    }}  # fmt: skip


def test_runtime_window_from_two_scrapes() -> None:
    version = {"version": "0.34.0"}
    rt = parse_vllm_runtime(version, samples(1000, 3000), "u", (samples(1300, 3000), 2.0))
    assert rt.spec_decode is not None and rt.spec_decode.drafts == 1300
    assert rt.window is not None and rt.window.drafts == 300 and rt.window.accepted == 0
    assert rt.window_s == 2.0
    gone = parse_vllm_runtime(version, samples(1000, 3000), "u", (samples(10, 0), 2.0))
    assert gone.window is None and "restarted" in (gone.window_error or "")
    assert gone.spec_decode is not None and gone.spec_decode.drafts == 1000


@contextlib.contextmanager
def traffic(port: int, prompt: str) -> Any:
    """Completions sent one after another until the block ends."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            get(f"http://127.0.0.1:{port}/v1/completions", {"prompt": prompt, "max_tokens": 64})

    worker = threading.Thread(target=loop, daemon=True)
    worker.start()
    try:
        yield
    finally:
        stop.set()
        worker.join(timeout=10)


def check_304(sshd: Any, pid: int) -> dict[str, Any]:
    argv = ["check", sshd.address, *reach(sshd), "--pid", str(pid), "--format", "json",
            "--select", "DFD304"]  # fmt: skip
    p = doctor(*argv, columns=250, timeout=120)
    (host,) = json.loads(p.stdout)["hosts"]
    (result,) = host["results"]
    return dict(result)


def test_dfd304_judges_the_recent_window(tmp_path: Path, sshd: Any) -> None:
    """A server that accepted well for a long time and collapsed lately: the counters since
    start still look healthy; the window between the finder's two scrapes shows the
    collapse. Long prompts collapse on this stand-in (trained context 64, 3 accepted)."""
    env = {"FAKE_VLLM_ACCEPTED": "3", "FAKE_VLLM_TRAINED_CONTEXT": "64"}
    with running(sys.executable, env, TOKENS) as (pid, port):
        for _ in range(40):  # short prompts: 4.0 a draft, 2000+ drafts
            get(f"http://127.0.0.1:{port}/v1/completions", {"prompt": "a b", "max_tokens": 200})
        quiet = check_304(sshd, pid)
        with traffic(port, "word " * 8000):  # 3 * 64 / 8000 < 0.025 accepted a step
            busy = check_304(sshd, pid)
    assert quiet["status"] == "passed", quiet
    assert busy["status"] == "failed", busy
    message = busy["findings"][0]["message"]
    assert "drafts in the last 2.0 s" in message and "mean acceptance length 1.0" in message


def test_bench_baseline_finds_where_speculation_stops_paying(tmp_path: Path, sshd: Any) -> None:
    """The same model with and without --speculative-config (the stand-in's FAKE_VLLM_STEP_S:
    a draft step costs 1.5 decode steps). Inside the trained context a step accepts 3
    tokens and speculation pays; at 8192 tokens it accepts 3 * 640 / 8192 (about 0.23) and
    a step yields 1.23 tokens for 1.5 steps' time: slower than no speculation."""
    spec_env = {"FAKE_VLLM_ACCEPTED": "3", "FAKE_VLLM_TRAINED_CONTEXT": "640",
                "FAKE_VLLM_STEP_S": "0.01"}  # fmt: skip
    with (
        running(sys.executable, spec_env, TOKENS) as (pid, spec_port),
        running(sys.executable, {"FAKE_VLLM_STEP_S": "0.01"}, 0) as (_, plain),
    ):
        p = bench(sshd, pid, "--contexts", "512,8192", "--concurrency", "1", "--prompts",
                  "code", "--baseline-port", str(plain))  # fmt: skip
        refused = bench(sshd, pid, "--contexts", "512", "--concurrency", "1", "--prompts",
                        "code", "--repeats", "1", "--baseline-port", str(spec_port))  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    base = json.loads(p.stdout)["baseline"]
    assert f"port {plain}, vLLM 0.34.0, without --speculative-config" == base["source"]
    assert all(c["accept_length"] is None and c["tokens_per_s_total"] for c in base["cells"])
    by = {q["context"]: q for q in base["pairs"]}
    assert by[512]["verdict"] == "faster" and by[512]["accept_length"] == 4.0
    assert by[8192]["verdict"] == "slower" and by[8192]["speedup_ci95"][1] < 1.0
    # break-even near the stand-in's 1.5 step ratio, the measured length below it at 8192
    assert 1.3 < by[8192]["break_even_accept_length"] < 1.7
    assert by[8192]["accept_length"] < by[8192]["break_even_accept_length"]
    region = [line for line in base["verdict"] if line.startswith("DFLASH is slower")]
    assert region and "8192x1" in region[0] and "512x1" not in region[0]
    assert any("--speculative-config" in line for line in base["verdict"])
    # a "baseline" that speculates is refused
    assert refused.returncode == 2 and "runs with --speculative-config" in refused.stderr


def test_hostile_completion_answers_are_rows_not_tracebacks() -> None:
    from dflash_doctor.bench.cell_ops import add_repeat
    from dflash_doctor.bench.vllm_run import _repeat_counters
    from dflash_doctor.on_host.server_http import vllm_row

    assert vllm_row({"usage": {"prompt_tokens": 5, "completion_tokens": 9},
                     "choices": [{"text": "<think>x", "finish_reason": "stop"}],
                     "metrics": {"speculative_decoding": {"mean_acceptance_length": 2.5,
                                 "num_spec_steps": 4, "acceptance_histogram": [1, 3]}}},
                    0.5) == {"latency_s": 0.5, "prompt_tokens": 5, "completion_tokens": 9,
                             "reasoning": True, "finish": "stop", "spec_accept_length": 2.5,
                             "spec_verify_ct": 4, "accept_histogram": [1, 3]}  # fmt: skip
    assert vllm_row({"choices": "x", "usage": None}, 0.1) == {"latency_s": 0.1}
    with pytest.raises(AttributeError):  # the client turns it into one error row
        vllm_row({"usage": "x"}, 0.1)
    cell = BenchCell(context=512, concurrency=1, temperature=0, max_new_tokens=8)
    add_repeat(cell, {"wall_s": 1.0, "requests": [{"completion_tokens": 9, "latency_s": 1}]}, 0)
    up = samples(100, 300)
    down = samples(10, 30)
    note = _repeat_counters(cell, up, down, 0)
    assert note is not None and "restarted" in note and cell.repeat_counters == [None]
    assert cell.accept_length is None  # a repeat without counters measures nothing
    # 8 drafts for the 8 tokens after the prefill: the bench's own, no note
    assert _repeat_counters(cell, samples(100, 300), samples(108, 316), 0) is None
    # 50 drafts cannot come from 8 tokens: other traffic, noted
    other = _repeat_counters(cell, samples(100, 300), samples(150, 316), 0)
    assert other is not None and "other traffic in the window" in other


def test_per_request_metrics_agree_with_the_counters(tmp_path: Path, sshd: Any) -> None:
    """A 0.34.0 server started with --per-request-spec-decode-metrics summary answers each
    completion with its own acceptance: the bench keeps it per request, and pooled over a
    cell it is what the /metrics counter deltas measured."""
    env = {"FAKE_VLLM_ACCEPTED": "3", "FAKE_VLLM_TRAINED_CONTEXT": "1024"}
    flag = ("--per-request-spec-decode-metrics", "summary")
    with running(sys.executable, env, TOKENS, flag) as (pid, _):
        p = bench(sshd, pid, "--contexts", "512,4096", "--concurrency", "1,3", "--prompts",
                  "prose", "--repeats", "2")  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    for c in json.loads(p.stdout)["cells"]:
        rows = c["per_request"]
        assert all(r["spec_verify_ct"] and r["accept_histogram"] for r in rows)
        steps = sum(r["spec_verify_ct"] for r in rows)
        accepted = sum(r["spec_accept_length"] * r["spec_verify_ct"] - r["spec_verify_ct"]
                       for r in rows)  # fmt: skip
        assert steps == sum(d["drafts"] for d in c["counter_deltas"])
        assert 1 + accepted / steps == pytest.approx(c["accept_length"])
        assert c["accept_length_request_weighted"] is not None


def test_bench_sends_vllms_key_from_its_environment(tmp_path: Path, sshd: Any) -> None:
    """VLLM_API_KEY in the server's environment guards /v1 (no --api-key given): the client
    reads it on the host from /proc/PID/environ; it never reaches the output."""
    secret = "sk-vllm-env-secret-0123456789"
    with running(sys.executable, {"VLLM_API_KEY": secret}, TOKENS) as (pid, port):
        with pytest.raises(urllib.error.HTTPError) as denied:
            get(f"http://127.0.0.1:{port}/v1/completions", {"prompt": "a", "max_tokens": 4})
        p = bench(sshd, pid, "--contexts", "256", "--concurrency", "1", "--prompts", "code",
                  "--repeats", "1")  # fmt: skip
    assert denied.value.code == 401
    assert p.returncode == 0, p.stdout + p.stderr
    (cell,) = json.loads(p.stdout)["cells"]
    assert cell["errors"] == 0 and cell["accept_length"] == 4.0
    assert secret not in p.stdout + p.stderr
