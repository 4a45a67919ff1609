"""The stand-in vLLM server (fixtures/fake_vllm) live on this machine: its
answers in vLLM's shapes, its start-up refusals in vLLM's texts, and `check local --pid`
on it judging the vLLM launch from the running process (its command line, the runner
variable in its environment, the vllm-*.dist-info beside its Python)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import prometheus_client
import pytest
from typer.testing import CliRunner

from dflash_doctor.cli import app
from fixtures.sshd import free_port
from tests.conftest import FIXTURE_HOSTS, REPO

FAKE_VLLM = REPO / "fixtures" / "fake_vllm"
DRAFTER = FIXTURE_HOSTS / "vllm034" / "models" / "Kimi-K2.6-DFlash"


def venv_with_vllm(root: Path, version: str) -> str:
    """A real venv whose site-packages holds `vllm-VERSION.dist-info`."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    (site,) = (root / "lib").glob("python3*/site-packages")
    info = site / f"vllm-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")
    return str(root / "bin" / "python3")


def get(url: str, body: dict[str, Any] | None = None) -> bytes:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=5) as r:
        answer: bytes = r.read()
        return answer


def start(
    python: str,
    port: int,
    env: dict[str, str],
    tokens: int,
    out: Any = subprocess.PIPE,
    extra: tuple[str, ...] = (),
    host: str = "127.0.0.1",
) -> subprocess.Popen[bytes]:
    spec = {"method": "dflash", "model": str(DRAFTER), "num_speculative_tokens": tokens}
    # tokens 0: a server without speculation (no --speculative-config)
    speculative = ["--speculative-config", json.dumps(spec)] if tokens else []
    argv = [
        python, "-m", "vllm.entrypoints.openai.api_server", "--model", "moonshotai/Kimi-K2.6",
        *speculative, "--host", host, "--port", str(port), *extra,
    ]  # fmt: skip
    full = {"PATH": os.environ["PATH"], "PYTHONPATH": str(FAKE_VLLM), **env}
    err = subprocess.STDOUT if out is not subprocess.PIPE else subprocess.PIPE
    return subprocess.Popen(argv, env=full, stdout=out, stderr=err)


@contextlib.contextmanager
def running(
    python: str,
    env: dict[str, str],
    tokens: int,
    extra: tuple[str, ...] = (),
    host: str = "127.0.0.1",
) -> Iterator[tuple[int, int]]:
    port = free_port()
    # Its log to a file: a pipe nobody reads would block the server after 64 KiB of it.
    with tempfile.TemporaryFile() as log:
        proc = start(python, port, env, tokens, log, extra, host)
        try:
            for _ in range(100):
                with contextlib.suppress(OSError):
                    get(f"http://{host}:{port}/health")
                    break
                assert proc.poll() is None, log.seek(0) or log.read()
                time.sleep(0.1)
            yield proc.pid, port
        finally:
            proc.terminate()
            proc.wait(timeout=10)


def metric(text: str, name: str) -> float:
    (line,) = [x for x in text.splitlines() if x.startswith(name + "{")]
    return float(line.rsplit(" ", 1)[1])


def test_answers_in_vllms_shapes(tmp_path: Path) -> None:
    python = venv_with_vllm(tmp_path / "venv", "0.34.0")
    with running(python, {"FAKE_VLLM_VERSION": "0.34.0"}, 15) as (_, port):
        base = f"http://127.0.0.1:{port}"
        assert json.loads(get(f"{base}/version")) == {"version": "0.34.0"}
        before = get(f"{base}/metrics").decode()
        answer = json.loads(get(f"{base}/v1/completions", {"prompt": "a b", "max_tokens": 8}))
        after = get(f"{base}/metrics").decode()
    assert answer["object"] == "text_completion" and answer["usage"]["completion_tokens"] == 8
    drafts = "vllm:spec_decode_num_drafts_total"
    assert metric(after, drafts) - metric(before, drafts) == 2  # 8 tokens, 3 + 1 a draft
    accepted = "vllm:spec_decode_num_accepted_tokens_total"
    assert metric(after, accepted) == 6
    assert "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter" in after


@pytest.mark.parametrize(
    ("version", "value", "said"),
    [
        ("0.34.0", "0", "Model Runner V1 has been removed"),
        ("0.33.0", "0", "DFlash drafters with mixed sliding/full attention require"),
        ("0.33.0", "false", "invalid literal for int()"),
    ],
)
def test_start_up_refusals(tmp_path: Path, version: str, value: str, said: str) -> None:
    proc = start(sys.executable, free_port(), {"FAKE_VLLM_VERSION": version,
                                                "VLLM_USE_V2_MODEL_RUNNER": value}, 15)  # fmt: skip
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 1 and said in err.decode()


@pytest.mark.skipif(shutil.which("pgrep") is None, reason="needs pgrep")
def test_check_local_judges_the_running_vllm_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    python = venv_with_vllm(tmp_path / "venv", "0.33.0")
    env = {"FAKE_VLLM_VERSION": "0.33.0", "VLLM_USE_V2_MODEL_RUNNER": "1"}
    monkeypatch.setenv("HOME", str(tmp_path))
    with running(python, env, 16) as (pid, _):
        argv = ["check", "local", "--pid", str(pid), "--format", "json", "--fail-on", "warning"]
        result = CliRunner().invoke(app, [*argv, "--select", "DFD300,DFD301,DFD102"])
    assert result.exit_code == 1, result.output
    (host,) = json.loads(result.stdout)["hosts"]
    assert host["facts"]["engine"]["value"] == "vllm"
    assert host["facts"]["vllm_version"]["value"] == "0.33.0"
    results = {r["check_id"]: r for r in host["results"]}
    assert results["DFD300"]["status"] == "passed"
    assert results["DFD301"]["status"] == "failed"
    assert results["DFD102"]["status"] == "skipped" and "vLLM" in results["DFD102"]["reason"]


METRICS_PY = Path("/work/wheels/vllm/src/0.34.0/vllm/v1/spec_decode/metrics.py")


LOGGERS_PY = METRICS_PY.parent.parent / "metrics" / "loggers.py"


def wheel_counters() -> list[tuple[str, str, list[str]]]:
    """(name, documentation, extra labels) of the spec-decode counters, read from the
    wheel's own definitions (vllm/v1/spec_decode/metrics.py 0.34.0:229-231, 255-256)."""
    text = METRICS_PY.read_text()
    plain = re.findall(r'\("(vllm:spec_decode_[a-z_]+)", "([^"]+)"\)', text)
    (per_pos,) = re.findall(r'name="(vllm:spec_decode_[a-z_]+)",\s*documentation="([^"]+)"', text)
    return [(n, d, []) for n, d in plain] + [(*per_pos, ["position"])]


def wheel_gauges() -> list[tuple[str, str]]:
    """(name, documentation) of the scheduler's running and waiting gauges, read from the
    wheel (vllm/v1/metrics/loggers.py 0.34.0:527-545)."""
    text = LOGGERS_PY.read_text()
    pattern = r'name="(vllm:num_requests_(?:running|waiting))",\s*documentation="([^"]+)"'
    return re.findall(pattern, text)


@pytest.mark.skipif(not METRICS_PY.is_file(), reason="vLLM wheels not unpacked")
def test_metrics_text_is_prometheus_clients_of_vllms_counters(tmp_path: Path) -> None:
    with running(sys.executable, {"FAKE_VLLM_VERSION": "0.34.0"}, 15) as (_, port):
        get(f"http://127.0.0.1:{port}/v1/completions", {"prompt": "a", "max_tokens": 8})
        served = get(f"http://127.0.0.1:{port}/metrics").decode()
    # 8 tokens at 3 accepted + 1 a draft: 2 drafts of 15 tokens, positions 0-2 accepted.
    counts = {"drafts": [2], "draft_tokens": [30], "accepted_tokens": [6]}
    counts["accepted_tokens_per_pos"] = [2, 2, 2] + [0] * 12
    registry = prometheus_client.CollectorRegistry()
    for name, doc, extra in wheel_counters():
        counter = prometheus_client.Counter(
            name, doc, labelnames=["model_name", "engine", *extra], registry=registry
        )
        for pos, value in enumerate(counts[name.removeprefix("vllm:spec_decode_num_")]):
            labels = ["moonshotai/Kimi-K2.6", "0"] + ([str(pos)] if extra else [])
            counter.labels(*labels).inc(value)
    for name, doc in wheel_gauges():
        gauge = prometheus_client.Gauge(
            name, doc, labelnames=["model_name", "engine"], registry=registry
        )
        gauge.labels("moonshotai/Kimi-K2.6", "0").set(0)
    expected = prometheus_client.generate_latest(registry).decode()

    def clockless(text: str) -> str:  # `_created` holds each counter's creation time
        return re.sub(r"(_created\{[^}]*\}) \S+", r"\1 T", text)

    assert clockless(served) == clockless(expected)


@pytest.mark.skipif(shutil.which("pgrep") is None, reason="needs pgrep")
def test_over_ssh_the_live_counters_show_a_collapse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sshd: Any
) -> None:
    """Through the real sshd (and its one-round-trip bundle): the shipped client asks the
    stand-in's /version and /metrics on the host; DFD304 reads the collapse."""
    python = venv_with_vllm(tmp_path / "venv", "0.33.0")
    env = {"FAKE_VLLM_VERSION": "0.34.0", "FAKE_VLLM_ACCEPTED": "0"}
    monkeypatch.setenv("HOME", str(tmp_path))
    reach = ["-i", str(sshd.client_key), "--known-hosts", str(sshd.known_hosts)]
    with running(python, env, 15) as (pid, port):
        get(f"http://127.0.0.1:{port}/v1/completions", {"prompt": "a", "max_tokens": 150})
        argv = ["check", sshd.address, *reach, "--pid", str(pid), "--format", "json"]
        result = CliRunner().invoke(app, [*argv, "--select", "DFD304"])
    assert result.exit_code == 1, result.output
    (host,) = json.loads(result.stdout)["hosts"]
    facts = host["facts"]
    # The running release (0.34.0, /version) wins over the installed dist-info (0.33.0).
    assert facts["vllm_version"]["value"] == "0.34.0"
    assert facts["vllm_installed"]["value"] == "0.33.0"
    # 150 tokens: the first from the prefill, then one draft a token (none accepted)
    assert facts["vllm_runtime"]["value"]["spec_decode"]["drafts"] == 149
    (result_304,) = host["results"]
    assert result_304["status"] == "failed"
    message = result_304["findings"][0]["message"]
    # no traffic in the window between the two scrapes: judged since start, saying so
    assert "mean acceptance length 1.00 over 149 drafts since the server started" in message
    assert "only 0 drafts in the last 2.0 s" in message
