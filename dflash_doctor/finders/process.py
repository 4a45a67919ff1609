"""The server process: which pid runs SGLang, who owns it, what its environment names."""

from __future__ import annotations

from pydantic import ValidationError

from dflash_doctor.errors import DoctorError, FactError, FileMissing, ServerChoice
from dflash_doctor.facts.environment import catalog_environ
from dflash_doctor.facts.launch import parse_cmdline, parse_launch_file, sglang_args_start
from dflash_doctor.facts.models import Fact, ServerProcess
from dflash_doctor.facts.runtime import server_address
from dflash_doctor.finders.containers import machine_server_container
from dflash_doctor.finders.pids import process_ids
from dflash_doctor.finders.plan import PROCESS
from dflash_doctor.finders.vllm import runs_vllm_pid, runs_vllm_text, vllm_listens_on
from dflash_doctor.host_exec import parse_status_ids
from dflash_doctor.hosts import GatherHints
from dflash_doctor.redact import redact_text
from dflash_doctor.transport.base import Transport

# Only what locates models and the server's own Python packages; never secrets.
ENV_KEYS = ("HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HOME", "PYTHONPATH", "VIRTUAL_ENV")
MAX_CMDLINE_BYTES: int = PROCESS["files"]["cmdline"]
MAX_ENV_NAMES = 512


def read_cmdline(t: Transport, pid: int) -> bytes:
    return t.read_file(f"/proc/{pid}/cmdline", max_bytes=MAX_CMDLINE_BYTES)


def is_server(cmdline: bytes) -> bool:
    try:
        sglang_args_start([a.decode("utf-8", "replace") for a in cmdline.split(b"\0")])
    except FactError:
        return False
    return True


def running_servers(t: Transport) -> list[tuple[int, bytes]]:
    """Every SGLang server process on the machine itself (pid, command line). Refused where
    the host has no process table (offline)."""
    servers: list[tuple[int, bytes]] = []
    for pid in process_ids(t):
        try:
            cmdline = read_cmdline(t, pid)
        except DoctorError:
            continue  # processes come and go while we look
        if is_server(cmdline):
            servers.append((pid, cmdline))
    return outside_containers(t, servers)


def find_pid(t: Transport, host: str, hints: GatherHints) -> int | None:
    """The SGLang server's pid, never a silent pick among several (`fix --apply` stops what
    this returns): the pid named (it must run SGLang), else the one on the port named, else
    the only one, else the one the launch file starts (its port); None when none runs (or
    the launch file's server does not run: the file alone is then the launch). Several
    servers and no choice is a ServerChoice (exit 2) listing them."""
    if hints.pid is not None:
        # A vLLM server's pid is the vLLM finder's (finders/vllm.py), not a wrong choice.
        return None if runs_vllm_pid(t, hints.pid) else given_pid(t, host, hints.pid)
    if hints.server_port is None and vllm_launch_file(t, hints.launch_file):
        return None  # the launch file starts vLLM's server: finders/vllm.py finds it
    servers = running_servers(t)
    if hints.server_port is not None:
        on_port = [s for s in servers if _port(s) == hints.server_port]
        if len(on_port) == 1:
            return on_port[0][0]
        if not on_port and vllm_listens_on(t, hints.server_port):
            return None  # a vLLM server's port (a relaunch followed): finders/vllm.py finds it
        raise ServerChoice(
            f"{host}: no SGLang server listens on port {hints.server_port}"
            + (f"; running: {describe_servers(t, servers)}" if servers else "")
        )
    port = launch_file_port(t, hints.launch_file, hints.compose_service)
    if len(servers) <= 1:
        running = _port(servers[0]) if servers else None
        if port is not None and running is not None and running != port:
            # The one server running is not the launch file's (that one is down: a
            # rollback recovering it must never stop another server in its place). A
            # command line whose port cannot be read (truncated, refused by the parse) is
            # kept: its own parse error is the finding (tests/test_gather.py).
            return None
        return servers[0][0] if servers else None
    if port is None:
        raise ServerChoice(
            f"{host}: {len(servers)} SGLang servers run: {describe_servers(t, servers)}; "
            "choose one with --pid, --port or --launch"
        )
    mine = [pid for pid, cmdline in servers if _port((pid, cmdline)) == port]
    return mine[0] if mine else None


def given_pid(t: Transport, host: str, pid: int) -> int:
    """The pid the user named, when it runs an SGLang server on the machine itself. A pid
    that no longer exists (relaunched since it was written down) or runs something else is
    a ServerChoice: the run fails closed instead of going on with nothing to check. One in a
    Docker container is a FactError naming docker://NAME (its paths are the container's)."""
    try:
        cmdline = read_cmdline(t, pid)
    except FileMissing:
        raise ServerChoice(
            f"{host}: no process {pid} runs (relaunched since?): give --port, --launch or "
            "the new --pid"
        ) from None
    except DoctorError as e:
        raise ServerChoice(f"{host}: process {pid}: {e}") from None
    if not is_server(cmdline):
        raise ServerChoice(f"{host}: process {pid} is not an SGLang server")
    outside_containers(t, [(pid, cmdline)])
    return pid


def _port(server: tuple[int, bytes]) -> int | None:
    pid, cmdline = server
    try:
        return server_address(parse_cmdline(cmdline, source=f"process {pid}"))[1]
    except (FactError, ValidationError):
        return None


def describe_servers(t: Transport, servers: list[tuple[int, bytes]]) -> str:
    """Each server as `pid N (owner U, port P, model M, unit S)`, for the user to choose
    from; host text is redacted and bounded (a model path is the user's, never a secret,
    but a long one is cut)."""
    users = _user_names(t)
    return "; ".join(_describe(t, pid, cmdline, users) for pid, cmdline in servers[:16]) + (
        f"; and {len(servers) - 16} more" if len(servers) > 16 else ""
    )


def owner_name(t: Transport, uid: int | None, users: dict[int, str] | None = None) -> str:
    """A process owner as the host names it (`alice`), else `uid N`; `?` when unknown."""
    if uid is None:
        return "?"
    return (_user_names(t) if users is None else users).get(uid, f"uid {uid}")


def _describe(t: Transport, pid: int, cmdline: bytes, users: dict[int, str]) -> str:
    parts = [f"owner {owner_name(t, _owner_uid(t, pid), users)}"]
    try:
        launch = parse_cmdline(cmdline, source=f"process {pid}")
        parts += [f"port {server_address(launch)[1]}", f"model {_short(launch.model_path)}"]
    except (FactError, ValidationError):
        parts.append("command line unreadable")
    unit = _unit(t, pid)
    if unit is not None:
        parts.append(f"unit {unit}")
    return f"pid {pid} ({', '.join(parts)})"


def _short(text: str | None, limit: int = 120) -> str:
    if text is None:
        return "?"
    text = redact_text(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _owner_uid(t: Transport, pid: int) -> int | None:
    try:
        status = t.read_file(f"/proc/{pid}/status", max_bytes=PROCESS["files"]["status"])
        return parse_status_ids(status.decode("ascii", "replace")).uid
    except DoctorError:
        return None


def _user_names(t: Transport) -> dict[int, str]:
    """The host's user names by uid (its /etc/passwd), for the listing; {} if unreadable."""
    try:
        data = t.read_file("/etc/passwd", max_bytes=1 << 20).decode("utf-8", "replace")
    except DoctorError:
        return {}
    names: dict[int, str] = {}
    for line in data.splitlines():
        fields = line.split(":")
        if len(fields) > 2 and fields[2].isascii() and fields[2].isdigit() and fields[0]:
            names.setdefault(int(fields[2]), fields[0][:32])
    return names


def _unit(t: Transport, pid: int) -> str | None:
    """The systemd service that started the process (its cgroup names it), or None."""
    try:
        limit = PROCESS["files"]["cgroup"]
        text = t.read_file(f"/proc/{pid}/cgroup", max_bytes=limit).decode("utf-8", "replace")
    except DoctorError:
        return None
    for line in text.splitlines():
        last = line.rsplit("/", 1)[-1]
        if last.endswith(".service") and len(last) < 128:
            return last
    return None


def outside_containers(t: Transport, servers: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
    """The servers that run on the machine itself. One in a Docker container has its
    models, Python and log in the container's namespace: read from here they would be
    the wrong files (and `fix --apply` would stop a container's process), so it is named
    for `docker://` instead; a FactError when only such servers run."""
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


def vllm_launch_file(t: Transport, path: str | None) -> bool:
    """Whether the launch file given starts vLLM's server and not SGLang's."""
    if not path:
        return False
    try:
        data = t.read_file(path, max_bytes=1 << 20)
    except DoctorError:
        return False
    if not runs_vllm_text(data):
        return False
    try:
        parse_launch_file(data, source=path, path=path)
    except (DoctorError, ValidationError):
        return True
    return False


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
    owner = _owner_uid(t, pid)
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
        data = t.read_file(where, max_bytes=PROCESS["environ"])
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
