"""The live server's own answer over HTTP, asked on the host through the transport.

The requests run on the host (`facts/server_http.py`, shipped and run with the host's
`python3`), so this works over SSH against a server bound to 127.0.0.1 only. Never for a
recorded or offline host: those have no server.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from dflash_doctor.errors import FactError, validation_line
from dflash_doctor.facts.models import LaunchArgs, MetricSample, ServerRuntime
from dflash_doctor.facts.server_address import (
    RUNTIME_OPS,
    RUNTIME_TIMEOUT_S,
    http_request,
    http_timeout,
)
from dflash_doctor.facts.server_address import server_address as argv_address
from dflash_doctor.redact import redact_argv, redact_text
from dflash_doctor.shipped import script_source
from dflash_doctor.transport.base import Transport

MAX_ANSWER_BYTES = 64 * 1024 * 1024
# How the shipped client starts on the host: the first python3 on the login PATH, with -c.
HTTP_CLIENT_HEAD = ("python3", "-c")


def server_address(launch: LaunchArgs | None, health_url: str | None = None) -> tuple[str, int]:
    """(host, port) to reach the server from its own machine (facts/server_address.py)."""
    return argv_address(launch.argv if launch is not None else [], health_url)


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
    argv = [python, "-c", script_source("facts/server_http.py"), request]
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


def parse_runtime(info: dict[str, Any], metrics: dict[str, Any], url: str) -> ServerRuntime:
    """The typed fact from the `info` and `metrics` answers of the shipped client."""
    if "error" in info:
        raise FactError(str(info["error"]))
    body = info.get("body")
    if not isinstance(body, dict):
        raise FactError("server info is not a JSON object")
    states = body.get("internal_states")
    states = [s for s in states if isinstance(s, dict)] if isinstance(states, list) else []
    # `launch_command` (0.5.20+) and friends can hold other secrets than the API key.
    args = {
        k: _redact(v) if isinstance(v, str) else v
        for k, v in body.items()
        if k not in ("internal_states", "version")
        and (v is None or isinstance(v, str | int | float | bool))
    }
    samples: dict[str, list[MetricSample]] | None = None
    metrics_error = str(metrics["error"]) if "error" in metrics else None
    if "samples" in metrics and isinstance(metrics["samples"], dict):
        try:
            samples = {
                str(name): [
                    MetricSample(
                        labels={str(k): str(v) for k, v in (r.get("labels") or {}).items()},
                        value=float(r["value"]),
                    )
                    for r in rows
                    if isinstance(r, dict)
                ]
                for name, rows in metrics["samples"].items()
                if isinstance(rows, list)
            }
        except (ValueError, TypeError, AttributeError, KeyError):
            samples, metrics_error = None, "/metrics: unreadable samples"
    try:
        return ServerRuntime(
            url=url,
            endpoint=str(info.get("endpoint")),
            version=str(body["version"]) if body.get("version") is not None else None,
            args=args,
            internal_states=[_flat(s) for s in states],
            metrics=samples,
            metrics_error=metrics_error,
        )
    except ValidationError as e:
        raise FactError(f"server info: {validation_line(e)}") from None


def _redact(value: str) -> str:
    """Secrets in a string value: key=value forms, and `--secret-flag VALUE` in a command."""
    text = redact_text(value)
    return " ".join(redact_argv(text.split(" "))) if " -" in text else text


def _flat(state: dict[str, Any]) -> dict[str, object]:
    """Scalars and the memory figures of one internal state; nothing nested deeper."""
    out: dict[str, object] = {
        k: _redact(v) if isinstance(v, str) else v
        for k, v in state.items()
        if v is None or isinstance(v, str | int | float | bool)
    }
    memory = state.get("memory_usage")
    if isinstance(memory, dict):
        out["memory_usage"] = {
            str(k): v for k, v in memory.items() if isinstance(v, int | float | str | None)
        }
    return out


def read_runtime(
    transport: Transport, launch: LaunchArgs | None, pid: int | None, health_url: str | None
) -> ServerRuntime:
    address = server_address(launch, health_url)
    info, metrics = ask_server(
        transport, address, pid, list(RUNTIME_OPS), timeout=RUNTIME_TIMEOUT_S
    )
    return parse_runtime(info, metrics, f"http://{address[0]}:{address[1]}")
