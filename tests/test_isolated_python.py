"""`python3 -c` run as root never imports from the directory the doctor runs in (issue 22
item 4).

Root runs the doctor from some directory; a `json.py` planted there must not execute when
the doctor starts the HTTP client (`finders/server_api.py`) or a root-owned server's own
interpreter (the native parse and the version query, through `HostExec.prefix`). The planted
module writes a marker; the marker must not appear.
"""

from __future__ import annotations

import http.server
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from dflash_doctor.finders.server_api import ask_server
from dflash_doctor.host_exec import HostExec
from dflash_doctor.hosts import HostSpec
from dflash_doctor.transport.local import LocalTransport

SYSTEM_PYTHON = "/usr/bin/python3"


class _Info(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps({"version": "0.5.23"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        return None


@pytest.fixture
def server() -> Iterator[int]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Info)
    worker = threading.Thread(target=httpd.serve_forever, daemon=True)
    worker.start()
    try:
        yield httpd.server_address[1]
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The doctor's current directory holds a `json.py` that records that it ran."""
    where = tmp_path / "cwd"
    where.mkdir()
    marker = tmp_path / "ran"
    (where / "json.py").write_text(
        f"open({str(marker)!r}, 'w').write('planted json.py ran')\n"
        "from importlib import import_module as _i\n"
    )
    monkeypatch.chdir(where)
    return marker


def test_http_client_ignores_the_current_directory(server: int, planted: Path) -> None:
    (info,) = ask_server(LocalTransport("h"), ("127.0.0.1", server), None, [{"op": "info"}])
    assert info.get("body") == {"version": "0.5.23"}, info
    assert not planted.exists(), "the HTTP client imported json.py from the doctor's cwd"


def test_root_owned_interpreter_ignores_the_current_directory(planted: Path) -> None:
    """The prefix the native parse and version query use, for a root-owned interpreter
    (the doctor's own user: it keeps the server's PYTHONPATH, so `-I` is not an option)."""
    if os.geteuid() != 0:
        pytest.skip("needs root: a root-owned interpreter runs as is only for root")
    t = LocalTransport("h")
    argv = HostExec(t, HostSpec.of(name="h")).prefix(SYSTEM_PYTHON, pid=None)
    res = t.run([*argv, "-c", "import json, os; print(os.getcwd())"], timeout=30)
    assert res.ok, res.stderr
    assert not planted.exists(), "the interpreter imported json.py from the doctor's cwd"
    assert res.stdout.strip() == b"/"  # a neutral directory: nothing of anyone's
