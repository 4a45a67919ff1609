"""Gather a host's facts: the finders (finders/) composed, each fact with its reason.

The same code runs over every transport (local, SSH, a recorded tree, offline, a
container): the transport answers or refuses; nothing here changes the host or asks what
kind of host it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from dflash_doctor.facts.launch import replay_launch
from dflash_doctor.facts.model_config import parse_drafter_config, parse_target_config
from dflash_doctor.facts.models import Fact, HostFacts, LaunchArgs, ServerProcess
from dflash_doctor.facts.vllm_models import Engine, VllmLaunch
from dflash_doctor.finders.base import attempt, host_file_reader
from dflash_doctor.finders.drafter_files import find_drafter_files
from dflash_doctor.finders.gpus import find_gpus
from dflash_doctor.finders.launch import (
    launch_given,
    launch_of_file,
    launch_of_process,
    native_parse,
)
from dflash_doctor.finders.log import (
    REMOTE_FILTER_MIN_BYTES as REMOTE_FILTER_MIN_BYTES,
)
from dflash_doctor.finders.log import filter_pythons, find_log
from dflash_doctor.finders.models import hub_dirs, model_fact
from dflash_doctor.finders.process import ENV_KEYS as ENV_KEYS
from dflash_doctor.finders.process import (
    find_pid,
    model_env,
    read_cmdline,
    read_environ,
    server_process,
)
from dflash_doctor.finders.server_api import find_runtime
from dflash_doctor.finders.sglang_code import find_capture_hook, find_sglang_code
from dflash_doctor.finders.version import VERSION_QUERY as VERSION_QUERY
from dflash_doctor.finders.version import (
    Asker,
    declared,
    find_version,
    installed_site,
    installed_version,
    run_version_query,
)
from dflash_doctor.finders.vllm import engine_facts, find_vllm_runtime, find_vllm_version
from dflash_doctor.host_exec import HostExec
from dflash_doctor.hosts import HostSpec
from dflash_doctor.prefetch_plan import prefetching
from dflash_doctor.sglang_versions import parse_version
from dflash_doctor.transport.base import Transport


@dataclass
class Found:
    """The launch and the server process it came from, as the process finder left them."""

    launch: Fact[LaunchArgs]
    pid: int | None
    # Where model files are found: the server's HF settings over the ones passed in.
    env: dict[str, str]
    server: Fact[ServerProcess] = field(default_factory=lambda: Fact[ServerProcess]())
    environ: Fact[dict[str, str]] | None = None
    # This kind of host has no process table (offline): no environment to read, ever.
    no_processes: bool = False


def find_launch(t: Transport, spec: HostSpec, env: dict[str, str]) -> Found:
    """The launch given, else the running server's, else the launch file's."""
    host = spec.name
    if spec.hints.launch is not None:
        return Found(launch_given(host, spec.hints.launch), spec.hints.pid, env)
    pid = attempt(host, "/proc", lambda: find_pid(t, host, spec.hints))
    if pid.value is not None:
        return _from_process(t, host, pid.value, env)
    if spec.hints.launch_file:
        read = host_file_reader(t)
        launch = launch_of_file(t, host, spec.hints.launch_file, spec.hints.compose_service, read)
        return Found(launch, None, env, no_processes=pid.out_of_reach)
    why = pid.error or "no sglang.launch_server process found and no launch file given"
    return Found(Fact[LaunchArgs].missing(why), None, env)


def _from_process(t: Transport, host: str, pid: int, env: dict[str, str]) -> Found:
    environ, raw = read_environ(t, host, pid)
    env = {**env, **model_env(raw)}
    cmdline = attempt(host, f"/proc/{pid}/cmdline", lambda: read_cmdline(t, pid))
    if cmdline.value is None:
        launch = Fact[LaunchArgs].missing(cmdline.error or "unreadable", cmdline.source)
        return Found(launch, pid, env, environ=environ)
    launch = launch_of_process(host, pid, cmdline.value)
    python = launch.value.python if launch.value is not None else None
    server = attempt(host, f"/proc/{pid}", lambda: server_process(t, pid, python, raw))
    return Found(launch, pid, env, server, environ)


def _asker(
    t: Transport, run_as: HostExec, found: Found, answered: Mapping[str, str] | None = None
) -> Asker:
    """How the host's Python is asked its sglang version; None where nothing live runs.
    `answered`: what an interpreter already said with SGLang's parse (its installed
    version, "" for none), so that it is not started again to say it (issue 28)."""
    if t.live_refused is not None:
        return None
    said = dict(answered or {})

    def ask(python: str) -> str:
        if python in said:
            return installed_version(said[python])
        return run_version_query(t, run_as.prefix(python, pid=found.pid, env=found.env))

    return ask


def _launch_and_version(
    t: Transport, spec: HostSpec, run_as: HostExec, found: Found
) -> tuple[Fact[LaunchArgs], Fact[str]]:
    """The launch (SGLang's own parse where it may run, else its release's replay) and the
    version of SGLang it runs under."""
    launch, native_version, answered = found.launch, None, {}
    if launch.value is not None and t.live_refused is None:
        python = launch.value.python or spec.hints.python
        parsed, native_version, installed = native_parse(
            t, run_as, launch.value, python, found.pid, found.env
        )
        launch = Fact[LaunchArgs].of(parsed, launch.source)
        if python and installed is not None:
            answered[python] = installed
    args = launch.value
    if spec.hints.sglang_version:
        version = declared(spec.name, spec.hints.sglang_version)
    else:
        python = spec.hints.python or (args.python if args else None)
        version = find_version(t, spec.name, python, _asker(t, run_as, found, answered))
    if version.value is None and native_version is not None:
        version = Fact[str].of(native_version, source="sglang.__version__ on the host")
    if args is not None and args.parser == "fallback" and version.value is not None:
        # SGLang could not be asked: replay its release's parser from the option data.
        args = replay_launch(args, version.value, host_file_reader(t))
        launch = Fact[LaunchArgs].of(args, launch.source)
    return launch, version


def gather(
    spec: HostSpec, transport: Transport, *, local_env: Mapping[str, str] | None = None
) -> HostFacts:
    """`spec`'s host facts through `transport`. `local_env`: this machine's environment,
    passed by the gate (offline) so that model names resolve in its Hugging Face cache;
    never read from os.environ here."""
    # A remote host answers the whole gathering in one round trip (prefetch_plan.py).
    t = prefetching(spec, transport)
    host = spec.name
    # Every host interpreter runs through this: as the server's owner, or not at all.
    run_as = HostExec(t, spec)
    found = find_launch(t, spec, {k: v for k, v in (local_env or {}).items() if k in ENV_KEYS})
    engine, vllm = _engine(t, spec, found)
    launch, version = _launch_and_version(t, spec, run_as, found)
    args = launch.value
    python = spec.hints.python or (args.python if args else None)
    pythons = filter_pythons(t, run_as, python, found.pid)
    log = find_log(t, host, spec.hints.log_path, found.pid, pythons, spec.hints.log_since)
    logged = log.value.server_args_fields if log.value is not None else {}
    hubs = hub_dirs(found.env, spec.hints.hf_home)
    drafter_path = args.draft_model_path if args else logged.get("speculative_draft_model_path")
    target_path = args.model_path if args else logged.get("model_path")
    if vllm.value is not None:
        drafter_path, target_path = vllm.value.draft_model, vllm.value.model
    drafter = model_fact(
        t, host, spec.hints.drafter_path or drafter_path, "drafter", parse_drafter_config, hubs
    )
    target = model_fact(
        t, host, spec.hints.target_path or target_path, "target model", parse_target_config, hubs
    )
    site = installed_site(t, version, python)
    facts = HostFacts(
        host=host,
        sglang_version=version,
        gpus=find_gpus(t, host),
        launch=launch,
        drafter=drafter,
        drafter_files=find_drafter_files(t, host, drafter.value),
        target=target,
        log=log,
        sglang_code=find_sglang_code(t, host, site),
        environ=found.environ or _no_environ(host, found.no_processes),
        capture_hook=find_capture_hook(t, host, target.value, version.value, site),
        server=found.server,
        engine=engine,
        vllm_launch=vllm,
    )
    if engine.value == "vllm":
        facts = _vllm_host(t, facts)
    return _live(t, spec, facts, found.pid)


def _engine(t: Transport, spec: HostSpec, found: Found) -> tuple[Fact[Engine], Fact[VllmLaunch]]:
    """The host's engine and vLLM launch; on a vLLM host SGLang's launch does not apply
    (its checks are skipped as not applying, never "no SGLang server found")."""
    engine, vllm = engine_facts(t, spec, found.launch, found.pid)
    if engine.value == "vllm":
        found.launch = Fact[LaunchArgs].missing(
            f"{spec.name}: a vLLM server, not SGLang's launch", vllm.source, out_of_reach=True
        )
    return engine, vllm


def _vllm_host(t: Transport, facts: HostFacts) -> HostFacts:
    """A vLLM host's version; the SGLang-only facts do not apply: not "could not read"."""
    found = find_vllm_version(t, facts.host, facts.vllm_launch.value)
    runtime = find_vllm_runtime(t, facts.host, facts.vllm_launch.value)
    # As for SGLang (_live): the running server's answer beats the installed dist-info.
    version, installed = _running_first(
        found,
        runtime.value.version if runtime.value else None,
        "/version",
    )
    why = f"{facts.host}: a vLLM server"
    update: dict[str, object] = {
        "vllm_runtime": runtime,
        "vllm_version": version,
        "sglang_version": Fact[str].missing(f"{why}: no SGLang version applies", out_of_reach=True),
        "environ": Fact[dict[str, str]].missing(
            f"{why}: its VLLM_* variables are in the vLLM launch", out_of_reach=True
        ),
    }
    if installed is not None:
        update["vllm_installed"] = installed
    return facts.model_copy(update=update)


def _running_first(
    installed: Fact[str], running: str | None, source: str
) -> tuple[Fact[str], Fact[str] | None]:
    """The version fact to judge by, and the installed one where it differs: the running
    server's own answer beats a declaration or an installed package; an installed release
    that differs (upgraded, not restarted) is kept apart (DFD112)."""
    if not running or parse_version(running) is None:
        return installed, None
    differs = installed.value is not None and parse_version(installed.value) != parse_version(
        running
    )
    return Fact[str].of(running, source=source), installed if differs else None


def _no_environ(host: str, out_of_reach: bool = False) -> Fact[dict[str, str]]:
    if out_of_reach:
        return Fact[dict[str, str]].missing(
            f"{host}: no process table here, so no server environment", out_of_reach=True
        )
    return Fact[dict[str, str]].missing(
        f"{host}: no server process found, so its environment is unknown"
    )


def _live(t: Transport, spec: HostSpec, facts: HostFacts, pid: int | None) -> HostFacts:
    """The launch file beside a running server, and what the server itself answers."""
    launch = facts.launch.value
    update: dict[str, object] = {}
    if spec.hints.launch_file and launch is not None and launch.kind == "process":
        # Recorded hosts too: after `fix --apply` wrote the file but nothing relaunched,
        # `check` names the pending relaunch (next_step.pending_relaunch).
        update["launch_file"] = launch_of_file(
            t, spec.name, spec.hints.launch_file, spec.hints.compose_service
        )
    runtime = find_runtime(t, spec.name, launch, pid, spec.fix.health_url)
    version, installed = _running_first(
        facts.sglang_version,
        runtime.value.version if runtime.value is not None else None,
        "/server_info version",
    )
    update.update(runtime=runtime, sglang_version=version)
    if installed is not None:
        update["installed_version"] = installed
    return facts.model_copy(update=update)
