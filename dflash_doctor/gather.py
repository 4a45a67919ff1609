"""Gather a host's facts through a Transport. Each fact that cannot be read keeps its reason.

The same code runs over the local and the SSH transport; nothing here changes the host.
"""

from __future__ import annotations

import contextlib
import csv
import json
import posixpath
import re
import shlex
from collections.abc import Callable, Iterator, Mapping
from typing import TypeVar

from pydantic import ValidationError

from dflash_doctor.errors import (
    DoctorError,
    FactError,
    FileMissing,
    PermissionDenied,
    Refused,
    validation_line,
)
from dflash_doctor.facts.capture_hooks import MODELS_PACKAGE, capture_support, hook_in_sources
from dflash_doctor.facts.environment import catalog_environ
from dflash_doctor.facts.gpus import parse_nvidia_smi
from dflash_doctor.facts.launch import (
    LAUNCH_FIELDS,
    parse_argv,
    parse_cmdline,
    parse_launch_file,
    replay_launch,
    sglang_args_start,
)
from dflash_doctor.facts.model_config import (
    MAX_CONFIG_BYTES,
    parse_drafter_config,
    parse_target_config,
)
from dflash_doctor.facts.models import (
    CaptureHook,
    Fact,
    Gpu,
    HostFacts,
    LaunchArgs,
    LogFacts,
    SGLangCode,
    TargetConfig,
)
from dflash_doctor.facts.runtime import read_runtime, server_address
from dflash_doctor.facts.server_log import read_filter_output, scan_log
from dflash_doctor.facts.sglang_code import MAX_SOURCE_BYTES, parse_dflash_model_source
from dflash_doctor.host_exec import HostExec
from dflash_doctor.hosts import HostSpec
from dflash_doctor.prefetch_plan import prefetching
from dflash_doctor.sglang_versions import parse_version
from dflash_doctor.shipped import script_source
from dflash_doctor.transport.base import Transport

T = TypeVar("T")

# Only what locates models and the server's own Python packages; never secrets.
ENV_KEYS = ("HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HOME", "PYTHONPATH", "VIRTUAL_ENV")
_HF_REPO = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
# Logs this large are filtered on the host; smaller ones cost less to copy than to filter.
REMOTE_FILTER_MIN_BYTES = 8 * 1024 * 1024
# What the host's Python says its sglang is, when no single dist-info tells.
VERSION_QUERY = "import importlib.metadata as m; print(m.version('sglang'))"
# How much of a runtime-kept log (`docker logs`, `kubectl logs`) is read: its last lines.
RUNTIME_LOG_TAIL_LINES = 200_000


def _attempt(host: str, where: str, fn: Callable[[], T]) -> Fact[T]:
    """Run one gathering step; any bad input becomes a missing fact with one clear line."""
    try:
        return Fact[T].of(fn(), source=where)
    except FactError as e:
        return Fact[T].missing(f"{host}:{where}: {e}", source=where)
    except DoctorError as e:
        return Fact[T].missing(str(e), source=where)
    except ValidationError as e:
        return Fact[T].missing(f"{host}:{where}: {validation_line(e)}", source=where)
    except (ValueError, TypeError, OverflowError, RecursionError, MemoryError, csv.Error) as e:
        # Hostile data reaching a corner no parser foresaw: still one line, never a traceback.
        text = str(e).splitlines()[0][:160] if str(e) else ""
        return Fact[T].missing(
            f"{host}:{where}: cannot parse ({type(e).__name__}{': ' + text if text else ''})",
            source=where,
        )


class Gatherer:
    def __init__(
        self, spec: HostSpec, transport: Transport, local_env: Mapping[str, str] | None = None
    ) -> None:
        self.spec = spec
        # A remote host answers the whole gathering in one round trip (prefetch_plan.py).
        self.t = prefetching(spec, transport)
        self.host = spec.name
        self.pid: int | None = spec.hints.pid
        # Where model files are found when no server process says (the gate passes this
        # machine's HF settings): never read from os.environ here.
        self.environ: dict[str, str] = {k: v for k, v in (local_env or {}).items() if k in ENV_KEYS}
        self.launch_python: str | None = spec.hints.python
        self.native_version: str | None = None
        # The server process's catalog variables (facts/environment.py), once it is found.
        self.process_env: Fact[dict[str, str]] = Fact[dict[str, str]].missing(
            f"{self.host}: no server process found, so its environment is unknown"
        )
        # Every host interpreter runs through this: as the server's owner, or not at all.
        self.exec = HostExec(self.t, spec)
        self.native_refused: str | None = None

    # -- the server process -------------------------------------------------------------

    def _read_cmdline(self, pid: int) -> bytes:
        return self.t.read_file(f"/proc/{pid}/cmdline", max_bytes=1024 * 1024)

    def _is_server(self, cmdline: bytes) -> bool:
        try:
            sglang_args_start([a.decode("utf-8", "replace") for a in cmdline.split(b"\0")])
        except FactError:
            return False
        return True

    def find_server(self) -> int | None:
        if self.spec.hints.pid is not None:
            return self.spec.hints.pid
        servers: list[tuple[int, bytes]] = []
        for pid in self.t.process_ids():
            try:
                cmdline = self._read_cmdline(pid)
            except DoctorError:
                continue  # processes come and go while we look
            if self._is_server(cmdline):
                servers.append((pid, cmdline))
        servers = self._outside_containers(servers)
        port = self._launch_file_port() if len(servers) > 1 else None
        if port is not None:
            # The server this launch file starts (its port), never merely the first one:
            # `fix --apply` stops what this returns. None when that server is not running.
            for pid, cmdline in servers:
                try:
                    args = parse_cmdline(cmdline, source=f"process {pid}")
                except (FactError, ValidationError):
                    continue
                if server_address(args)[1] == port:
                    return pid
            return None
        return servers[0][0] if servers else None

    def _outside_containers(self, servers: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
        """The servers that run on the machine itself. One in a Docker container has its
        models, Python and log in the container's namespace: read from here they would be
        the wrong files (and `fix --apply` would stop a container's process), so it is named
        for `docker://` instead; a FactError when only such servers run."""
        from dflash_doctor.transport.docker import machine_server_container

        bare, contained = [], []
        for pid, cmdline in servers:
            name = machine_server_container(self.t, pid)
            if name is None:
                bare.append((pid, cmdline))
            else:
                contained.append(name)
        if bare or not contained:
            return bare
        targets = ", ".join(f"docker://{n}" for n in dict.fromkeys(contained))
        raise FactError(f"the SGLang server runs in a Docker container: check {targets}")

    def _launch_file_port(self) -> int | None:
        path = self.spec.hints.launch_file
        if not path:
            return None
        try:
            data = self.t.read_file(path, max_bytes=1 << 20)
            launch = parse_launch_file(
                data, source=path, path=path, service=self.spec.hints.compose_service
            )
        except (DoctorError, ValidationError):
            return None
        return server_address(launch)[1]

    def _read_environ(self, pid: int) -> None:
        try:
            data = self.t.read_file(f"/proc/{pid}/environ", max_bytes=1 << 20)
        except DoctorError as e:
            self.process_env = Fact[dict[str, str]].missing(
                f"{self.host}:/proc/{pid}/environ: {e}", source=f"/proc/{pid}/environ"
            )
            return
        # Only the allow-listed names the checks read are kept (never secrets).
        self.process_env = Fact[dict[str, str]].of(
            catalog_environ(data), source=f"/proc/{pid}/environ"
        )
        # Only the keys that locate model files are kept: environ holds secrets.
        for item in data.split(b"\0"):
            key, _, value = item.decode("utf-8", "replace").partition("=")
            if key in ENV_KEYS:
                self.environ[key] = value

    def read_host_file(self, path: str) -> bytes:
        """A file the launch names (`--config`, a sourced env file, `EnvironmentFile=`),
        read through the transport; never executed."""
        try:
            return self.t.read_file(path, max_bytes=1 << 20)
        except DoctorError as e:
            raise FactError(f"cannot read {path}: {e}") from None

    def launch(self) -> Fact[LaunchArgs]:
        if self.spec.hints.launch is not None:
            command = self.spec.hints.launch
            return _attempt(
                self.host,
                "launch",
                lambda: parse_argv(
                    shlex.split(command) if isinstance(command, str) else list(command),
                    source="launch",
                    kind="argv",
                ),
            )
        pid = _attempt(self.host, "/proc", self.find_server)
        if pid.value is not None:
            self.pid = pid.value
            self._read_environ(pid.value)
            where = f"/proc/{pid.value}/cmdline"
            return _attempt(
                self.host,
                where,
                lambda: parse_cmdline(
                    self._read_cmdline(pid.value or 0), source=f"process {pid.value}"
                ),
            )
        if self.spec.hints.launch_file:
            path = self.spec.hints.launch_file
            return _attempt(
                self.host,
                path,
                lambda: parse_launch_file(
                    self.t.read_file(path, max_bytes=1 << 20),
                    source=path,
                    path=path,
                    service=self.spec.hints.compose_service,
                    read=self.read_host_file,
                ),
            )
        why = pid.error or "no sglang.launch_server process found and no launch file given"
        return Fact[LaunchArgs].missing(why)

    # -- model configs ------------------------------------------------------------------

    def _hub_dirs(self) -> list[str]:
        dirs = []
        if "HF_HUB_CACHE" in self.environ:
            dirs.append(self.environ["HF_HUB_CACHE"])
        if "HUGGINGFACE_HUB_CACHE" in self.environ:
            dirs.append(self.environ["HUGGINGFACE_HUB_CACHE"])
        for home in (self.environ.get("HF_HOME"), self.spec.hints.hf_home):
            if home:
                dirs.append(posixpath.join(home, "hub"))
        user_home = self.environ.get("HOME", "/root")
        dirs.append(posixpath.join(user_home, ".cache/huggingface/hub"))
        return list(dict.fromkeys(dirs))

    def config_path(self, model: str) -> str:
        """`config.json` of a model dir, or of an HF repo id in the host's hub cache."""
        if model.endswith(".json"):
            return model
        local = posixpath.join(model, "config.json")
        if not _HF_REPO.match(model) or model.startswith((".", "/")):
            return local
        # Like SGLang (and transformers): a directory of that name wins over a repo id.
        try:
            self.t.file_size(local)
            return local
        except DoctorError:
            pass
        org, name = model.split("/", 1)
        tried = []
        for hub in self._hub_dirs():
            repo = posixpath.join(hub, f"models--{org}--{name}")
            tried.append(repo)
            try:
                snapshots = self.t.list_dir(posixpath.join(repo, "snapshots"))
            except DoctorError:
                continue
            rev = None
            try:
                ref = self.t.read_file((posixpath.join(repo, "refs/main")), max_bytes=256)
                rev = ref.decode("ascii", "replace").strip()
            except DoctorError:
                pass
            if rev not in snapshots:
                rev = snapshots[-1] if snapshots else None
            if rev:
                return posixpath.join(repo, "snapshots", rev, "config.json")
        raise FactError(f"{model} is not in the Hugging Face cache (looked in {', '.join(tried)})")

    def _model_fact(
        self, model: str | None, override: str | None, what: str, parse: Callable[[bytes, str], T]
    ) -> Fact[T]:
        model = override or model
        if not model:
            return Fact[T].missing(f"{self.host}: no {what} path known (none in the launch)")
        path = _attempt(self.host, model, lambda: self.config_path(model))
        if path.value is None:
            return Fact[T].missing(path.error or "unresolved")
        where = path.value
        return _attempt(
            self.host,
            where,
            lambda: parse(self.t.read_file(where, max_bytes=MAX_CONFIG_BYTES), where),
        )

    # -- log, version, GPUs ---------------------------------------------------------------

    def log_path(self) -> str | None:
        if self.spec.hints.log_path:
            return self.spec.hints.log_path
        if self.pid is None:
            return None
        for fd in (1, 2):
            try:
                target = self.t.readlink(f"/proc/{self.pid}/fd/{fd}")
            except DoctorError:
                continue
            if target.startswith("/") and not target.startswith("/dev/"):
                return target
        return None

    def log(self) -> Fact[LogFacts]:
        if self.t.log_refused is not None:
            return Fact[LogFacts].missing(self.t.log_refused)
        path = self.log_path()
        if path is None and self.pid is not None:
            # A container's server logs to a pipe: its runtime (docker, kubelet) keeps it.
            where = f"{self.t.kind} logs"
            try:
                chunks = self.t.runtime_log(
                    tail_lines=RUNTIME_LOG_TAIL_LINES, since=self.spec.hints.log_since
                )
            except Refused:
                pass  # the log is a file here (local, SSH, a recorded tree)
            except DoctorError as e:
                return Fact[LogFacts].missing(f"{self.host}: {where}: {e}", source=where)
            else:
                return _attempt(self.host, where, lambda: scan_log(chunks, where))
        if path is None:
            return Fact[LogFacts].missing(
                f"{self.host}: server log not found (give its path with --log or log_path)"
            )
        return _attempt(self.host, path, lambda: self._scan_log(path))

    def _scan_log(self, path: str) -> LogFacts:
        if self.t.remote and self.t.file_size(path) >= REMOTE_FILTER_MIN_BYTES:
            # Filter where the log lies: only the lines that matter cross the network.
            for python in self._pythons():
                argv = [*python, "-c", script_source("facts/log_filter.py")]
                argv.append(self.t.command_path(path))
                try:
                    return read_filter_output(self.t.run_stream(argv, timeout=600), path)
                except (FactError, FileMissing, PermissionDenied):
                    raise
                except DoctorError as e:
                    if "no such file" in str(e).lower() or "permission denied" in str(e).lower():
                        raise
                    continue  # no usable Python there: try the next, then stream the file
        return scan_log(self.t.stream_file(path), path)

    def _pythons(self) -> Iterator[list[str]]:
        """Interpreters that may run the stdlib log filter, each as a safe argv prefix; the
        next one is vetted only when the one before could not run it."""
        with contextlib.suppress(DoctorError):
            # A recorded tree's pid names no live process: our stdlib script then runs as
            # the doctor's own user, under a system Python that host_exec found safe.
            yield self.exec.system_python(pid=None if self.t.live_refused else self.pid)
        with contextlib.suppress(DoctorError):
            yield [*self.exec.prefix(self.launch_python, pid=self.pid), "-I"]

    def sglang_version(self, launch: LaunchArgs | None) -> Fact[str]:
        if self.spec.hints.sglang_version:
            declared = self.spec.hints.sglang_version
            if parse_version(declared) is None:
                return Fact[str].missing(
                    f"{self.host}: declared SGLang version {declared!r} is not a version"
                )
            return Fact[str].of(declared, source="declared")
        python = self.spec.hints.python or (launch.python if launch else None)
        if python and python.startswith("/"):
            found = self._version_from_dist_info(python)
            if found is not None:
                return found
        if self.t.live_refused is None and python:
            return _attempt(
                self.host,
                f"{python} -c importlib.metadata",
                lambda: self._version_by_running(python),
            )
        return Fact[str].missing(
            f"{self.host}: SGLang version not found"
            + (
                f" (no sglang-*.dist-info beside {python})"
                if python
                else " (no server Python known)"
            )
        )

    def _version_from_dist_info(self, python: str) -> Fact[str] | None:
        """The `sglang-*.dist-info` beside the interpreter; None when there is none.

        Two of them (a botched upgrade) are ambiguous: the host's Python is then asked which
        one it imports (as the server's owner), or the fact says it is ambiguous.
        """
        prefix = posixpath.dirname(posixpath.dirname(python))
        lib = posixpath.join(prefix, "lib")
        try:
            pythons = [d for d in self.t.list_dir(lib) if d.startswith("python3")]
        except DoctorError:
            return None
        found: list[tuple[str, str]] = []
        for py in pythons:
            for sub in ("site-packages", "dist-packages"):
                site = posixpath.join(lib, py, sub)
                try:
                    entries = self.t.list_dir(site)
                except DoctorError:
                    continue
                for entry in entries:
                    m = re.fullmatch(r"sglang-([^-]+)\.dist-info", entry)
                    if m:
                        found.append((m.group(1), posixpath.join(site, entry)))
        versions = sorted({v for v, _ in found})
        if not found:
            return None
        if len(versions) == 1:
            return Fact[str].of(found[0][0], source=found[0][1])
        where = ", ".join(p for _, p in found)
        if self.t.live_refused is None:
            asked = _attempt(
                self.host,
                f"{python} -c importlib.metadata",
                lambda: self._version_by_running(python),
            )
            if asked.value is not None:
                return asked
        return Fact[str].missing(
            f"{self.host}: SGLang version is ambiguous: {' and '.join(versions)} are both "
            f"installed ({where}); declare it with --sglang-version"
        )

    def _version_by_running(self, python: str) -> str:
        prefix = self.exec.prefix(python, pid=self.pid, env=self.environ)
        res = self.t.run([*prefix, "-c", VERSION_QUERY], timeout=30)
        text = res.stdout.decode("utf-8", "replace").strip()
        if not res.ok or parse_version(text) is None:
            raise FactError("sglang is not installed for this Python")
        return text

    def gpus(self) -> Fact[list[Gpu]]:
        where = self.t.gpu_source
        return _attempt(self.host, where, lambda: parse_nvidia_smi(self.t.gpu_table()))

    def capture_hook(
        self, target: TargetConfig | None, version: Fact[str], launch: LaunchArgs | None
    ) -> Fact[CaptureHook]:
        """Read the target class's module in the host's installed SGLang (text, never
        imported) for `set_dflash_layers_to_capture` (checks/model_wiring.py DFD129)."""
        if target is None or not target.architectures:
            return Fact[CaptureHook].missing(f"{self.host}: no target architecture known")
        site = self.installed_site(version, launch)
        if version.value is None or site is None:
            return Fact[CaptureHook].missing(
                f"{self.host}: the installed SGLang files were not found "
                "(no sglang-*.dist-info beside the server's Python)"
            )
        arch = target.architectures[0]
        answer = capture_support(version.value, arch)
        if answer is None or answer.module is None:
            return Fact[CaptureHook].missing(
                f"{self.host}: no SGLang release in the catalog's data registers {arch}, "
                "so its module file is unknown"
            )

        def path_of(module: str) -> str:
            return posixpath.join(site, *module.split(".")) + ".py"

        def read(module: str) -> str | None:
            try:
                data = self.t.read_file(path_of(module), max_bytes=MAX_SOURCE_BYTES)
            except DoctorError:
                return None
            return data.decode("utf-8", "replace")

        module = f"{MODELS_PACKAGE}.{answer.module}"
        hook = hook_in_sources(arch, module, read, path_of(module))
        if hook is None:
            return Fact[CaptureHook].missing(
                f"{self.host}:{path_of(module)}: unreadable, or it registers no {arch}"
            )
        return Fact[CaptureHook].of(hook, source=hook.file)

    def native(self, args: LaunchArgs) -> LaunchArgs:
        """Re-parse with the host's own SGLang, when its Python can import it."""
        python = args.python or self.launch_python
        server_argv = args.argv[sglang_args_start(args.argv) :]
        try:
            prefix = self.exec.prefix(python, pid=self.pid, env=self.environ)
        except DoctorError as e:
            self.native_refused = str(e)
            # The fallback parse stands; the reason is kept with the fact.
            return args.model_copy(update={"native_refused": str(e)})
        argv = [*prefix, "-c", script_source("facts/sglang_args.py"), json.dumps(server_argv)]
        try:
            res = self.t.run(argv, timeout=120)
            answer = json.loads(res.stdout.decode("utf-8", "replace").strip().splitlines()[-1])
        except (DoctorError, ValueError, IndexError):
            return args
        if not isinstance(answer, dict) or "version" not in answer:
            return args  # no importable SGLang there: the fallback parse stands
        self.native_version = str(answer["version"])
        update: dict[str, object] = {"parser": "sglang", "parser_version": self.native_version}
        if "rejected" in answer:
            update["sglang_rejects"] = str(answer["rejected"])
            return args.model_copy(update=update)
        values = answer.get("values") or {}
        for key, field_name in LAUNCH_FIELDS.items():  # the table the offline replay uses too
            if key in values:
                update[field_name] = values[key]
        if values.get("cuda_graph_max_bs") is None and values.get("cuda_graph_max_bs_decode"):
            update["cuda_graph_max_bs"] = values["cuda_graph_max_bs_decode"]
        window = values.get("speculative_draft_window_size")
        if window is None:
            window = values.get("speculative_dflash_draft_window_size")
        if answer.get("window_flag_used"):
            update["draft_window_flag"] = answer["window_flag_used"]
            update["draft_window_size"] = window
        update["unknown_args"] = [str(u) for u in answer.get("unknown") or []]
        update["accepted_window_flags"] = [str(f) for f in answer.get("window_flags") or []]
        try:
            return LaunchArgs.model_validate({**args.model_dump(), **update})
        except ValidationError:
            return args

    def installed_site(self, version: Fact[str], launch: LaunchArgs | None) -> str | None:
        """The site-packages dir holding the host's sglang (beside its dist-info), or None.

        Also under a declared version: a patched build's own code beats any version string.
        """
        source = version.source or ""
        python = self.spec.hints.python or (launch.python if launch else None)
        if not source.endswith(".dist-info") and python and python.startswith("/"):
            found = self._version_from_dist_info(python)
            source = (found.source if found else None) or source
        return posixpath.dirname(source) if source.endswith(".dist-info") else None

    def sglang_code(self, version: Fact[str], launch: LaunchArgs | None) -> Fact[SGLangCode]:
        """The installed srt/models/dflash.py beside the sglang dist-info, read as text.

        Also under a declared version: a patched build's own code beats any version string.
        """
        site = self.installed_site(version, launch)
        if site is None:
            # Not located (declared version, offline): the version table decides, silently.
            return Fact[SGLangCode]()
        where = posixpath.join(site, "sglang/srt/models/dflash.py")
        return _attempt(
            self.host,
            where,
            lambda: parse_dflash_model_source(
                self.t.read_file(where, max_bytes=MAX_SOURCE_BYTES), where
            ),
        )

    def gather(self) -> HostFacts:
        launch = self.launch()
        if launch.value is not None and self.t.live_refused is None:
            launch = Fact[LaunchArgs].of(self.native(launch.value), launch.source)
        args = launch.value
        if args is not None and self.launch_python is None:
            self.launch_python = args.python
        version = self.sglang_version(args)
        if version.value is None and self.native_version is not None:
            version = Fact[str].of(self.native_version, source="sglang.__version__ on the host")
        if args is not None and args.parser == "fallback" and version.value is not None:
            # SGLang could not be asked: replay its release's parser from the option data.
            args = replay_launch(args, version.value, self.read_host_file)
            launch = Fact[LaunchArgs].of(args, launch.source)
        log = self.log()
        logged = log.value.server_args_fields if log.value is not None else {}
        drafter = self._model_fact(
            args.draft_model_path if args else logged.get("speculative_draft_model_path"),
            self.spec.hints.drafter_path,
            "drafter",
            parse_drafter_config,
        )
        target = self._model_fact(
            args.model_path if args else logged.get("model_path"),
            self.spec.hints.target_path,
            "target model",
            parse_target_config,
        )
        facts = HostFacts(
            host=self.host,
            sglang_version=version,
            gpus=self.gpus(),
            launch=launch,
            drafter=drafter,
            target=target,
            log=log,
            sglang_code=self.sglang_code(version, args),
            environ=self.process_env,
            capture_hook=self.capture_hook(target.value, version, args),
        )
        self.runtime(facts)
        return facts

    def runtime(self, facts: HostFacts) -> None:
        """Ask the running server itself (issue 13); and read the launch file beside it."""
        launch = facts.launch.value
        path = self.spec.hints.launch_file
        if path and launch is not None and launch.kind == "process":
            # Recorded hosts too: after `fix --apply` wrote the file but nothing relaunched,
            # `check` names the pending relaunch (next_step.pending_relaunch).
            facts.launch_file = _attempt(
                self.host,
                path,
                lambda: parse_launch_file(
                    self.t.read_file(path, max_bytes=1 << 20),
                    source=path,
                    path=path,
                    service=self.spec.hints.compose_service,
                ),
            )
        if self.t.live_refused is not None or self.pid is None:
            return
        facts.runtime = _attempt(
            self.host,
            "server HTTP API",
            lambda: read_runtime(self.t, launch, self.pid, self.spec.fix.health_url),
        )
        running = facts.runtime.value.version if facts.runtime.value is not None else None
        if running and parse_version(running) is not None:
            # The running server's own answer beats a declaration or an installed package.
            facts.sglang_version = Fact[str].of(running, source="/server_info version")


def gather(
    spec: HostSpec, transport: Transport, *, local_env: Mapping[str, str] | None = None
) -> HostFacts:
    """`spec`'s host facts through `transport`. `local_env`: this machine's environment,
    passed by the gate (offline) so that model names resolve in its Hugging Face cache."""
    return Gatherer(spec, transport, local_env).gather()
