"""Issue 22: a server that drips its answer (one byte at a time, each within the socket
timeout) no longer holds the shipped HTTP client past its timeout: each request has a
wall-clock deadline, and the op answers with one error line instead of the whole client
being killed by the transport."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from dflash_doctor.finders.server_api import ask_server
from dflash_doctor.transport.local import LocalTransport
from fixtures.sshd import free_port
from tests.cli_helper import doctor
from tests.conftest import REPO


@pytest.fixture
def dripping() -> Iterator[tuple[int, int]]:
    """fixtures/dripping_server.py on a free port: (port, pid); its command line names
    sglang.launch_server, as a server's does."""
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            str(REPO / "fixtures/dripping_server.py"),
            "-m",
            "sglang.launch_server",
            "--model-path",
            "m",
            "--port",
            str(port),
        ],
        stdin=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert time.monotonic() < deadline, "the dripping server did not start"
            time.sleep(0.05)
    try:
        yield port, server.pid
    finally:
        server.kill()  # only the process this test started
        server.wait()


def _doctor(*args: str) -> subprocess.CompletedProcess[str]:
    return doctor(*args, columns=200)


def test_a_dripping_server_is_cut_at_the_timeout(dripping: tuple[int, int]) -> None:
    start = time.monotonic()
    (info,) = ask_server(
        LocalTransport("h"), ("127.0.0.1", dripping[0]), None, [{"op": "info"}], timeout=2
    )
    took = time.monotonic() - start
    assert "error" in info and "no complete answer within 2s" in str(info["error"]), info
    # two paths tried (/server_info, /get_server_info), each cut at 2 s; never the
    # transport's own limit (2 s x 1 op + 30 s), which killed the whole client before
    assert took < 12, took


def test_bench_has_a_per_host_budget(dripping: tuple[int, int]) -> None:
    """`bench --timeout N`: the whole host (gathering, the server's answers) within N s,
    else exit 3 in one line; without it the dripping server holds the run far longer."""
    start = time.monotonic()
    p = _doctor("bench", "local", "--pid", str(dripping[1]), "--timeout", "3", "--yes")
    took = time.monotonic() - start
    assert p.returncode == 3, p.stdout + p.stderr
    assert "ran past --timeout (3s)" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert took < 20, took


def test_within_budget_returns_raises_and_cuts() -> None:
    from dflash_doctor.errors import HostUnreachable, UsageError
    from dflash_doctor.pipeline import within_budget

    assert within_budget("h", 5, lambda: 7) == 7
    assert within_budget("h", None, lambda: 8) == 8

    def bad() -> int:
        raise UsageError("bad input")

    with pytest.raises(UsageError, match="bad input"):
        within_budget("h", 5, bad)
    start = time.monotonic()
    with pytest.raises(HostUnreachable, match=r"h: ran past --timeout \(1s\)"):
        within_budget("h", 1, lambda: time.sleep(30))
    assert time.monotonic() - start < 5


def test_fix_reads_each_host_within_its_budget(dripping: tuple[int, int]) -> None:
    """`fix --timeout N`: reading the host and planning within N s, else the host is
    unreachable (exit 3) and nothing changed."""
    start = time.monotonic()
    p = _doctor("fix", "local", "--pid", str(dripping[1]), "--timeout", "3")
    took = time.monotonic() - start
    assert p.returncode == 3, p.stdout + p.stderr
    assert "ran past --timeout (3s)" in p.stdout, p.stdout
    assert took < 20, took
