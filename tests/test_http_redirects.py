"""The HTTP client never carries the server's API key anywhere else (issue 22 item 9).

The shipped client (`on_host/server_http.py`, run on the host by `finders/server_api.py`) sends
`Authorization: Bearer KEY`, the key read from the server's own command line. A server that
answers with a redirect (to another port, or anywhere) must not get the key forwarded: the
client does not follow redirects at all, and it talks to the server directly, never through
a proxy named in the environment.
"""

from __future__ import annotations

import http.server
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dflash_doctor.finders.server_api import ask_server
from dflash_doctor.transport.local import LocalTransport

KEY = "sk-redirect-test-0123456789"


class _Recorder(http.server.BaseHTTPRequestHandler):
    """Records every request's path and headers; answers as `self.server.answer` says."""

    def do_GET(self) -> None:
        server: Any = self.server
        server.seen.append((self.path, dict(self.headers)))
        status, headers = server.answer(self.path)
        body = b'{"version": "0.5.23"}' if status == 200 else b""
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        return None


def _serve(answer: Any) -> Any:
    httpd: Any = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    httpd.seen = []
    httpd.answer = answer
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


@pytest.fixture
def elsewhere() -> Iterator[Any]:
    """Where a hostile server sends the client: records what arrives."""
    httpd = _serve(lambda path: (200, {"Content-Type": "application/json"}))
    yield httpd
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def keyed_pid() -> Iterator[int]:
    """A process whose command line carries `--api-key`, as a server's does."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", "--api-key", KEY],
        stdin=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while KEY.encode() not in Path(f"/proc/{proc.pid}/cmdline").read_bytes():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    yield proc.pid
    proc.kill()  # only the process this test started
    proc.wait()


def _redirecting(target: str) -> Any:
    return _serve(lambda path: (302, {"Location": target + path}))


@pytest.mark.parametrize("where", ["other-port", "same-server"])
def test_redirect_is_not_followed_and_the_key_stays(
    elsewhere: Any, keyed_pid: int, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if where == "other-port":
        server = _redirecting(f"http://127.0.0.1:{elsewhere.server_address[1]}")
    else:  # to another path of the same server: the key is not re-sent on a redirect
        server = _serve(
            lambda path: (302, {"Location": "/moved"}) if path != "/moved" else (200, {})
        )
    try:
        port = server.server_address[1]
        (info,) = ask_server(
            LocalTransport("h"), ("127.0.0.1", port), keyed_pid, [{"op": "info"}], timeout=10
        )
    finally:
        server.shutdown()
        server.server_close()
    assert "error" in info and "302" in info["error"], info
    assert KEY not in str(info)
    assert elsewhere.seen == []  # nothing reached the other port
    first = server.seen[0][1]
    assert first.get("Authorization") == f"Bearer {KEY}"  # the server itself got the key
    assert all(path != "/moved" for path, _ in server.seen)  # the redirect was not followed


def test_no_proxy_from_the_environment(
    elsewhere: Any, keyed_pid: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An `http_proxy` in the environment does not see the key: the server is asked directly."""
    server = _serve(lambda path: (200, {"Content-Type": "application/json"}))
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{elsewhere.server_address[1]}")
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    try:
        port = server.server_address[1]
        (info,) = ask_server(
            LocalTransport("h"), ("127.0.0.1", port), keyed_pid, [{"op": "info"}], timeout=10
        )
    finally:
        server.shutdown()
        server.server_close()
    assert info.get("body") == {"version": "0.5.23"}, info
    assert elsewhere.seen == []


def _health_wait(url: str, timeout: float) -> tuple[str | None, list[str]]:
    """`fix`'s own health wait (fix/apply.py Applier.wait_healthy, its HEALTH_PROBE run by
    the host's Python) on `url`."""
    from dflash_doctor.facts.models import LaunchArgs
    from dflash_doctor.fix.apply import Applier
    from dflash_doctor.hosts import HostSpec

    spec = HostSpec.validate_flat({"name": "local", "health_url": url})
    applier = Applier(spec, LocalTransport("local"), timeout)
    launch = LaunchArgs(source="x", kind="process", argv=["python"])
    return applier.wait_healthy(launch), applier.steps


def test_fix_health_wait_does_not_follow_a_redirect_off_the_server(elsewhere: Any) -> None:
    """A server whose /health redirects to another port is not healthy, and nothing reaches
    that port; a redirect to another path of the same server is followed."""
    off = _redirecting(f"http://127.0.0.1:{elsewhere.server_address[1]}")
    same = _serve(lambda path: (302, {"Location": "/ok"}) if path != "/ok" else (200, {}))
    try:
        why, _ = _health_wait(f"http://127.0.0.1:{off.server_address[1]}/health", 2.0)
        assert why is not None and "redirect off the server refused" in why, why
        assert elsewhere.seen == []
        why, steps = _health_wait(f"http://127.0.0.1:{same.server_address[1]}/health", 10.0)
        assert why is None and steps and steps[-1].startswith("healthy: "), (why, steps)
        assert [p for p, _ in same.seen] == ["/health", "/ok"]
    finally:
        for server in (off, same):
            server.shutdown()
            server.server_close()
