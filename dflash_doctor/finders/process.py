"""The server process: which pid runs SGLang, who owns it, what its environment names."""

from __future__ import annotations

from pydantic import ValidationError

from dflash_doctor.errors import DoctorError, FactError
from dflash_doctor.facts.environment import catalog_environ
from dflash_doctor.facts.launch import parse_cmdline, parse_launch_file, sglang_args_start
from dflash_doctor.facts.models import Fact, ServerProcess
from dflash_doctor.facts.runtime import server_address
from dflash_doctor.host_exec import parse_status_ids
from dflash_doctor.transport.base import Transport

# Only what locates models and the server's own Python packages; never secrets.
ENV_KEYS = ("HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HOME", "PYTHONPATH", "VIRTUAL_ENV")
MAX_CMDLINE_BYTES = 1024 * 1024
MAX_ENV_NAMES = 512


def read_cmdline(t: Transport, pid: int) -> bytes:
    return t.read_file(f"/proc/{pid}/cmdline", max_bytes=MAX_CMDLINE_BYTES)


def is_server(cmdline: bytes) -> bool:
    try:
        sglang_args_start([a.decode("utf-8", "replace") for a in cmdline.split(b"\0")])
    except FactError:
        return False
    return True


def find_pid(t: Transport, launch_file: str | None, service: str | None) -> int | None:
    """The SGLang server's pid: the one the launch file starts (its port) when several run,
    never merely the first one (`fix --apply` stops what this returns); None when none
    runs. Refused where the host has no process table (offline)."""
    servers: list[tuple[int, bytes]] = []
    for pid in t.process_ids():
        try:
            cmdline = read_cmdline(t, pid)
        except DoctorError:
            continue  # processes come and go while we look
        if is_server(cmdline):
            servers.append((pid, cmdline))
    servers = outside_containers(t, servers)
    port = launch_file_port(t, launch_file, service) if len(servers) > 1 else None
    if port is None:
        return servers[0][0] if servers else None
    for pid, cmdline in servers:
        try:
            args = parse_cmdline(cmdline, source=f"process {pid}")
        except (FactError, ValidationError):
            continue
        if server_address(args)[1] == port:
            return pid
    return None


def given_pid(t: Transport, pid: int) -> int:
    """The pid the user named, unless it runs in a Docker container (then a FactError naming
    docker://NAME: its paths are the container's, not this machine's)."""
    outside_containers(t, [(pid, b"")])
    return pid


def outside_containers(t: Transport, servers: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
    """The servers that run on the machine itself. One in a Docker container has its
    models, Python and log in the container's namespace: read from here they would be
    the wrong files (and `fix --apply` would stop a container's process), so it is named
    for `docker://` instead; a FactError when only such servers run."""
    from dflash_doctor.transport.docker import machine_server_container

    bare, contained = [], []
    for pid, cmdline in servers:
        name = machine_server_container(t, pid)
        if name is None:
            bare.append((pid, cmdline))
        else:
            contained.append(name)
    if bare or not contained:
        return bare
    targets = ", ".join(f"docker://{n}" for n in dict.fromkeys(contained))
    raise FactError(f"the SGLang server runs in a Docker container: check {targets}")


def launch_file_port(t: Transport, path: str | None, service: str | None) -> int | None:
    if not path:
        return None
    try:
        data = t.read_file(path, max_bytes=1 << 20)
        launch = parse_launch_file(data, source=path, path=path, service=service)
    except (DoctorError, ValidationError):
        return None
    return server_address(launch)[1]


def server_process(
    t: Transport, pid: int, python: str | None, environ: bytes | None
) -> ServerProcess:
    """The typed process fact: its interpreter (as the launch parse found it in the
    command line, past any `env` or `setpriv`), its owner, its environment's names."""
    try:
        status = t.read_file(f"/proc/{pid}/status", max_bytes=64 * 1024)
        owner: int | None = parse_status_ids(status.decode("ascii", "replace")).uid
    except DoctorError:
        owner = None
    names = [i.split(b"=", 1)[0].decode("utf-8", "replace") for i in (environ or b"").split(b"\0")]
    return ServerProcess(
        pid=pid,
        python=python,
        owner_uid=owner,
        environment_names=sorted({n for n in names if n})[:MAX_ENV_NAMES],
    )


def read_environ(t: Transport, host: str, pid: int) -> tuple[Fact[dict[str, str]], bytes | None]:
    """The catalog's variables of the process (never secrets), and the raw environ."""
    where = f"/proc/{pid}/environ"
    try:
        data = t.read_file(where, max_bytes=1 << 20)
    except DoctorError as e:
        return Fact[dict[str, str]].missing(f"{host}:{where}: {e}", source=where), None
    return Fact[dict[str, str]].of(catalog_environ(data), source=where), data


def model_env(environ: bytes | None) -> dict[str, str]:
    """Only the keys that locate model files: environ holds secrets."""
    found = {}
    for item in (environ or b"").split(b"\0"):
        key, _, value = item.decode("utf-8", "replace").partition("=")
        if key in ENV_KEYS:
            found[key] = value
    return found
