"""The Docker Engine API on this machine's socket: recreating a container with every setting
`docker inspect` shows (the CLI cannot take a whole container config), for `fix --apply`.

Only what `fix` needs: create from an inspect JSON with a new command, start, stop, rename,
remove. Calls go to the unix socket of DOCKER_HOST (`unix://...`) or /var/run/docker.sock.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import urllib.parse
from typing import Any

from dflash_doctor.errors import TransportError

DEFAULT_SOCKET = "/var/run/docker.sock"
MAX_REPLY_BYTES = 8 * 1024 * 1024
# Networks a container joins by mode, not as an endpoint of its own.
MODE_NETWORKS = ("host", "none", "default")


def engine_socket() -> str | None:
    """The local engine's socket path, or None when DOCKER_HOST names another engine."""
    host = os.environ.get("DOCKER_HOST", "")
    if not host:
        return DEFAULT_SOCKET
    if host.startswith("unix://"):
        return host[len("unix://") :]
    return None


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self.path)
        self.sock = sock


class Engine:
    def __init__(self, path: str = DEFAULT_SOCKET, timeout: float = 120.0) -> None:
        self.path = path
        self.timeout = timeout

    def call(
        self, method: str, path: str, body: object | None = None, ok: tuple[int, ...] = (200,)
    ) -> Any:
        conn = _UnixConnection(self.path, self.timeout)
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if data is not None else {}
        try:
            conn.request(method, path, body=data, headers=headers)
            reply = conn.getresponse()
            text = reply.read(MAX_REPLY_BYTES)
        except OSError as e:
            raise TransportError(f"docker engine {self.path}: {e.strerror or e}") from None
        finally:
            conn.close()
        if reply.status not in ok:
            try:
                why = json.loads(text).get("message", "")
            except (ValueError, AttributeError):
                why = text[:200].decode("utf-8", "replace")
            raise TransportError(f"docker engine: {method} {path}: {reply.status} {why}")
        return json.loads(text) if text.strip() else None

    @staticmethod
    def _q(value: str) -> str:
        return urllib.parse.quote(value, safe="")

    def inspect(self, name: str) -> dict[str, Any]:
        got = self.call("GET", f"/containers/{self._q(name)}/json")
        assert isinstance(got, dict)
        return got

    def stop(self, name: str, grace_s: int = 30) -> None:
        self.call("POST", f"/containers/{self._q(name)}/stop?t={grace_s}", ok=(204, 304))

    def start(self, name: str) -> None:
        self.call("POST", f"/containers/{self._q(name)}/start", ok=(204, 304))

    def rename(self, name: str, new: str) -> None:
        self.call("POST", f"/containers/{self._q(name)}/rename?name={self._q(new)}", ok=(204,))

    def remove(self, name: str) -> None:
        self.call("DELETE", f"/containers/{self._q(name)}?force=1", ok=(204, 404))

    def create(self, name: str, raw: dict[str, Any], argv: list[str] | None = None) -> str:
        """A new container `name` with every setting of the inspect JSON `raw`, running
        `argv` (its Entrypoint kept, the rest as Cmd) when given. Returns its id."""
        body, extra_networks = create_body(raw, argv)
        got = self.call("POST", f"/containers/create?name={self._q(name)}", body, ok=(201,))
        cid = str(got["Id"])
        for net, endpoint in extra_networks.items():
            self.call(
                "POST",
                f"/networks/{self._q(net)}/connect",
                {"Container": cid, "EndpointConfig": endpoint},
            )
        return cid


def split_command(entrypoint: list[str], argv: list[str]) -> tuple[list[str] | None, list[str]]:
    """(Entrypoint, Cmd) that run `argv`: the entrypoint kept when argv still starts with it."""
    if entrypoint and argv[: len(entrypoint)] == entrypoint:
        return entrypoint, argv[len(entrypoint) :]
    return (argv[:1], argv[1:]) if entrypoint else (None, argv)


def create_body(
    raw: dict[str, Any], argv: list[str] | None
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The create request that remakes the container `raw` (a `docker inspect` object), and
    the further networks to connect it to."""
    config = dict(raw.get("Config") or {})
    host_config = dict(raw.get("HostConfig") or {})
    if argv is not None:
        entrypoint, cmd = split_command(list(config.get("Entrypoint") or []), argv)
        config["Entrypoint"] = entrypoint
        config["Cmd"] = cmd
    # Anonymous volumes are not in Binds: named here, so the new container keeps their data.
    binds = list(host_config.get("Binds") or [])
    bound = {b.split(":")[1] for b in binds if b.count(":") >= 1}
    for m in raw.get("Mounts") or []:
        if isinstance(m, dict) and m.get("Type") == "volume" and m.get("Destination") not in bound:
            binds.append(f"{m['Name']}:{m['Destination']}" + ("" if m.get("RW", True) else ":ro"))
    host_config["Binds"] = binds or None
    mode = str(host_config.get("NetworkMode") or "default")
    networks = (raw.get("NetworkSettings") or {}).get("Networks") or {}
    endpoints: dict[str, dict[str, Any]] = {}
    for net, ep in networks.items():
        if net in MODE_NETWORKS or mode.startswith("container:") or not isinstance(ep, dict):
            continue
        endpoints[net] = {
            "Aliases": ep.get("Aliases"),
            "IPAMConfig": ep.get("IPAMConfig"),
            "Links": ep.get("Links"),
        }
    first = {mode: endpoints.pop(mode)} if mode in endpoints else {}
    body = {**config, "HostConfig": host_config, "NetworkingConfig": {"EndpointsConfig": first}}
    return body, endpoints
