"""The live server's own answers over its HTTP API, asked on the host.

The requests run on the host (`on_host/server_http.py`, shipped and run with the host's
`python3`), so this works over SSH against a server bound to 127.0.0.1 only. Never for a
recorded or offline host: those have no server.
"""

from __future__ import annotations

import json
from typing import Any

from dflash_doctor.errors import FactError
from dflash_doctor.facts.models import Fact, LaunchArgs, ServerRuntime
from dflash_doctor.facts.runtime import parse_runtime, server_address
from dflash_doctor.finders.base import attempt
from dflash_doctor.on_host.server_address import (
    RUNTIME_OPS,
    RUNTIME_TIMEOUT_S,
    http_request,
    http_timeout,
)
from dflash_doctor.shipped import script_source
from dflash_doctor.transport.base import Transport


def find_runtime(
    t: Transport, host: str, launch: LaunchArgs | None, pid: int | None, health_url: str | None
) -> Fact[ServerRuntime]:
    """What the running server answers; absent where there is none to ask."""
    if t.live_refused is not None or pid is None:
        return Fact[ServerRuntime]()
    return attempt(host, "server HTTP API", lambda: read_runtime(t, launch, pid, health_url))


MAX_ANSWER_BYTES = 64 * 1024 * 1024
# How the shipped client starts on the host: the first python3 on the login PATH, isolated
# (`-I`: no environment, no user site, and neither the current directory nor the script's on
# sys.path, so a `json.py` where root runs the doctor never imports; on 3.11+ -I implies -P).
HTTP_CLIENT_HEAD = ("python3", "-I", "-c")


def ask_server(
    transport: Transport,
    address: tuple[str, int],
    pid: int | None,
    ops: list[dict[str, Any]],
    *,
    timeout: float = 30.0,
    python: str = HTTP_CLIENT_HEAD[0],
) -> list[dict[str, Any]]:
    """Run the shipped HTTP client on the host; one answer per op (each may hold `error`)."""
    request = http_request(address, pid, ops, timeout)
    argv = [python, *HTTP_CLIENT_HEAD[1:], script_source("on_host/server_http.py"), request]
    res = transport.run(argv, timeout=http_timeout(ops, timeout))
    if not res.ok:
        lines = res.stderr.decode("utf-8", "replace").strip().splitlines()
        raise FactError(f"HTTP client on the host failed: {lines[-1] if lines else res.returncode}")
    if len(res.stdout) > MAX_ANSWER_BYTES:
        raise FactError("HTTP client on the host answered more than 64 MiB")
    try:
        answer = json.loads(res.stdout.decode("utf-8", "replace").strip().splitlines()[-1])
        results = answer["results"]
    except (ValueError, IndexError, KeyError, TypeError):
        raise FactError("HTTP client on the host gave no JSON answer") from None
    if not isinstance(results, list) or len(results) != len(ops):
        raise FactError("HTTP client on the host answered the wrong number of results")
    return [r if isinstance(r, dict) else {"error": "malformed"} for r in results]


def read_runtime(
    transport: Transport, launch: LaunchArgs | None, pid: int | None, health_url: str | None
) -> ServerRuntime:
    address = server_address(launch, health_url)
    info, metrics = ask_server(
        transport, address, pid, list(RUNTIME_OPS), timeout=RUNTIME_TIMEOUT_S
    )
    return parse_runtime(info, metrics, f"http://{address[0]}:{address[1]}")
