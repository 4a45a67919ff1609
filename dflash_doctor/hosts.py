"""How to find things on a host: the per-host settings of the command line and inventory."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, NamedTuple, Self, cast

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class Address(NamedTuple):
    user: str | None
    host: str
    port: int | None


def parse_address(text: str) -> Address:
    """`[user@]host[:port]`, with `[addr]:port` for IPv6 literals (or an ~/.ssh/config alias).

    Raises ValueError with the text and what is wrong with it."""
    user, _, rest = text.rpartition("@")
    port: int | None = None
    if rest.startswith("["):
        host, _, tail = rest[1:].partition("]")
        if tail.startswith(":"):
            port = _port(tail[1:], text)
    elif rest.count(":") == 1:
        host, _, p = rest.partition(":")
        port = _port(p, text)
    else:
        host = rest
    if not host:
        raise ValueError(f"{text}: no host name")
    return Address(user or None, host, port)


def _port(text: str, whole: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"{whole}: bad port {text!r}")
    return int(text)


class Connection(BaseModel):
    """How to reach the host: read only by the transport opener."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    address: str | None = Field(
        default=None, description="SSH target ([user@]host[:port] or ~/.ssh/config alias)"
    )
    user: str | None = Field(default=None, description="SSH user")
    port: int | None = Field(default=None, ge=1, le=65535, description="SSH port")
    identity_file: str | None = Field(default=None, description="SSH private key")
    proxy_jump: str | None = Field(default=None, description="SSH jump host(s), as ProxyJump")
    container: str | None = Field(
        default=None,
        description="Docker container (name or id) on the host, or the container in `pod`",
    )
    pod: str | None = Field(default=None, description="Kubernetes pod of the server")
    namespace: str | None = Field(default=None, description="Kubernetes namespace of `pod`")
    kubeconfig: str | None = Field(default=None, description="kubeconfig file for `pod`")
    kube_context: str | None = Field(default=None, description="kubeconfig context for `pod`")

    @field_validator("address")
    @classmethod
    def _address_parses(cls, value: str | None) -> str | None:
        if value is not None:
            parse_address(value)  # a bad port or empty host is the user's input error now
        return value


class GatherHints(BaseModel):
    """Where gathering should look first: what the user knows about the server."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pid: int | None = Field(default=None, ge=1, description="PID of the SGLang server process")
    server_port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="HTTP port of the SGLang server (chooses one where several run)",
    )
    launch_file: str | None = Field(
        default=None, description="launch script, systemd unit or docker compose file"
    )
    compose_service: str | None = Field(default=None, description="service in a compose file")
    launch: str | list[str] | None = Field(
        default=None, description="the launch command itself (string or argv list)"
    )
    log_path: str | None = None
    log_since: str | None = Field(
        default=None,
        description="read the runtime-kept log (docker/kubectl logs) only since this "
        "duration (15m, 2h) or time",
    )
    drafter_path: str | None = Field(default=None, description="drafter dir or HF repo id")
    target_path: str | None = Field(default=None, description="target dir or HF repo id")
    sglang_version: str | None = Field(default=None, description="declared SGLang version")
    vllm_version: str | None = Field(default=None, description="declared vLLM version")
    python: str | None = Field(default=None, description="the Python that runs SGLang")
    hf_home: str | None = None


class FixSettings(BaseModel):
    """How `fix --apply` changes and restarts the server."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    relaunch: str | None = Field(
        default=None, description="shell command that restarts the server (fix --apply)"
    )
    health_url: str | None = Field(
        default=None, description="health URL on the host (default http://127.0.0.1:PORT/health)"
    )
    sudo: bool = Field(default=False, description="use sudo for what `fix --apply` changes")
    inventory_file: str | None = Field(
        default=None, description="set by the tool: the inventory file this host came from"
    )


# Each flat key users write (host.yaml, inventory, command line) and the group that reads it;
# the group names themselves are not user keys (the formats stay flat).
GROUPS: dict[str, type[BaseModel]] = {
    "connection": Connection,
    "hints": GatherHints,
    "fix": FixSettings,
}
_GROUP_OF: dict[str, str] = {
    key: group for group, model in GROUPS.items() for key in model.model_fields
}


class HostSpec(BaseModel):
    """One host to check. Every path is a path on that host.

    Users write flat keys (`address`, `pid`, `relaunch`...); each lands in the group of the
    code that reads it: `connection` (the transport opener), `hints` (gathering), `fix`.
    `root` prefixes every path the tool reads: "/" for a live host, or the directory of a
    recorded host tree (a host's files copied under one folder, as in `fixtures/hosts/`).
    Specs are frozen: a changed setting is a new spec made by `override`, validated again.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    root: str = "/"
    offline: bool = Field(
        default=False, description="no running server: read only the launch and model files"
    )
    labels: list[str] = Field(default_factory=list)
    invalid: str | None = Field(
        default=None,
        description="set by the tool: why this host's own settings could not be read "
        "(reported as this host's one-line error; the other hosts go on)",
    )
    connection: Connection = Field(default_factory=Connection)
    hints: GatherHints = Field(default_factory=GatherHints)
    fix: FixSettings = Field(default_factory=FixSettings)

    @model_validator(mode="before")
    @classmethod
    def _group_flat_keys(cls, data: Any) -> Any:
        """Flat keys go to their group; unknown keys stay at the top for extra="forbid"."""
        if not isinstance(data, dict) or not any(k in _GROUP_OF for k in data):
            return data
        out: dict[Any, Any] = {}
        groups: dict[str, dict[str, Any]] = {}
        for key, value in data.items():
            group = _GROUP_OF.get(key) if isinstance(key, str) else None
            if group is None:
                out[key] = value
            else:
                groups.setdefault(group, {})[key] = value
        for group, values in groups.items():
            given = out.get(group)
            if isinstance(given, BaseModel):
                given = given.model_dump()
            if given is not None and not isinstance(given, dict):
                out[group] = given  # not a mapping: its own validation error
                continue
            out[group] = {**(given or {}), **values}
        return out

    @classmethod
    def of(cls, name: str, **settings: Any) -> HostSpec:
        """A spec from flat keys as users write them (pydantic's ValidationError if bad)."""
        return cls.model_validate({**settings, "name": name})

    @classmethod
    def validate_flat(cls, settings: Mapping[str, Any]) -> HostSpec:
        """A spec from flat keys; ValueError says the first problem as the user wrote it
        (`port: ...`, not `connection.port: ...`)."""
        from pydantic import ValidationError

        try:
            return cls.model_validate(dict(settings))
        except ValidationError as e:
            first = e.errors()[0]
            loc = [str(x) for x in first["loc"]]
            if len(loc) > 1 and loc[0] in GROUPS:
                loc = loc[1:]  # the group is ours, not a key the user wrote
            msg = str(first["msg"]).removeprefix("Value error, ")
            raise ValueError(f"{'.'.join(loc)}: {msg}" if loc else msg) from None

    @classmethod
    def user_keys(cls) -> list[str]:
        """The flat keys of host.yaml and the inventory, in the model's order."""
        top = [k for k in cls.model_fields if k not in GROUPS]
        return top + list(_GROUP_OF)

    def settings(self) -> dict[str, Any]:
        """This spec as the flat keys users write (the inverse of the grouping)."""
        flat = {k: getattr(self, k) for k in type(self).model_fields if k not in GROUPS}
        for group in GROUPS:
            flat.update(getattr(self, group).model_dump())
        return flat

    def override(self, **updates: Any) -> HostSpec:
        """A copy with flat `updates`, validated like the user's own keys.

        Raises UsageError naming the host and the first bad key or value (a misspelled key,
        `port="notaport"`): `model_copy(update=...)` would copy them in unchecked.
        """
        from dflash_doctor.errors import UsageError

        try:
            return type(self).validate_flat({**self.settings(), **updates})
        except ValueError as e:
            raise UsageError(f"host {self.name!r}: {e}") from None

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """Validated like `override` when there are updates (pydantic's copy skips validation)."""
        if update:
            return cast(Self, self.override(**update))
        return super().model_copy(deep=deep)

    @property
    def recorded(self) -> bool:
        """Whether `root` names a recorded tree (read by transport/open.py alone)."""
        return self.root not in ("", "/")


RECORDED_HOST_FILE = "host.yaml"
MAX_HOST_FILE_BYTES = 1 << 20


def load_recorded_host(directory: str, name: str | None = None) -> HostSpec:
    """A recorded host tree: its files under `directory`, its settings in `host.yaml`."""
    import yaml

    from dflash_doctor.errors import UsageError

    if not os.path.isdir(directory):
        raise UsageError(f"{directory}: not a directory")
    host_name = name or os.path.basename(os.path.abspath(directory))
    root = os.path.abspath(directory)
    path = os.path.join(directory, RECORDED_HOST_FILE)

    def invalid(why: str) -> HostSpec:
        # The tree exists: its bad settings are this host's error, not the whole run's.
        return HostSpec(name=host_name, root=root, invalid=f"{path}: {why}")

    try:
        if os.path.islink(path) or os.path.getsize(path) > MAX_HOST_FILE_BYTES:
            return invalid("not a regular file of at most 1 MiB")
        with open(path, encoding="utf-8") as f:
            settings = yaml.safe_load(f) or {}
    except FileNotFoundError:
        settings = {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError, ValueError, RecursionError) as e:
        return invalid(f"cannot read host settings: {type(e).__name__}")
    if not isinstance(settings, dict):
        return invalid("host settings must be a mapping")
    reserved = sorted(k for k in ("name", "root", "invalid", *GROUPS) if k in settings)
    if reserved:
        return invalid(f"{', '.join(reserved)} cannot be set in host.yaml")
    try:
        flat = {str(k): v for k, v in settings.items()}
        return HostSpec.validate_flat({**flat, "name": host_name, "root": root})
    except ValueError as e:
        return invalid(str(e))
