"""`fix` for servers in containers, each a launch source of the one apply loop
(fix/apply.py `apply_plan`, a `Site`): Docker (compose-managed or `docker run`) and Kubernetes.

- compose: the service's `command` in its compose file (from the container's compose labels)
  is a launch file as any other (`ContainerComposeSite`: locked, journaled, backed up,
  written, read back), relaunched by the project's own `docker compose up -d SERVICE` (or
  `docker-compose`) and checked inside the recreated container; a failed relaunch restores
  the file and recreates it again;
- `docker run`: prints the exact `docker run` with the changed command; `--apply`
  (`DockerRunSite`) keeps the old container (stopped, renamed NAME-dflash-old) while a new
  one is made from its own inspect JSON (every setting kept; only Entrypoint/Cmd change)
  through the Engine API; the old one is removed only once the new one is healthy and
  verified, and is otherwise renamed back and started: the host is never left without its
  server. The backup is the old inspect JSON (`--rollback` recreates from it, through the
  same loop);
- Kubernetes: prints a JSON patch of the pod's owner (Deployment, StatefulSet,
  LeaderWorkerSet) as a `kubectl patch` command; never changes a cluster (`refused`).
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from dflash_doctor.errors import DoctorError, FactError, TransportError
from dflash_doctor.facts.launch import parse_argv, parse_compose, parse_launch_file
from dflash_doctor.facts.models import HostFacts, LaunchArgs
from dflash_doctor.facts.shell import Reader
from dflash_doctor.facts.vllm_launch import parse_vllm_argv, runs_vllm
from dflash_doctor.finders.log import runtime_log
from dflash_doctor.fix.apply import Applier, FileSite, Outcome, apply_plan, rollback
from dflash_doctor.fix.edits import edit_argv
from dflash_doctor.fix.launch_sources import ComposeService
from dflash_doctor.fix.plan import FixPlan, plan_fixes
from dflash_doctor.fix.report import PlanView
from dflash_doctor.fix.vllm_edits import proved_vllm_argv
from dflash_doctor.hosts import HostSpec
from dflash_doctor.redact import redact_argv, redact_block
from dflash_doctor.runner import run_checks
from dflash_doctor.transport.base import Transport
from dflash_doctor.transport.docker import DockerTransport
from dflash_doctor.transport.kubernetes import KubernetesTransport, patch_command, patch_ops

OLD_SUFFIX = "-dflash-old"
STATE_ENV = "DFLASH_DOCTOR_STATE_DIR"


@dataclass(frozen=True)
class ContainerFix:
    """A container's fix as planned and shown, and how `--apply` and `--rollback` carry it
    out: both through the one loop of fix/apply.py. `failed`: why there is nothing to plan
    (a compose file that sets no command); `refused`: why nothing is ever applied
    (Kubernetes: the doctor never changes a cluster)."""

    plan: FixPlan | None
    view: PlanView | None
    apply: Callable[[FixPlan, str], Outcome] | None = None
    roll_back: Callable[[], Outcome] | None = None
    failed: str | None = None
    refused: str | None = None


def container_fix(
    spec: HostSpec, transport: Transport, facts: HostFacts, *, health_timeout: float
) -> ContainerFix | None:
    """The fix of a container host, or None when `transport` is not one."""
    if isinstance(transport, KubernetesTransport):
        return _kubernetes(spec, transport, facts)
    if isinstance(transport, DockerTransport):
        if transport.info.compose_service and transport.info.compose_files:
            return _compose(spec, transport, facts, health_timeout)
        return _docker_run(spec, transport, facts, health_timeout)
    return None


def _view(plan: FixPlan, **shown: Any) -> PlanView:
    return PlanView(manual=plan.manual, notes=plan.notes, **shown)


def _launch_of(argv: list[str], source: str) -> LaunchArgs:
    """The launch a container's command runs: SGLang's parsed; vLLM's as its words (secrets
    hidden), read by vLLM's own reading first so that a command it would refuse is refused
    here (facts/vllm_launch.py)."""
    if runs_vllm(argv):
        parse_vllm_argv(argv, source=source, kind="argv")
        return LaunchArgs(source=source, kind="argv", argv=redact_argv(argv))
    try:
        return parse_argv(argv, source=source, kind="argv")
    except FactError as e:
        raise FactError(f"{source}: its command runs no SGLang server directly ({e})") from None


def _running_plan(spec: HostSpec, facts: HostFacts, running: LaunchArgs) -> FixPlan:
    """The plan for a launch no file on the host holds (its command line only). On vLLM:
    the `--speculative-config` key edits, made in the argv (fix/vllm_edits.py); the runner
    variable is a manual step (fix/plan.py `_editable`)."""
    return plan_fixes(
        spec.name,
        run_checks(facts),
        source=None,
        source_text=None,
        source_launch=None,
        running=running,
        engine="vllm" if runs_vllm(running.argv) else None,
    )


def _edited_argv(argv: list[str], plan: FixPlan) -> list[str]:
    """The container's own words with the plan's edits (the parsed launch has its secrets
    hidden: the recreated container must get the real ones). vLLM's: word for word, no
    quoting (an argv), proved by vLLM's reading (fix/vllm_edits.py proved_vllm_argv)."""
    if runs_vllm(argv):
        return proved_vllm_argv(argv, plan.edits)
    return edit_argv(argv, plan.edits)


# -- Kubernetes ---------------------------------------------------------------------------


def _kubernetes(spec: HostSpec, t: KubernetesTransport, facts: HostFacts) -> ContainerFix:
    """The pod's owner's patch, shown; `--apply` is refused (a cluster changes through its
    own pipeline)."""
    pod = t.pod
    where = f"pod {t.target.namespace}/{pod.name} container {pod.container}"
    plan = _running_plan(spec, facts, _launch_of(pod.argv, where))
    if not plan.changes or plan.new_argv is None:
        return ContainerFix(plan, _view(plan))
    # The pod's own words, edited (the parsed launch has its secrets hidden), then redacted
    # for showing.
    raw_argv = _edited_argv(pod.argv, plan)
    new_argv = _redact_keeping_references(raw_argv)
    notes = list(plan.notes)
    owner = t.owner()
    if owner is None:
        intro = (
            f"{where} has no Deployment, StatefulSet or LeaderWorkerSet owner: set its "
            "command where the pod is defined to"
        )
        command = json.dumps(new_argv)
    else:
        kind, obj = owner
        ops = patch_ops(kind, obj, pod, new_argv)
        intro = f"change {kind.kind} {kind.name} (it owns pod {pod.name}) with"
        command = shlex.join(patch_command(t.target, kind, ops))
    if new_argv != raw_argv:
        notes.append(
            "secret values are shown as ***: put the real ones (better, a secretKeyRef) "
            "before applying"
        )
    view = PlanView(command=command, command_intro=intro, manual=plan.manual, notes=notes)
    return ContainerFix(
        plan,
        view,
        refused="not applied: dflash-doctor never changes a cluster; apply the patch "
        "above through your usual pipeline",
    )


# A Kubernetes dependent variable, `$(NAME)`: the secret stays in the cluster, the word is not one.
_ENV_REFERENCE = re.compile(r"(--[A-Za-z0-9_-]{1,128}=)?\$\([A-Za-z_][A-Za-z0-9_]{0,127}\)")


def _redact_keeping_references(argv: list[str]) -> list[str]:
    redacted = redact_argv(argv)
    if len(redacted) != len(argv):
        return redacted
    return [a if _ENV_REFERENCE.fullmatch(a) else r for a, r in zip(argv, redacted, strict=True)]


# -- Docker -------------------------------------------------------------------------------


# -- what both Docker sites share: the recreated container, checked from inside -----------


@contextmanager
def _inside(spec: HostSpec, t: DockerTransport) -> Iterator[Transport]:
    """The container as it runs now (recreated: a new id under the same name), reached
    through the engine host's connection, which stays open for the rest of the fix."""
    outer = cast(Transport, _Borrowed(t.outer))
    with DockerTransport(spec.name, outer, t.container) as fresh:
        yield fresh


def _logs_tail(t: DockerTransport) -> list[str]:
    """The container's last log lines (`docker logs`: the server's stdout and stderr)."""
    try:
        data = b"".join(runtime_log(t, tail_lines=20))
    except DoctorError:
        return []
    return data.decode("utf-8", "replace").splitlines()[-20:]


def _engine(t: DockerTransport) -> Any:
    """This machine's Docker engine, or None: `--apply` recreates its containers only."""
    from dflash_doctor.transport.docker_engine import Engine, engine_socket

    path = engine_socket()
    if t.outer.remote or path is None:  # the engine socket is on this machine
        return None
    return Engine(path)


# -- `docker run` containers ----------------------------------------------------------------


class DockerRunSite:
    """A `docker run` container's launch: its settings (inspect JSON), backed up to the state
    directory; "written" by recreating the container from them with the new command. The old
    container is kept (stopped, renamed NAME-dflash-old) until the new one is verified."""

    def __init__(
        self,
        a: Applier,
        t: DockerTransport,
        raw: dict[str, Any],
        argv: list[str] | None,
        *,
        restoring: Path | None = None,
    ) -> None:
        self.a = a
        self.t = t
        self.raw = raw  # what the new container is made from
        self.argv = argv  # its command (None: the one `raw` holds)
        self.restoring = restoring  # `--rollback`: the backup `raw` was read from
        self.name = t.info.name
        self.kept = self.name + OLD_SUFFIX
        self.live = True
        self.changed = False  # the old container renamed aside
        self.created = False
        self.engine: Any = None

    @property
    def where(self) -> str:
        return f"container {self.name}"

    @property
    def done(self) -> str:
        if self.restoring is not None:
            return f"rolled back {self.name} to {self.restoring.name}"
        return f"applied to container {self.name}"

    def lock(self, stamp: str) -> None:
        self.engine = _engine(self.t)
        if self.engine is None:
            raise TransportError(
                "not applied: --apply recreates containers of this machine's Docker engine "
                "only; run the command above there"
            )

    def unlock(self) -> None:
        return None

    def write(self, plan: FixPlan, stamp: str, pid: int | None) -> str:
        """The backup (nothing changes on the engine before the relaunch); a rollback's
        backup is the one it restores from, never a new one."""
        _launch_of(self.argv if self.argv is not None else _argv_of(self.raw), self.where)
        if self.restoring is not None:
            self.a.steps.append(f"restoring {self.name} from {self.restoring}")
            return str(self.restoring)
        backup = _backup(self.t.info.raw, self.name, stamp)
        self.a.steps.append(f"backup: {backup}")
        return str(backup)

    def relaunch(self, launch: LaunchArgs, pid: int | None, log: str | None) -> None:
        engine = self.engine
        engine.rename(self.name, self.kept)
        self.changed = True
        engine.stop(self.kept)
        self.a.steps.append(f"stopped {self.name} (kept as {self.kept})")
        self.created = True  # a failed create leaves nothing to remove (404 is fine)
        engine.create(self.name, self.raw, self.argv)
        engine.start(self.name)
        self.a.steps.append(f"created and started {self.name}")

    def restore(self) -> None:
        if self.created:
            self.engine.remove(self.name)
            self.created = False
        if self.changed:
            self.engine.rename(self.kept, self.name)

    def relaunch_old(self, launch: LaunchArgs, log: str | None) -> bool:
        if not self.changed:
            return False
        self.engine.start(self.name)
        self.a.steps.append(f"restored the old container {self.name}")
        return True

    def served(self) -> AbstractContextManager[Transport]:
        return _inside(self.a.spec, self.t)

    def commit(self) -> None:
        try:
            self.engine.remove(self.kept)
            self.a.steps.append(f"removed the old container {self.kept}")
        except DoctorError as e:
            self.a.steps.append(f"could not remove {self.kept}: {e}")

    def log_tail(self, facts: HostFacts | None) -> list[str]:
        return _logs_tail(self.t)

    def way_out(self, bak: str) -> str:
        return (
            f"The old container is kept as {self.kept}: `docker rm -f {self.name}`, "
            f"`docker rename {self.kept} {self.name}` and `docker start {self.name}` bring it "
            f"back (its settings are in {bak})"
        )

    def start_hint(self) -> str:
        return f"start it with `docker start {self.name}`"


def _docker_run(
    spec: HostSpec, t: DockerTransport, facts: HostFacts, health_timeout: float
) -> ContainerFix:
    """The `docker run` that starts the container with the fix; `--apply` recreates it."""
    info = t.info
    plan = _running_plan(spec, facts, _launch_of(info.argv, f"container {info.name}"))

    def roll_back() -> Outcome:
        return _rollback_run(spec, t, facts, health_timeout)

    if not plan.changes or plan.new_argv is None:
        return ContainerFix(plan, _view(plan), roll_back=roll_back)
    new_argv = _edited_argv(info.argv, plan)
    view = _view(
        plan,
        command=shlex.join(docker_run_command(info.raw, new_argv)),
        command_intro=f"container {info.name} was started by docker run: start it with",
        relaunch=f"--apply recreates {info.name} with every other setting kept "
        "(backup: its docker inspect JSON)",
    )

    def apply(plan: FixPlan, stamp: str) -> Outcome:
        a = Applier(spec, t.outer, health_timeout)
        site = DockerRunSite(a, t, info.raw, new_argv)
        return apply_plan(spec, t, plan, facts, stamp=stamp, site=site)

    return ContainerFix(plan, view, apply=apply, roll_back=roll_back)


def _rollback_run(
    spec: HostSpec, t: DockerTransport, facts: HostFacts, health_timeout: float
) -> Outcome:
    """The newest inspect JSON kept that differs from the container now, recreated through
    the same loop as an apply (its re-check: health only, there is nothing to prove)."""
    name = t.info.name
    saved = sorted(state_dir().glob(f"{name}.*.inspect.json"))
    current = _argv_of(t.info.raw)
    for path in reversed(saved):
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            return Outcome("failed", f"{path}: cannot read the backup: {e}")
        if _argv_of(raw) != current:
            break
    else:
        return Outcome("failed", f"no backup of {name} differs from it: nothing to roll back")
    running = _launch_of(t.info.argv, f"container {name}")
    plan = FixPlan(host=spec.name, source=None, launch=running, new_argv=_argv_of(raw))
    site = DockerRunSite(Applier(spec, t.outer, health_timeout), t, raw, None, restoring=path)
    return apply_plan(spec, t, plan, facts, stamp=path.name, site=site)


def _backup(raw: dict[str, Any], name: str, stamp: str) -> Path:
    """The container's inspect JSON in the state directory, readable by its owner only."""
    d = state_dir()
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = d / f"{name}.{stamp}.inspect.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(raw, indent=1), encoding="utf-8")
    tmp.chmod(0o600)  # the inspect JSON holds the container's environment, secrets too
    tmp.replace(path)
    return path


# -- compose-managed containers ---------------------------------------------------------------


class ContainerCompose(ComposeService):
    """A compose-managed container's service: its compose file (on the engine host) is
    parsed and edited as any compose file, and recreated by the project's own `up` (its
    name, directory and every file, from the container's labels), by the compose tool the
    engine host has."""

    def __init__(self, t: DockerTransport, tool: str | None) -> None:
        self.info = t.info
        self.tool = tool

    def parse(
        self, data: bytes, *, source: str, path: str, service: str | None, read: Reader | None
    ) -> LaunchArgs:
        return parse_compose(data, source=source, service=self.info.compose_service)

    def up(self, source: str) -> list[str]:
        """`docker compose` (or `docker-compose`) `up --detach` of this one service."""
        info = self.info
        words = [
            *(self.tool or "docker compose").split(),
            "--project-name",
            info.compose_project or "",
            "--project-directory",
            info.compose_dir or os.path.dirname(source),
        ]
        for f in info.compose_files:
            words += ["--file", f]
        return [*words, "up", "--detach", "--", info.compose_service or ""]

    def relaunch(self, source: str, service: str | None) -> list[list[str]] | None:
        if self.tool is None:
            raise TransportError(
                "neither `docker compose` nor `docker-compose` runs on the engine host"
            )
        return [self.up(source)]

    def describe(self, source: str, service: str | None) -> str:
        return shlex.join(self.up(source))


class ContainerComposeSite(FileSite):
    """The compose file of a compose-managed container: a launch file on the engine host
    (locked, journaled, backed up, written and read back as any), whose server is checked
    inside the container the relaunch recreated."""

    def __init__(self, a: Applier, link: str, t: DockerTransport) -> None:
        super().__init__(a, link)
        self.t = t

    def served(self) -> AbstractContextManager[Transport]:
        return _inside(self.a.spec, self.t)

    def log_tail(self, facts: HostFacts | None) -> list[str]:
        return _logs_tail(self.t)


def _compose_tool(outer: Transport) -> str | None:
    """`docker compose` (the plugin), else `docker-compose` (v1), on the engine host."""
    for candidate in (["docker", "compose"], ["docker-compose"]):
        try:
            if outer.run([*candidate, "version"], timeout=30).ok:
                return " ".join(candidate)
        except DoctorError:
            continue
    return None


def _compose(
    spec: HostSpec, t: DockerTransport, facts: HostFacts, health_timeout: float
) -> ContainerFix:
    """The compose file's diff; `--apply` writes it and recreates the service."""
    info, outer = t.info, t.outer
    source = text = None
    launch: LaunchArgs | None = None
    for path in info.compose_files:
        try:
            data = outer.read_file(path, max_bytes=1 << 20)
            launch = parse_launch_file(data, source=path, path=path, service=info.compose_service)
        except (DoctorError, UnicodeDecodeError):
            continue
        source, text = path, data.decode("utf-8")
        break
    if source is None or text is None or launch is None:
        why = (
            f"no compose file of {info.name} sets service {info.compose_service}'s command "
            f"({', '.join(info.compose_files)})"
        )
        return ContainerFix(None, None, failed=why)
    kind = ContainerCompose(t, _compose_tool(outer))
    found: tuple[str, LaunchArgs] = (source, launch)

    def site() -> ContainerComposeSite:
        return ContainerComposeSite(Applier(spec, outer, health_timeout, kind), found[0], t)

    def roll_back() -> Outcome:
        return rollback(spec, outer, found[0], facts, found[1], health_timeout, site())

    plan = plan_fixes(
        spec.name,
        run_checks(facts),
        source=source,
        source_text=text,
        source_launch=launch,
        running=facts.launch.value,
    )
    if not plan.changes or plan.new_text is None:
        return ContainerFix(plan, _view(plan), roll_back=roll_back)
    view = _view(plan, diff=redact_block(plan.diff()), relaunch=kind.describe(source, None))

    def apply(plan: FixPlan, stamp: str) -> Outcome:
        return apply_plan(spec, outer, plan, facts, stamp=stamp, site=site())

    return ContainerFix(plan, view, apply=apply, roll_back=roll_back)


def docker_run_command(raw: dict[str, Any], argv: list[str]) -> list[str]:
    """The `docker run` that starts this container again with `argv` (secrets redacted):
    the settings `docker run` users set most, read from its inspect JSON."""
    config = raw.get("Config") or {}
    host = raw.get("HostConfig") or {}
    name = str(raw.get("Name", "")).lstrip("/")
    words = ["docker", "run", "--detach", f"--name={name}"]
    mode = host.get("NetworkMode")
    if mode and mode != "default":
        words.append(f"--network={mode}")
    if host.get("IpcMode") and host["IpcMode"] not in ("private", "shareable", ""):
        words.append(f"--ipc={host['IpcMode']}")
    if host.get("ShmSize") and host["ShmSize"] != 67108864:
        words.append(f"--shm-size={host['ShmSize']}")
    restart = (host.get("RestartPolicy") or {}).get("Name")
    if restart and restart != "no":
        words.append(f"--restart={restart}")
    for req in host.get("DeviceRequests") or []:
        ids = req.get("DeviceIDs") or []
        count = req.get("Count")
        gpus = "all" if count == -1 else ("device=" + ",".join(ids) if ids else str(count))
        words.append(f"--gpus={gpus}")
    for bind in host.get("Binds") or []:
        words.append(f"--volume={bind}")
    for port, bindings in (host.get("PortBindings") or {}).items():
        for b in bindings or []:
            hp = b.get("HostPort", "")
            ip = b.get("HostIp", "")
            words.append(f"--publish={ip + ':' if ip else ''}{hp}:{port}")
    if config.get("User"):
        words.append(f"--user={config['User']}")
    if config.get("WorkingDir"):
        words.append(f"--workdir={config['WorkingDir']}")
    for item in config.get("Env") or []:
        words.append(f"--env={item}")
    for key, value in sorted((config.get("Labels") or {}).items()):
        words.append(f"--label={key}={value}")
    entrypoint = list(config.get("Entrypoint") or [])
    from dflash_doctor.transport.docker_engine import split_command

    new_entry, cmd = split_command(entrypoint, argv)
    if new_entry and new_entry != entrypoint:
        words.append(f"--entrypoint={new_entry[0]}")  # one word: the rest is the command
    words.append(str(config.get("Image", "")))
    words += cmd
    return redact_argv(_redact_env(words))


def _redact_env(words: list[str]) -> list[str]:
    from dflash_doctor.redact import is_secret_name

    out = []
    for w in words:
        if w.startswith("--env="):
            key, _, _value = w[len("--env=") :].partition("=")
            if is_secret_name(key):
                w = f"--env={key}=***"
        out.append(w)
    return out


def state_dir() -> Path:
    base = os.environ.get(STATE_ENV) or os.path.join(
        os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state"), "dflash-doctor"
    )
    return Path(base) / "docker"


def _argv_of(raw: dict[str, Any]) -> list[str]:
    config = raw.get("Config") or {}
    return [*(config.get("Entrypoint") or []), *(config.get("Cmd") or [])]


class _Borrowed:
    """The engine host's transport, lent to a second DockerTransport: closing that one must
    not close the connection the fix still uses."""

    def __init__(self, inner: Transport) -> None:
        self._inner = inner

    def close(self) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
