"""The live server's own answer over HTTP, parsed (asked on the host by
finders/server_api.py): where it listens, and what /server_info and /metrics say."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from dflash_doctor.errors import FactError, validation_line
from dflash_doctor.facts.models import LaunchArgs, MetricSample, ServerRuntime
from dflash_doctor.on_host.server_address import server_address as argv_address
from dflash_doctor.redact import redact_argv, redact_text


def server_address(launch: LaunchArgs | None, health_url: str | None = None) -> tuple[str, int]:
    """(host, port) to reach the server from its own machine (on_host/server_address.py)."""
    return argv_address(launch.argv if launch is not None else [], health_url)


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
