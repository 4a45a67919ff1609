"""Where a vLLM server is asked: its `--host` and `--port`, or not at all on a Unix socket
(`--uds`: vLLM ignores host and port, vllm/entrypoints/launchers/launcher.py
0.34.0:376-387). The live check, bench and fix's health wait take the address from one
place (facts/vllm_launch.py vllm_address); over the real sshd, against the stand-in bound
where vLLM would bind."""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dflash_doctor.facts.models import LaunchArgs
from dflash_doctor.facts.vllm_launch import parse_vllm_command, vllm_address
from dflash_doctor.fix.apply import Applier
from dflash_doctor.hosts import HostSpec
from tests.cli_helper import doctor
from tests.test_vllm_bench import reach
from tests.test_vllm_stand_in import get, running, start, venv_with_vllm

SERVE = "vllm serve m"


@pytest.mark.parametrize(
    ("options", "address"),
    [
        ("", ("127.0.0.1", 8000)),
        ("--port 9001", ("127.0.0.1", 9001)),
        ("--host 0.0.0.0 --port 9001", ("127.0.0.1", 9001)),
        ("--host= --port=9002", ("127.0.0.1", 9002)),
        ("--host 127.0.0.2", ("127.0.0.2", 8000)),
        ("--host=10.1.2.3 --port 70000", ("10.1.2.3", 8000)),
        ("--host ::1", ("[::1]", 8000)),
        ("--host :: --port 8001", ("127.0.0.1", 8001)),
        ("--host 'a b;rm -rf /'", ("127.0.0.1", 8000)),
        ("--uds /run/vllm.sock --port 9001", None),
        ("--uds= --port 9003", ("127.0.0.1", 9003)),
    ],
)
def test_the_address_vllm_listens_on(options: str, address: tuple[str, int] | None) -> None:
    launch = parse_vllm_command(f"{SERVE} {options}")
    assert vllm_address(launch) == address


def test_fix_awaits_health_where_the_server_listens() -> None:
    """fix's health URL is the check's address (the same helper), not loopback always."""
    a = Applier(HostSpec(name="h"), None, 1)  # type: ignore[arg-type]
    argv = ["vllm", "serve", "m", "--host", "127.0.0.2", "--port", "9009"]
    assert (
        a.health_url(LaunchArgs(argv=argv, source="s", kind="script"))
        == "http://127.0.0.2:9009/health"
    )
    sglang = ["python3", "-m", "sglang.launch_server", "--model-path", "m", "--port", "31000"]
    assert (
        a.health_url(LaunchArgs(argv=sglang, source="s", kind="script"))
        == "http://127.0.0.1:31000/health"
    )


def test_fix_refuses_to_relaunch_a_server_on_a_unix_socket() -> None:
    """Its health could not be awaited: refused before anything changes (apply_plan)."""
    from dflash_doctor.fix.apply import _unix_socket

    spec = HostSpec(name="h")
    on_socket = ["vllm", "serve", "m", "--uds", "/run/v.sock"]
    why = _unix_socket(spec, LaunchArgs(argv=on_socket, source="s", kind="script"))
    assert why == (
        "h: the vLLM server listens on the Unix socket /run/v.sock (--uds): not asked over "
        "HTTP, so its health after a relaunch cannot be awaited"
    )
    on_port = ["vllm", "serve", "m", "--uds=", "--port", "8001"]
    assert _unix_socket(spec, LaunchArgs(argv=on_port, source="s", kind="script")) is None


def check(sshd: Any, pid: int) -> dict[str, Any]:
    argv = ["check", sshd.address, *reach(sshd), "--pid", str(pid), "--format", "json"]
    result = doctor(*argv, "--select", "DFD304", columns=250, timeout=120)
    (host,) = json.loads(result.stdout)["hosts"]
    facts: dict[str, Any] = host["facts"]
    return facts


pytestmark = pytest.mark.skipif(shutil.which("pgrep") is None, reason="needs pgrep")


def test_a_server_on_another_loopback_address_is_asked_there(tmp_path: Path, sshd: Any) -> None:
    python = venv_with_vllm(tmp_path / "venv", "0.34.0")
    env = {"FAKE_VLLM_VERSION": "0.34.0"}
    with running(python, env, 15, host="127.0.0.2") as (pid, port):
        get(f"http://127.0.0.2:{port}/v1/completions", {"prompt": "a", "max_tokens": 20})
        facts = check(sshd, pid)
        bench = ["bench", sshd.address, *reach(sshd), "--pid", str(pid), "--max-new-tokens",
                 "8", "--contexts", "256", "--concurrency", "1", "--repeats", "3",
                 "--prompts", "code", "--format", "json"]  # fmt: skip
        benched = doctor(*bench, columns=250, timeout=300)
    runtime = facts["vllm_runtime"]
    assert runtime["value"] is not None, runtime
    assert runtime["value"]["url"] == f"http://127.0.0.2:{port}"
    # 20 tokens: the prefill's, then 19 in steps of 1 + 3 accepted (the stand-in's default)
    assert runtime["value"]["spec_decode"]["drafts"] == 5
    assert benched.returncode == 0, benched.stdout + benched.stderr
    cells = json.loads(benched.stdout)["cells"]
    assert cells and all(len(c["counter_deltas"]) == 3 for c in cells), cells


@contextlib.contextmanager
def on_socket(python: str, sock: Path) -> Iterator[int]:
    env = {"FAKE_VLLM_VERSION": "0.34.0"}
    with tempfile.TemporaryFile() as log:
        proc = start(python, 8000, env, 15, log, ("--uds", str(sock)))
        try:
            for _ in range(100):
                if sock.exists():
                    break
                assert proc.poll() is None, log.seek(0) or log.read()
                time.sleep(0.1)
            yield proc.pid
        finally:
            proc.terminate()
            proc.wait(timeout=10)


def test_a_server_on_a_unix_socket_is_not_asked_and_says_so(tmp_path: Path, sshd: Any) -> None:
    python = venv_with_vllm(tmp_path / "venv", "0.34.0")
    sock = tmp_path / "vllm.sock"
    with on_socket(python, sock) as pid:
        facts = check(sshd, pid)
        bench = ["bench", sshd.address, *reach(sshd), "--pid", str(pid), "--format", "json"]
        benched = doctor(*bench, columns=250, timeout=120)
    said = f"listens on the Unix socket {sock} (--uds): not asked over HTTP"
    assert facts["vllm_runtime"]["value"] is None
    assert said in facts["vllm_runtime"]["error"]
    output = benched.stdout + benched.stderr
    assert benched.returncode != 0
    assert said in output
    assert "Traceback" not in output
