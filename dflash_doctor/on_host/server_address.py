"""Where a live server listens, from its launch argv; and the request the host's client gets.

Stdlib only, Python 3.8+, imports nothing from dflash_doctor: `facts/runtime.py` uses it, and
the bundle that gathers a remote host in one execution (`on_host/bundle_script.py`) ships
it, so both derive the same address from the server's argv and build the same request for
the shipped HTTP client (`on_host/server_http.py`), byte for byte.
"""

from __future__ import annotations

import json

# ServerArgs.port default in every release 0.5.11..0.5.23 (srt/server_args.py).
DEFAULT_PORT = 30000
# Where the server listens: a wildcard bind is reached on loopback.
_WILDCARD = {"0.0.0.0", "::", "", "[::]"}
# What every check of a live host asks its server (on_host/server_http.py operations).
RUNTIME_OPS = [{"op": "info"}, {"op": "metrics"}]
# A short timeout: this runs on every check of a live host.
RUNTIME_TIMEOUT_S = 10.0


def server_address(
    argv: list[str], health_url: str | None = None, default_port: int = DEFAULT_PORT
) -> tuple[str, int]:
    """(host, port) to reach the server from its own machine; `default_port`: the engine's
    (SGLang's 30000, vLLM's 8000)."""
    host, port = "127.0.0.1", default_port
    if health_url:
        tail = health_url.split("//", 1)[-1].split("/", 1)[0]
        if ":" in tail and tail.rsplit(":", 1)[1].isdigit():
            port = int(tail.rsplit(":", 1)[1])
    for i, arg in enumerate(argv):
        value = None
        for flag in ("--port", "--host"):
            if arg == flag and i + 1 < len(argv):
                value = argv[i + 1]
            elif arg.startswith(flag + "="):
                value = arg[len(flag) + 1 :]
            if value is None:
                continue
            if flag == "--port" and value.isascii() and value.isdigit() and 0 < int(value) < 65536:
                port = int(value)
            elif flag == "--host" and value not in _WILDCARD and _plain_host(value):
                host = value
            value = None
            break
    # An IPv6 address is bracketed in the URL the client builds.
    return ("[" + host + "]" if ":" in host and not host.startswith("[") else host), port


def unix_socket(argv: list[str]) -> str | None:
    """The last non-empty `--uds PATH` (vLLM's Unix socket: its host and port are then
    ignored); None without one."""
    found = None
    for i, arg in enumerate(argv):
        if arg == "--uds" and i + 1 < len(argv):
            found = argv[i + 1]
        elif arg.startswith("--uds="):
            found = arg[len("--uds=") :]
    return found or None


def _plain_host(value: str) -> bool:
    # Host text never becomes anything but the host part of a URL the script builds.
    return all(c.isalnum() or c in ".-:[]" for c in value) and len(value) < 256


def http_request(
    address: tuple[str, int], pid: int | None, ops: list[dict[str, object]], timeout: float
) -> str:
    """The one argument of the shipped HTTP client (its REQUEST_JSON)."""
    request = {"host": address[0], "port": address[1], "pid": pid, "timeout": timeout, "ops": ops}
    return json.dumps(request)


def http_timeout(ops: list[dict[str, object]], timeout: float) -> float:
    """How long the transport lets the client run: each op may take its own timeout."""
    return timeout * max(1, len(ops)) + 30
