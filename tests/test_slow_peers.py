"""Issue 22: a server that drips its answer (one byte at a time, each within the socket
timeout) no longer holds the shipped HTTP client past its timeout: each request has a
wall-clock deadline, and the op answers with one error line instead of the whole client
being killed by the transport."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from dflash_doctor.finders.server_api import ask_server
from dflash_doctor.transport.local import LocalTransport


@pytest.fixture
def dripping() -> Iterator[int]:
    """A server that answers every request with headers, then one body byte every 0.3 s."""
    srv = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def one(conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")
            conn.sendall(b"Content-Length: 100000\r\n\r\n")
            while not stop.is_set():
                try:
                    conn.sendall(b" ")
                except OSError:
                    return
                time.sleep(0.3)

    def serve() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            threading.Thread(target=one, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    yield srv.getsockname()[1]
    stop.set()
    srv.close()


def test_a_dripping_server_is_cut_at_the_timeout(dripping: int) -> None:
    start = time.monotonic()
    (info,) = ask_server(
        LocalTransport("h"), ("127.0.0.1", dripping), None, [{"op": "info"}], timeout=2
    )
    took = time.monotonic() - start
    assert "error" in info and "no complete answer within 2s" in str(info["error"]), info
    # two paths tried (/server_info, /get_server_info), each cut at 2 s; never the
    # transport's own limit (2 s x 1 op + 30 s), which killed the whole client before
    assert took < 12, took
