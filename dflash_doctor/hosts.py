"""How to find things on a host: the per-host settings of the command line and inventory."""

from __future__ import annotations

import os

from pydantic import BaseModel, ConfigDict, Field


class HostSpec(BaseModel):
    """One host to check. Every path is a path on that host.

    `root` prefixes every path the tool reads: "/" for a live host, or the directory of a
    recorded host tree (a host's files copied under one folder, as in `fixtures/hosts/`).
    """

    model_config = ConfigDict(extra="forbid")

    name: str
    address: str | None = Field(
        default=None, description="SSH target ([user@]host[:port] or ~/.ssh/config alias)"
    )
    user: str | None = Field(default=None, description="SSH user")
    port: int | None = Field(default=None, ge=1, le=65535, description="SSH port")
    identity_file: str | None = Field(default=None, description="SSH private key")
    proxy_jump: str | None = Field(default=None, description="SSH jump host(s), as ProxyJump")
    sudo: bool = Field(default=False, description="use sudo for what `fix --apply` changes")
    container: str | None = Field(
        default=None,
        description="Docker container (name or id) on the host, or the container in `pod`",
    )
    pod: str | None = Field(default=None, description="Kubernetes pod of the server")
    namespace: str | None = Field(default=None, description="Kubernetes namespace of `pod`")
    kubeconfig: str | None = Field(default=None, description="kubeconfig file for `pod`")
    kube_context: str | None = Field(default=None, description="kubeconfig context for `pod`")
    root: str = "/"
    pid: int | None = Field(default=None, description="PID of the SGLang server process")
    launch_file: str | None = Field(
        default=None, description="launch script, systemd unit or docker compose file"
    )
    compose_service: str | None = Field(default=None, description="service in a compose file")
    launch: str | list[str] | None = Field(
        default=None, description="the launch command itself (string or argv list)"
    )
    relaunch: str | None = Field(
        default=None, description="shell command that restarts the server (fix --apply)"
    )
    health_url: str | None = Field(
        default=None, description="health URL on the host (default http://127.0.0.1:PORT/health)"
    )
    inventory_file: str | None = Field(
        default=None, description="set by the tool: the inventory file this host came from"
    )
    offline: bool = Field(
        default=False, description="no running server: read only the launch and model files"
    )
    log_path: str | None = None
    drafter_path: str | None = Field(default=None, description="drafter dir or HF repo id")
    target_path: str | None = Field(default=None, description="target dir or HF repo id")
    sglang_version: str | None = Field(default=None, description="declared SGLang version")
    python: str | None = Field(default=None, description="the Python that runs SGLang")
    hf_home: str | None = None
    labels: list[str] = Field(default_factory=list)
    invalid: str | None = Field(
        default=None,
        description="set by the tool: why this host's own settings could not be read "
        "(reported as this host's one-line error; the other hosts go on)",
    )

    @property
    def recorded(self) -> bool:
        """Whether `root` names a recorded tree (read by transport/open.py alone)."""
        return self.root not in ("", "/")


RECORDED_HOST_FILE = "host.yaml"
MAX_HOST_FILE_BYTES = 1 << 20


def load_recorded_host(directory: str, name: str | None = None) -> HostSpec:
    """A recorded host tree: its files under `directory`, its settings in `host.yaml`."""
    import yaml
    from pydantic import ValidationError

    from dflash_doctor.errors import UsageError, validation_line

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
    reserved = sorted(k for k in ("name", "root", "invalid") if k in settings)
    if reserved:
        return invalid(f"{', '.join(reserved)} cannot be set in host.yaml")
    try:
        return HostSpec(name=host_name, root=root, **{str(k): v for k, v in settings.items()})
    except ValidationError as e:
        return invalid(validation_line(e))
