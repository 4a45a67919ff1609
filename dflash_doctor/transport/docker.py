"""A Docker container as a host: `docker://CONTAINER`, on this machine or on an SSH host.

Every path given to this transport is a path *in the container* (its mount namespace), so
gathering reads the server's launch, models, Python and log where the server sees them:

- files: as root on this machine, through `/proc/PID/root` walked chroot-style
  (transport/rooted.py); otherwise (not root, or the engine is on an SSH host) by fixed sh
  scripts under `docker exec` as the container's own user (transport/exec_files.py);
- commands: `docker exec CONTAINER ...` as the container's configured user, bounded there by
  `timeout` like every remote command;
- the log: `docker logs --tail N [--since T]` (the server's stdout and stderr, which Docker
  keeps; /proc/PID/fd/1 of a containerised server is a pipe);
- GPUs: the engine host's `nvidia-smi` (the container may not carry one);
- the launch: the container's Entrypoint + Cmd and Env from `docker inspect`
  (`launch_argv`, `launch_env` with secret values redacted).

The engine is reached through the `docker` CLI of the machine the outer transport runs on
(local, or `ssh` for `docker://[user@]host[:port]/CONTAINER`); the container's name is
checked to be a Docker name or id, so it can never be read as an option.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from dflash_doctor.errors import HostUnreachable, TransportError
from dflash_doctor.redact import is_secret_name, redact_argv
from dflash_doctor.transport.base import (
    CHUNK_BYTES,
    CommandResult,
    FileId,
    HostKind,
    HostReach,
    LogCommand,
    StderrLines,
    Transport,
    bounded_on_host,
)
from dflash_doctor.transport.commands import HostCommands
from dflash_doctor.transport.exec_files import ExecFiles
from dflash_doctor.transport.rooted import RootedFiles

# Docker's own rule for container names ([a-zA-Z0-9][a-zA-Z0-9_.-]+), ids are hex.
CONTAINER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,254}")
MAX_INSPECT_BYTES = 4 * 1024 * 1024
# How much of `docker logs` a check reads when nothing narrower is asked.
DEFAULT_LOG_TAIL_LINES = 200_000
# `--since` takes a duration (10m, 1h30m), a Unix time or an RFC 3339 date.
SINCE = re.compile(r"[0-9][0-9A-Za-z:.+-]{0,63}")
REDACTED = "***"


def check_container_name(name: str) -> str:
    """`name` when it is a Docker container name or id; a TransportError otherwise."""
    if not CONTAINER_NAME.fullmatch(name):
        raise TransportError(
            f"{name!r}: not a Docker container name (letters, digits, '_', '.', '-'; "
            "it may not start with '-')"
        )
    return name


def docker_argv(*words: str) -> list[str]:
    return ["docker", *words]


@dataclass(frozen=True)
class ContainerInfo:
    """What `docker inspect` says about one container, as the tool uses it."""

    id: str
    name: str
    running: bool
    pid: int
    user: str
    entrypoint: list[str]
    cmd: list[str]
    env: list[str]
    image: str
    labels: dict[str, str] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def argv(self) -> list[str]:
        """The command the container runs: Entrypoint then Cmd (Docker's own rule)."""
        return [*self.entrypoint, *self.cmd]

    @property
    def compose_project(self) -> str | None:
        return self.labels.get("com.docker.compose.project")

    @property
    def compose_service(self) -> str | None:
        return self.labels.get("com.docker.compose.service")

    @property
    def compose_files(self) -> list[str]:
        # Compose v1 records them relative to the project's working directory.
        files = self.labels.get("com.docker.compose.project.config_files", "")
        base = self.compose_dir or "/"
        return [posixpath.join(base, f) for f in files.split(",") if f]

    @property
    def compose_dir(self) -> str | None:
        return self.labels.get("com.docker.compose.project.working_dir")


def _strings(value: object, what: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):  # an Entrypoint given as a shell string
        return [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TransportError(f"docker inspect: {what} is not a list of strings")
    return list(value)


def parse_inspect(data: bytes, container: str) -> ContainerInfo:
    """One container from `docker inspect --type container` output (a JSON list)."""
    if len(data) > MAX_INSPECT_BYTES:
        raise TransportError(f"docker inspect {container}: larger than {MAX_INSPECT_BYTES} bytes")
    try:
        items = json.loads(data)
    except (ValueError, RecursionError):
        raise TransportError(f"docker inspect {container}: not JSON") from None
    if not isinstance(items, list) or len(items) != 1 or not isinstance(items[0], dict):
        raise TransportError(f"docker inspect {container}: expected one container")
    raw: dict[str, Any] = items[0]
    state = raw.get("State") if isinstance(raw.get("State"), dict) else {}
    config = raw.get("Config") if isinstance(raw.get("Config"), dict) else {}
    assert isinstance(state, dict) and isinstance(config, dict)
    labels = config.get("Labels") or {}
    if not isinstance(labels, dict):
        labels = {}
    pid = state.get("Pid", 0)
    return ContainerInfo(
        id=str(raw.get("Id", "")),
        name=str(raw.get("Name", "")).lstrip("/") or container,
        running=bool(state.get("Running")),
        pid=pid if isinstance(pid, int) and pid > 0 else 0,
        user=str(config.get("User") or ""),
        entrypoint=_strings(config.get("Entrypoint"), "Entrypoint"),
        cmd=_strings(config.get("Cmd"), "Cmd"),
        env=_strings(config.get("Env"), "Env"),
        image=str(config.get("Image", "")),
        labels={str(k): str(v) for k, v in labels.items()},
        raw=raw,
    )


def redacted_env(env: list[str]) -> dict[str, str]:
    """The container's environment, secret-named values replaced (never shown, never sent)."""
    out: dict[str, str] = {}
    for item in env:
        key, _, value = item.partition("=")
        out[key] = REDACTED if is_secret_name(key) else value
    return out


class DockerTransport(HostCommands):
    """One running container, reached through the `docker` CLI of `outer`'s machine."""

    kind: HostKind = "docker"

    def __init__(self, host: str, outer: Transport, container: str) -> None:
        self.host = host
        self.outer = outer
        self.container = check_container_name(container)
        # Work is pushed into the container only when it is on another machine.
        self.remote = outer.remote
        # Each question is a `docker exec` (~0.15-0.2 s of engine work), on this machine too.
        self.bundles = True
        self.relaunch_refused: str | None = None
        # The GPUs are the engine host's (the container may carry no nvidia-smi).
        self.reach = HostReach(gpus="machine", log_command=self.log_command())
        self.machine: Transport | None = outer
        self.info = self.inspect()
        if not self.info.running or not self.info.pid:
            raise HostUnreachable(f"{host}: container {container} is not running")
        self.files: RootedFiles | ExecFiles = self._files()

    def _files(self) -> RootedFiles | ExecFiles:
        root = f"/proc/{self.info.pid}/root"
        if self.outer.kind == "local" and os.geteuid() == 0 and os.access(root, os.R_OK):
            return RootedFiles(self.host, root)
        return _Exec(self)

    # -- the engine -----------------------------------------------------------------------

    def inspect(self) -> ContainerInfo:
        res = self.outer.run(
            docker_argv("inspect", "--type", "container", "--", self.container), timeout=30
        )
        if not res.ok:
            first = res.stderr.decode("utf-8", "replace").strip().splitlines()[:1]
            why = first[0][:200] if first else f"exit {res.returncode}"
            raise HostUnreachable(f"{self.host}: docker inspect {self.container}: {why}")
        return parse_inspect(res.stdout, self.container)

    def launch_argv(self) -> list[str]:
        """The server's launch from the container's config, secret values redacted."""
        return redact_argv(self.info.argv)

    def launch_env(self) -> dict[str, str]:
        return redacted_env(self.info.env)

    def exec_argv(self, argv: list[str], timeout: float) -> list[str]:
        """`argv` run inside the container, as its user, ended there after `timeout`."""
        return docker_argv("exec", self.container, *bounded_on_host(argv, timeout))

    # -- commands -------------------------------------------------------------------------

    def run(
        self, argv: list[str], *, timeout: float = 30.0, on_stderr: StderrLines | None = None
    ) -> CommandResult:
        return self.outer.run(
            self.exec_argv(argv, timeout), timeout=timeout + 5, on_stderr=on_stderr
        )

    def run_stream(self, argv: list[str], *, timeout: float = 300.0) -> Iterator[bytes]:
        return self.outer.run_stream(self.exec_argv(argv, timeout), timeout=timeout + 5)

    # -- files ----------------------------------------------------------------------------

    def file_size(self, path: str) -> int:
        return self.files.file_size(path)

    def file_mode(self, path: str) -> int:
        return self.files.file_mode(path)

    def read_file(self, path: str, *, max_bytes: int) -> bytes:
        return self.files.read_file(path, max_bytes=max_bytes)

    def stream_file(self, path: str, *, chunk_bytes: int = CHUNK_BYTES) -> Iterator[bytes]:
        return self.files.stream_file(path, chunk_bytes=chunk_bytes)

    def list_dir(self, path: str) -> list[str]:
        return self.files.list_dir(path)

    def readlink(self, path: str) -> str:
        return self.files.readlink(path)

    def real_path(self, path: str) -> str:
        if isinstance(self.files, RootedFiles):
            return self.files.real_path(path)
        return super().real_path(path)

    def write_file(
        self,
        path: str,
        data: bytes,
        *,
        mode: int = 0o644,
        expect: FileId | None = None,
        owner: tuple[int, int] | None = None,
    ) -> FileId | None:
        from dflash_doctor.errors import Refused

        raise Refused(
            f"{self.host}:{path}: files inside a container are not edited: `fix` changes "
            "the container's command (its compose file, or recreates it)"
        )

    # -- host questions -------------------------------------------------------------------

    def prefetched(self, config: dict[str, Any]) -> Transport:
        # On this machine too: each question is a `docker exec` (~0.15-0.2 s of engine work),
        # so a gathering's commands (pgrep, id, the interpreter checks, SGLang's parse, the
        # HTTP client) come from one exec of the bundle instead of one exec each.
        from dflash_doctor.transport.prefetch import PrefetchTransport

        return PrefetchTransport(self, self.bundle_settings(config))

    def bundle_settings(self, config: dict[str, Any]) -> dict[str, Any]:
        # Not run in the container: its GPUs are the engine host's (reach, machine).
        return {**config, "nvidia_smi": None}

    def log_command(self) -> LogCommand:
        """`docker logs` of the container, stdout and stderr in one stream (SGLang logs on
        stderr), bounded to its last lines and, when given, since a time."""
        # `exec ... 2>&1`: the words are positional parameters, never shell text.
        return LogCommand(
            before=("sh", "-c", 'exec docker logs "$@" 2>&1', "sh"),
            tail="--tail",
            since=((SINCE.pattern, "--since"),),
            since_refused="not a duration or time",
            end=("--", self.container),
        )

    def close(self) -> None:
        self.outer.close()


class _Exec(ExecFiles):
    """Exec-based file access for a DockerTransport (not root here, or a remote engine)."""

    def __init__(self, transport: DockerTransport) -> None:
        self.t = transport
        self.host = transport.host

    def run(
        self, argv: list[str], *, timeout: float = 30.0, on_stderr: None = None
    ) -> CommandResult:
        return self.t.run(argv, timeout=timeout)

    def run_stream(self, argv: list[str], *, timeout: float = 300.0) -> Iterator[bytes]:
        return self.t.run_stream(argv, timeout=timeout)
