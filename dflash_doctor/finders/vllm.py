"""The vLLM server: found where no SGLang server is, from the launch file given
or the running `vllm serve` process, as a VllmLaunch fact.

Read only: the process's command line and the catalog's VLLM_* variables of its
environment (facts/vllm_launch.py VLLM_ENV_NAMES; never the rest, which may hold secrets).
"""

from __future__ import annotations

import posixpath
import re

from dflash_doctor.errors import DoctorError, FactError
from dflash_doctor.facts.launch import launch_file_kind
from dflash_doctor.facts.models import Fact, LaunchArgs
from dflash_doctor.facts.vllm_launch import (
    VLLM_DEFAULT_PORT,
    NotVllm,
    command_words,
    parse_vllm_argv,
    parse_vllm_command,
    parse_vllm_compose,
    parse_vllm_script,
    parse_vllm_systemd_unit,
    process_environ,
    runs_vllm,
    unix_socket_line,
    vllm_address,
)
from dflash_doctor.facts.vllm_metrics import parse_vllm_runtime
from dflash_doctor.facts.vllm_models import Engine, VllmLaunch, VllmRuntime
from dflash_doctor.finders.base import MAX_HOST_FILE_BYTES, attempt, host_file_reader
from dflash_doctor.finders.pids import proc_pids, process_ids
from dflash_doctor.finders.server_api import ask_server
from dflash_doctor.finders.version import dist_infos
from dflash_doctor.hosts import GatherHints, HostSpec
from dflash_doctor.transport.base import Transport

MAX_CMDLINE_BYTES = 1024 * 1024
# How a live host is asked for vLLM's processes (the bundle runs the same argv).
VLLM_PGREP_ARGV = ("pgrep", "-f", "vllm")


def vllm_launch_of_file(
    t: Transport, host: str, path: str, service: str | None = None
) -> Fact[VllmLaunch]:
    """A shell launch script, systemd unit or compose file (its `service`, else the one
    that runs vLLM) that runs vLLM."""

    try:
        data = t.read_file(path, max_bytes=MAX_HOST_FILE_BYTES)
    except DoctorError:
        return Fact[VllmLaunch]()  # the SGLang launch finder names the unreadable file
    compose = launch_file_kind(path, data) == "compose"
    # A compose file may split the command into YAML list items (`["vllm", "serve"]`).
    if not runs_vllm_text(data) and not (compose and b"vllm" in data):
        return Fact[VllmLaunch]()

    def parse() -> VllmLaunch | None:
        try:
            if compose:
                return parse_vllm_compose(data, source=path, service=service)
            systemd = launch_file_kind(path, data) == "systemd"
            parse_file = parse_vllm_systemd_unit if systemd else parse_vllm_script
            return parse_file(data, source=path, read=host_file_reader(t))
        except NotVllm:
            return None  # the words were in a comment or an echo: not a vLLM launch

    got = attempt(host, path, parse)
    return Fact[VllmLaunch](value=got.value, source=got.source, error=got.error)


def _candidates(t: Transport) -> list[int]:
    """Pids that may run vLLM. A live host: `pgrep -f vllm` on it, else every pid its /proc
    lists. Elsewhere the transport's own table: a recorded tree's /proc (pgrep would see
    this machine), none offline (OutOfReach)."""
    if t.live_refused is not None:
        return process_ids(t)
    try:
        res = t.run(list(VLLM_PGREP_ARGV), timeout=10)
        if res.returncode in (0, 1):
            return [int(x) for x in res.stdout.split() if x.isascii() and x.isdigit()]
    except DoctorError:
        pass
    return proc_pids(t.list_dir("/proc"))


def vllm_servers(t: Transport) -> list[tuple[int, list[str]]]:
    """Every process that runs a vLLM server (pid, argv)."""
    found = []
    for pid in _candidates(t):
        try:
            raw = t.read_file(f"/proc/{pid}/cmdline", max_bytes=MAX_CMDLINE_BYTES)
        except DoctorError:
            continue  # processes come and go while we look
        argv = _argv(raw)
        if runs_vllm(argv):
            found.append((pid, argv))
    return found


def _argv(raw: bytes) -> list[str]:
    return [a.decode("utf-8", "replace") for a in raw.rstrip(b"\0").split(b"\0")]


def process_argv(t: Transport, pid: int) -> list[str] | None:
    """Process `pid`'s command line; None when it cannot be read (it exited, another
    user's)."""
    try:
        return _argv(t.read_file(f"/proc/{pid}/cmdline", max_bytes=MAX_CMDLINE_BYTES))
    except DoctorError:
        return None


def vllm_server_on(t: Transport, argv: list[str]) -> int | None:
    """The one running vLLM server that listens on the port `argv` (a vLLM command line)
    names, or on vLLM's default; None when none or several do, or none can be listed."""
    want = _port(argv) or VLLM_DEFAULT_PORT
    try:
        servers = vllm_servers(t)
        found = [pid for pid, words in servers if (_port(words) or VLLM_DEFAULT_PORT) == want]
    except DoctorError:
        return None
    return found[0] if len(found) == 1 else None


def vllm_listens_on(t: Transport, port: int) -> bool:
    """Whether a running vLLM server listens on `port` (its `--port`, else vLLM's default);
    False when none can be listed."""
    try:
        return any((_port(words) or VLLM_DEFAULT_PORT) == port for _, words in vllm_servers(t))
    except DoctorError:
        return False


def runs_vllm_pid(t: Transport, pid: int) -> bool:
    """Whether process `pid` runs a vLLM server (False when it cannot be read)."""
    try:
        return runs_vllm(_argv(t.read_file(f"/proc/{pid}/cmdline", max_bytes=MAX_CMDLINE_BYTES)))
    except DoctorError:
        return False


def vllm_launch_of_process(t: Transport, host: str, pid: int, argv: list[str]) -> VllmLaunch:
    """The running server's launch, with the catalog's VLLM_* variables of its environment."""
    try:
        environ = process_environ(t.read_file(f"/proc/{pid}/environ", max_bytes=1 << 20))
    except DoctorError:
        environ = {}  # unreadable (another user's process): the launch alone stands
    launch = parse_vllm_argv(argv, source=f"process {pid}", kind="process", environ=environ)
    return launch.model_copy(update={"pid": pid})


def find_vllm(t: Transport, host: str, hints: GatherHints) -> Fact[VllmLaunch]:
    """The vLLM launch: the launch file given, else the one running vLLM server (one on
    `--port` when several run). Absent (no value, no error) when no vLLM runs here."""
    if hints.launch_file:
        return vllm_launch_of_file(t, host, hints.launch_file, hints.compose_service)
    servers = attempt(host, "/proc", lambda: vllm_servers(t))
    if servers.value is None:
        return Fact[VllmLaunch]()  # no process table here: the SGLang finder says so
    running = servers.value
    if hints.pid is not None:
        running = [s for s in running if s[0] == hints.pid]
    if len(running) > 1 and hints.server_port is not None:
        running = [s for s in running if _port(s[1]) == hints.server_port]
    if not running:
        return Fact[VllmLaunch]()
    if len(running) > 1:
        pids = ", ".join(str(pid) for pid, _ in running[:16])
        why = f"{host}: {len(running)} vLLM servers run (pids {pids}); choose one with --pid"
        return Fact[VllmLaunch].missing(why, source="/proc")
    pid, argv = running[0]
    return attempt(host, f"/proc/{pid}", lambda: vllm_launch_of_process(t, host, pid, argv))


def _port(argv: list[str]) -> int | None:
    try:
        return parse_vllm_argv(argv, source="", kind="process").port
    except FactError:
        return None


def runs_vllm_text(data: bytes) -> bool:
    """Whether a launch file names vLLM's server at all: a file that does not is some
    other engine's, and no vLLM fact is made of it (its own finder reports on it)."""
    return b"vllm serve" in data or b"vllm.entrypoints.openai.api_server" in data


def engine_facts(
    t: Transport, spec: HostSpec, launch: Fact[LaunchArgs], pid: int | None
) -> tuple[Fact[Engine], Fact[VllmLaunch]]:
    """Which engine serves the host, and its vLLM launch where that is vLLM: looked for
    only where no SGLang launch was found (an SGLang host pays nothing for it)."""
    if launch.value is not None or pid is not None:
        return Fact[Engine].of("sglang", launch.source), Fact[VllmLaunch]()
    if spec.hints.launch is not None:
        return _given(spec.name, spec.hints.launch)
    vllm = find_vllm(t, spec.name, spec.hints)
    if vllm.value is None and vllm.error is None:
        return Fact[Engine](), vllm
    return Fact[Engine].of("vllm", vllm.source), vllm


def _given(host: str, command: str | list[str]) -> tuple[Fact[Engine], Fact[VllmLaunch]]:
    """The engine and vLLM launch of the command given with `--launch`: vLLM's when its
    words run vLLM's server, else nothing here (SGLang's finder reads it)."""
    try:
        words = command_words(command)
    except FactError:
        return Fact[Engine](), Fact[VllmLaunch]()  # SGLang's finder names the bad command
    if not runs_vllm(words):
        return Fact[Engine](), Fact[VllmLaunch]()
    vllm = attempt(host, "launch", lambda: parse_vllm_command(words))
    return Fact[Engine].of("vllm", "launch"), vllm


def _bin_dirs(launch: VllmLaunch) -> list[str]:
    """The bin directories the launch names by path: its Python's, its `vllm` script's."""
    words = [w for w in (launch.python, launch.launcher) if w and w.startswith("/")]
    return list(dict.fromkeys(posixpath.dirname(w) for w in words))


VLLM_DIST_INFO = re.compile(r"vllm-([0-9][0-9A-Za-z.+]{0,40})\.dist-info")


def find_vllm_version(t: Transport, host: str, launch: VllmLaunch | None) -> Fact[str]:
    """The installed vLLM: the one `vllm-*.dist-info` beside the launch's Python or `vllm`
    script. Absent off vLLM hosts; a reason where none or several are found."""
    if launch is None:
        return Fact[str]()
    dirs = _bin_dirs(launch)
    if not dirs:
        return Fact[str].missing(f"{host}: vLLM version not found (no interpreter path known)")
    found = [f for d in dirs for f in dist_infos(t, d, VLLM_DIST_INFO)]
    versions = sorted({v for v, _ in found})
    if len(versions) == 1:
        return Fact[str].of(versions[0], source=found[0][1])
    if not versions:
        where = ", ".join(dirs)
        return Fact[str].missing(f"{host}: vLLM version not found (no vllm-*.dist-info by {where})")
    return Fact[str].missing(f"{host}: vLLM version is ambiguous: {' and '.join(versions)}")


# The window between the two /metrics scrapes of a live check: long enough to see the
# drafts of a server under traffic, short enough not to slow a check much (DFD304 falls
# back to the counters since start when the window saw no drafts).
METRICS_WINDOW_S = 2.0
# What a live check asks a vLLM server (on_host/server_http.py operations): its release,
# then /metrics twice, METRICS_WINDOW_S apart, on the host (no round trip between them).
VLLM_RUNTIME_OPS: list[dict[str, object]] = [
    {"op": "version"},
    {"op": "vllm_metrics"},
    {"op": "wait", "seconds": METRICS_WINDOW_S},
    {"op": "vllm_metrics"},
]
VLLM_RUNTIME_TIMEOUT_S = 10.0


def find_vllm_runtime(t: Transport, host: str, launch: VllmLaunch | None) -> Fact[VllmRuntime]:
    """What the running vLLM server answers over HTTP, asked on the host by the shipped
    client; absent where no server runs to ask (a launch file, a recorded or offline host)."""
    if t.live_refused is not None or launch is None or launch.pid is None:
        return Fact[VllmRuntime]()
    address = vllm_address(launch)
    if address is None:
        return Fact[VllmRuntime].missing(unix_socket_line(host, launch), source="--uds")
    url = f"http://{address[0]}:{address[1]}"

    def ask() -> VllmRuntime:
        version, metrics, waited, later = ask_server(
            t, address, launch.pid, list(VLLM_RUNTIME_OPS), timeout=VLLM_RUNTIME_TIMEOUT_S
        )
        seconds = waited.get("waited_s")
        if not isinstance(seconds, int | float):
            return parse_vllm_runtime(version, metrics, url)
        return parse_vllm_runtime(version, metrics, url, (later, float(seconds)))

    return attempt(host, "vLLM HTTP API", ask)
