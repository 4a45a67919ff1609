"""`fix` for servers in containers: Docker (compose-managed or `docker run`) and Kubernetes.

- compose: the service's `command` in its compose file (from the container's compose labels)
  is edited as any launch file, then `docker compose up -d SERVICE` (or `docker-compose`)
  recreates it; a failed relaunch restores the file and recreates it again;
- `docker run`: prints the exact `docker run` with the changed command; `--apply` keeps the old
  container (stopped, renamed NAME-dflash-old) while a new one is made from its own inspect
  JSON (every setting kept; only Entrypoint/Cmd change) through the Engine API; the old one is
  removed only once the new one is healthy and verified, and is otherwise renamed back and
  started: the host is never left without its server. The backup is the old inspect JSON
  (`--rollback` recreates from it);
- Kubernetes: prints a JSON patch of the pod's owner (Deployment, StatefulSet,
  LeaderWorkerSet) as a `kubectl patch` command; never changes a cluster.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path
from typing import Any, cast

from dflash_doctor.checks.views import SPAN_CHECKS, span_mismatch
from dflash_doctor.errors import DoctorError, FactError, TransportError
from dflash_doctor.facts.launch import parse_argv, parse_launch_file
from dflash_doctor.facts.models import HostFacts, LaunchArgs
from dflash_doctor.fix.apply import Applier
from dflash_doctor.fix.edits import EDITABLE, edit_argv
from dflash_doctor.fix.plan import FixPlan, plan_fixes
from dflash_doctor.fix.report import FixOutcome, FixReport, PlanView
from dflash_doctor.gather import gather
from dflash_doctor.hosts import HostSpec
from dflash_doctor.redact import redact_argv, redact_block, redact_text
from dflash_doctor.runner import run_checks
from dflash_doctor.transport.base import Transport
from dflash_doctor.transport.docker import DockerTransport
from dflash_doctor.transport.kubernetes import KubernetesTransport, patch_command, patch_ops

OLD_SUFFIX = "-dflash-old"
STATE_ENV = "DFLASH_DOCTOR_STATE_DIR"


def container_fix(
    spec: HostSpec,
    transport: Transport,
    facts: HostFacts,
    *,
    apply: bool,
    roll_back: bool,
    stamp: str,
    health_timeout: float,
) -> FixReport | None:
    """The fix of a container host, or None when `transport` is not one."""
    if isinstance(transport, KubernetesTransport):
        return _kubernetes(spec, transport, facts, apply=apply or roll_back)
    if isinstance(transport, DockerTransport):
        fixer = DockerFix(spec, transport, facts, stamp, health_timeout)
        if transport.info.compose_service and transport.info.compose_files:
            return fixer.compose(apply=apply, roll_back=roll_back)
        return fixer.run_container(apply=apply, roll_back=roll_back)
    return None


def _view(plan: FixPlan, **shown: Any) -> PlanView:
    return PlanView(manual=plan.manual, notes=plan.notes, **shown)


def _launch_of(argv: list[str], source: str) -> LaunchArgs:
    try:
        return parse_argv(argv, source=source, kind="argv")
    except FactError as e:
        raise FactError(f"{source}: its command runs no SGLang server directly ({e})") from None


# -- Kubernetes ---------------------------------------------------------------------------


def _kubernetes(
    spec: HostSpec, t: KubernetesTransport, facts: HostFacts, *, apply: bool
) -> FixReport:
    pod = t.pod
    where = f"pod {t.target.namespace}/{pod.name} container {pod.container}"
    running = _launch_of(pod.argv, where)
    plan = plan_fixes(
        spec.name,
        run_checks(facts),
        source=None,
        source_text=None,
        source_launch=None,
        running=running,
    )
    if not plan.changes or plan.new_argv is None:
        return FixReport(host=spec.name, outcome="planned", plan=_view(plan))
    # The pod's own words, edited (the parsed launch has its secrets hidden), then redacted
    # for showing.
    raw_argv = edit_argv(pod.argv, plan.edits)
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
    if apply:
        return FixReport(
            host=spec.name,
            outcome="error",
            plan=view,
            error="not applied: dflash-doctor never changes a cluster; apply the patch "
            "above through your usual pipeline",
        )
    return FixReport(host=spec.name, outcome="planned", plan=view)


# A Kubernetes dependent variable, `$(NAME)`: the secret stays in the cluster, the word is not one.
_ENV_REFERENCE = re.compile(r"(--[A-Za-z0-9_-]{1,128}=)?\$\([A-Za-z_][A-Za-z0-9_]{0,127}\)")


def _redact_keeping_references(argv: list[str]) -> list[str]:
    redacted = redact_argv(argv)
    if len(redacted) != len(argv):
        return redacted
    return [a if _ENV_REFERENCE.fullmatch(a) else r for a, r in zip(argv, redacted, strict=True)]


# -- Docker -------------------------------------------------------------------------------


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


class DockerFix:
    def __init__(
        self,
        spec: HostSpec,
        t: DockerTransport,
        facts: HostFacts,
        stamp: str,
        health_timeout: float,
    ) -> None:
        self.spec = spec
        self.t = t
        self.facts = facts
        self.view: PlanView | None = None
        self.stamp = stamp
        self.health_timeout = health_timeout
        self.steps: list[str] = []

    # -- verification shared by compose and run -------------------------------------------

    def verify(self, plan: FixPlan | None, launch: LaunchArgs) -> str | None:
        """None when the recreated container is healthy (and, after a fix, its checks pass)."""
        try:
            outer = cast(Transport, _Borrowed(self.t.outer))
            fresh = DockerTransport(self.spec.name, outer, self.t.container)
        except DoctorError as e:
            return str(e)
        with fresh:
            applier = Applier(self.spec, fresh, self.health_timeout)
            failure = applier.wait_healthy(launch)
            self.steps += applier.steps
            if failure is not None or plan is None:
                return failure
            new_facts = gather(self.spec, fresh)
            still = [
                r.check_id
                for r in run_checks(new_facts, plan.check_ids)
                if any(x.action in EDITABLE for f in r.findings for x in f.fixes)
            ]
            if still:
                return f"after the relaunch {', '.join(still)} still fail"
            if set(plan.check_ids) & set(SPAN_CHECKS):
                mismatch = span_mismatch(new_facts)
                if mismatch is not None:
                    return f"after the relaunch the served spans differ: {mismatch}"
        return None

    def _logs_tail(self) -> list[str]:
        try:
            data = b"".join(self.t.runtime_log(tail_lines=20))
        except DoctorError:
            return []
        return data.decode("utf-8", "replace").splitlines()[-20:]

    def _report(
        self,
        ok: bool,
        message: str,
        tail: list[str] | None = None,
        outcome: FixOutcome | None = None,
    ) -> FixReport:
        return FixReport(
            host=self.spec.name,
            outcome=outcome or ("applied" if ok else "failed"),
            plan=self.view,
            steps=[redact_text(step) for step in self.steps],
            message=redact_text(message),
            log_tail=[redact_text(line) for line in tail or []],
        )

    # -- `docker run` containers ----------------------------------------------------------

    def run_container(self, *, apply: bool, roll_back: bool) -> FixReport:
        info = self.t.info
        if roll_back:
            return self.rollback_run()
        running = _launch_of(info.argv, f"container {info.name}")
        plan = plan_fixes(
            self.spec.name,
            run_checks(self.facts),
            source=None,
            source_text=None,
            source_launch=None,
            running=running,
        )
        if not plan.changes or plan.new_argv is None:
            return FixReport(host=self.spec.name, outcome="planned", plan=_view(plan))
        # The container's own words, edited: the parsed launch has its secrets hidden, and
        # the recreated container must get the real ones.
        new_argv = edit_argv(info.argv, plan.edits)
        self.view = _view(
            plan,
            command=shlex.join(docker_run_command(info.raw, new_argv)),
            command_intro=f"container {info.name} was started by docker run: start it with",
            relaunch=f"--apply recreates {info.name} with every other setting kept "
            "(backup: its docker inspect JSON)",
        )
        if not apply:
            return FixReport(host=self.spec.name, outcome="planned", plan=self.view)
        engine = self._engine()
        if engine is None:
            return self._report(
                False,
                "not applied: --apply recreates containers of this "
                "machine's Docker engine only; run the command above there",
            )
        backup = self._backup(info.raw)
        self.steps.append(f"backup: {backup}")
        return self._recreate(engine, info.raw, new_argv, plan, f"applied to container {info.name}")

    def _engine(self) -> Any:
        from dflash_doctor.transport.docker_engine import Engine, engine_socket

        path = engine_socket()
        if self.t.outer.remote or path is None:  # the engine socket is on this machine
            return None
        return Engine(path)

    def _backup(self, raw: dict[str, Any]) -> Path:
        d = state_dir()
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = d / f"{self.t.info.name}.{self.stamp}.inspect.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(raw, indent=1), encoding="utf-8")
        tmp.chmod(0o600)  # the inspect JSON holds the container's environment, secrets too
        tmp.replace(path)
        return path

    def _recreate(
        self,
        engine: Any,
        raw: dict[str, Any],
        argv: list[str] | None,
        plan: FixPlan | None,
        done: str,
    ) -> FixReport:
        """Replace the running container by one made from `raw` (running `argv`), keeping the
        old one until the new one is verified; on failure the old one runs again."""
        name = self.t.info.name
        old = name + OLD_SUFFIX
        new_argv = argv if argv is not None else _argv_of(raw)
        try:
            launch = _launch_of(new_argv, f"container {name}")
            engine.rename(name, old)
        except DoctorError as e:
            return self._report(False, f"nothing changed: {e}")
        failure: str | None = None
        try:
            engine.stop(old)
            self.steps.append(f"stopped {name} (kept as {old})")
            engine.create(name, raw, argv)
            engine.start(name)
            self.steps.append(f"created and started {name}")
            failure = self.verify(plan, launch)
        except DoctorError as e:
            failure = str(e)
        except KeyboardInterrupt:
            failure = "interrupted (Ctrl-C or SIGTERM)"
        if failure is None:
            try:
                engine.remove(old)
                self.steps.append(f"removed the old container {old}")
            except DoctorError as e:
                self.steps.append(f"could not remove {old}: {e}")
            return self._report(True, f"{done} and verified")
        tail = self._logs_tail()
        try:
            engine.remove(name)
            engine.rename(old, name)
            engine.start(name)
            self.steps.append(f"restored the old container {name}")
            back = self.verify(None, _launch_of(_argv_of(self.t.info.raw), f"container {name}"))
        except DoctorError as e:
            back = str(e)
        if back is not None:
            return self._report(False, f"{failure}; ROLLBACK FAILED: {back}", tail)
        return self._report(
            False, f"{failure}; rolled back: the old container runs again", tail, "rolled_back"
        )

    def rollback_run(self) -> FixReport:
        name = self.t.info.name
        saved = sorted(state_dir().glob(f"{name}.*.inspect.json"))
        current = _argv_of(self.t.info.raw)
        for path in reversed(saved):
            try:
                raw = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as e:
                return self._report(False, f"{path}: cannot read the backup: {e}")
            if _argv_of(raw) != current:
                break
        else:
            return self._report(False, f"no backup of {name} differs from it: nothing to roll back")
        engine = self._engine()
        if engine is None:
            return self._report(False, "not rolled back: this machine's Docker engine only")
        self.steps.append(f"restoring {name} from {path}")
        return self._recreate(engine, raw, None, None, f"rolled back {name} to {path.name}")

    # -- compose-managed containers -------------------------------------------------------

    def compose(self, *, apply: bool, roll_back: bool) -> FixReport:
        info = self.t.info
        outer = self.t.outer
        service = info.compose_service
        source = text = None
        launch: LaunchArgs | None = None
        for path in info.compose_files:
            try:
                data = outer.read_file(path, max_bytes=1 << 20)
                launch = parse_launch_file(data, source=path, path=path, service=service)
            except (DoctorError, UnicodeDecodeError):
                continue
            source, text = path, data.decode("utf-8")
            break
        if source is None or text is None or launch is None:
            return self._report(
                False,
                f"no compose file of {info.name} sets service {service}'s command "
                f"({', '.join(info.compose_files)})",
            )
        if roll_back:
            return self.compose_rollback(source, text, launch)
        plan = plan_fixes(
            self.spec.name,
            run_checks(self.facts),
            source=source,
            source_text=text,
            source_launch=launch,
            running=self.facts.launch.value,
        )
        if not plan.changes or plan.new_text is None:
            return FixReport(host=self.spec.name, outcome="planned", plan=_view(plan))
        up = shlex.join(self._compose_up(source, self._compose_tool() or "docker compose"))
        self.view = _view(plan, diff=redact_block(plan.diff()), relaunch=up)
        if not apply:
            return FixReport(host=self.spec.name, outcome="planned", plan=self.view)
        # Backed up, locked and journaled as a launch script is (fix/apply.py, journal.py):
        # the compose file's directory is its owner's, the doctor's state is not.
        a = Applier(self.spec, outer, self.health_timeout)
        try:
            real = a.real_path(source)
            a.lock(real, self.stamp).begin(link=source)
        except DoctorError as e:
            a.unlock()
            return self._report(False, f"nothing changed: {e}")
        try:
            return self._compose_apply(a, plan, real, text, launch)
        finally:
            a.unlock()

    def _compose_apply(
        self, a: Applier, plan: FixPlan, source: str, text: str, launch: LaunchArgs
    ) -> FixReport:
        """The compose file backed up and written under the lock, the service recreated and
        verified, or the old file and service put back."""
        assert plan.new_text is not None and plan.new_argv is not None
        try:
            old, ident = a.current(source)
            if old.decode("utf-8", "replace") != text:
                raise TransportError(f"{source} changed since it was read; run fix again")
            a.backup(source, self.stamp, old, ident)
            a.write(source, plan.new_text.encode(), ident.mode, expect=ident)
            a.step("written")
        except DoctorError as e:
            self.steps += a.steps
            return self._report(False, f"nothing relaunched, the server runs as before: {e}")
        self.steps += [*a.steps, f"wrote {source}"]
        a.step("stopping", stopping="docker compose up")
        failure = self._up(source) or self.verify(plan, _launch_of(plan.new_argv, source))
        if failure is None:
            a.step("done")
            return self._report(True, f"applied to {source} and verified")
        tail = self._logs_tail()
        a.step("rolling_back")
        try:
            a.write(source, old, ident.mode)
            self.steps.append(f"restored {source}")
            back = self._up(source) or self.verify(None, launch)
        except DoctorError as e:
            back = str(e)
        a.step("failed" if back is not None else "rolled_back")
        if back is not None:
            return self._report(False, f"{failure}; ROLLBACK FAILED: {back}", tail)
        return self._report(
            False, f"{failure}; rolled back: {source} restored", tail, "rolled_back"
        )

    def compose_rollback(self, source: str, text: str, launch: LaunchArgs) -> FixReport:
        """The newest copy the journal kept that differs from the compose file, restored
        (never a `*.bak` name found beside it), then the service recreated."""
        a = Applier(self.spec, self.t.outer, self.health_timeout)
        try:
            real = a.real_path(source)
            j = a.lock(real, self.stamp, recover=True)
            current, cur_id = a.current(real)
            pick = next(((e, d) for e, d in j.copies() if d != current), None)
            if pick is None:
                return self._report(
                    False, f"no backup of {source} differs from it: nothing to roll back"
                )
            entry, old = pick
            mode = entry.get("mode")
            a.write(real, old, mode if isinstance(mode, int) else cur_id.mode, expect=cur_id)
            j.mark(entry, "rolled_back")
        except DoctorError as e:
            return self._report(False, f"not rolled back: {e}")
        finally:
            a.unlock()
        self.steps += [*a.steps, f"restored {real} from {entry.get('backup')}"]
        restored = parse_launch_file(
            old, source=source, path=source, service=self.t.info.compose_service
        )
        failure = self._up(source) or self.verify(None, restored)
        if failure is not None:
            return self._report(False, f"rolled back {source}, but {failure}", self._logs_tail())
        return self._report(True, f"rolled back {source} and the server is healthy")

    def _compose_up(self, source: str, tool: str) -> list[str]:
        info = self.t.info
        words = [
            *tool.split(),
            "--project-name",
            info.compose_project or "",
            "--project-directory",
            info.compose_dir or os.path.dirname(source),
        ]
        for f in info.compose_files:
            words += ["--file", f]
        return [*words, "up", "--detach", "--", info.compose_service or ""]

    def _compose_tool(self) -> str | None:
        """`docker compose` (the plugin), else `docker-compose` (v1), on the engine host."""
        for candidate in (["docker", "compose"], ["docker-compose"]):
            try:
                if self.t.outer.run([*candidate, "version"], timeout=30).ok:
                    return " ".join(candidate)
            except DoctorError:
                continue
        return None

    def _up(self, source: str) -> str | None:
        """Recreate the service; None when that ran."""
        outer = self.t.outer
        tool = self._compose_tool()
        if tool is None:
            return "neither `docker compose` nor `docker-compose` runs on the engine host"
        argv = self._compose_up(source, tool)
        res = outer.run(argv, timeout=max(self.health_timeout, 60))
        if not res.ok:
            lines = res.stderr.decode("utf-8", "replace").strip().splitlines()
            return f"{shlex.join(argv)} failed: {lines[-1][:200] if lines else res.returncode}"
        self.steps.append(f"ran {shlex.join(argv)}")
        return None


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
