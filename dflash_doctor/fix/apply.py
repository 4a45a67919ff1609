"""`fix --apply`: back up, write, relaunch, wait for health, re-check, roll back on failure.

Everything that changes a host is here, and only runs when the user gave --apply.
"""

from __future__ import annotations

import posixpath
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from dflash_doctor.checks.views import SPAN_CHECKS, span_mismatch
from dflash_doctor.errors import DoctorError, TransportError
from dflash_doctor.facts.models import HostFacts, LaunchArgs
from dflash_doctor.fix.edits import EDITABLE
from dflash_doctor.fix.plan import FixPlan
from dflash_doctor.gather import gather
from dflash_doctor.hosts import HostSpec
from dflash_doctor.runner import run_checks
from dflash_doctor.transport.base import Transport

if TYPE_CHECKING:
    from dflash_doctor.fix.bench_step import BenchStep

BACKUP_TAG = ".dflash-doctor-"
BACKUP_SUFFIX = ".bak"
HEALTH_PROBE = (
    "import sys, urllib.request\n"
    "try:\n"
    "    urllib.request.urlopen(sys.argv[1], timeout=3).read()\n"
    "except Exception as e:\n"
    "    sys.exit(str(e)[:200])\n"
)
STOP_WAIT_S = 30.0

Status = Literal["unchanged", "written", "applied", "rolled_back", "failed"]


@dataclass
class Outcome:
    status: Status
    message: str
    backup: str | None = None
    log_tail: list[str] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)


def backup_path(source: str, stamp: str) -> str:
    return f"{source}{BACKUP_TAG}{stamp}{BACKUP_SUFFIX}"


class Applier:
    def __init__(self, spec: HostSpec, transport: Transport, health_timeout: float) -> None:
        self.spec = spec
        self.t = transport
        self.health_timeout = health_timeout
        self.steps: list[str] = []

    def _sudo(self, argv: list[str]) -> list[str]:
        return ["sudo", "-n", *argv] if self.spec.sudo else argv

    def _run(self, argv: list[str], timeout: float = 60) -> None:
        self.steps.append(" ".join(argv))
        res = self.t.run(argv, timeout=timeout)
        if not res.ok:
            err = res.stderr.decode("utf-8", "replace").strip().splitlines()
            raise TransportError(
                f"{self.spec.name}: {argv[0]} failed: {err[-1] if err else res.returncode}"
            )

    # -- files ----------------------------------------------------------------------------

    def write(self, source: str, data: bytes, mode: int) -> None:
        self.t.write_file(self.spec.path(source), data, mode=mode)

    def backup(self, source: str, stamp: str) -> tuple[str, bytes, int]:
        path = self.spec.path(source)
        old = self.t.read_file(path, max_bytes=1 << 20)
        mode = self.t.file_mode(path)
        bak = backup_path(source, stamp)
        try:
            # Edited twice in one run (several hosts in one inventory): keep the first state.
            self.t.file_size(self.spec.path(bak))
            self.steps.append(f"kept the backup {bak} made earlier in this run")
        except DoctorError:
            self.write(bak, old, mode)
            self.steps.append(f"backed up {source} to {bak}")
        return bak, old, mode

    # -- the server -----------------------------------------------------------------------

    def _stop(self, pid: int) -> None:
        self._run(self._sudo(["kill", "-TERM", str(pid)]))
        deadline = time.monotonic() + STOP_WAIT_S
        while time.monotonic() < deadline:
            if not self.t.run(["kill", "-0", str(pid)], timeout=10).ok:
                return
            time.sleep(0.2)
        self._run(self._sudo(["kill", "-KILL", str(pid)]))

    def relaunch(self, launch: LaunchArgs, source: str, pid: int | None, log: str | None) -> None:
        if self.spec.relaunch:
            self._run(["sh", "-c", self.spec.relaunch], timeout=300)
            return
        if launch.kind == "systemd":
            unit = posixpath.basename(source)
            if source.endswith(".conf") and source.rstrip("/").split("/")[-2].endswith(".d"):
                unit = source.rstrip("/").split("/")[-2][: -len(".d")]  # a drop-in
            self._run(self._sudo(["systemctl", "daemon-reload"]))
            self._run(self._sudo(["systemctl", "restart", unit]), timeout=300)
            return
        if launch.kind == "compose":
            argv = ["docker", "compose", "-f", source, "up", "-d", "--force-recreate"]
            self._run(
                self._sudo(
                    argv + ([self.spec.compose_service] if self.spec.compose_service else [])
                ),
                timeout=600,
            )
            return
        if pid is not None:
            self._stop(pid)
        out = log or f"{source}.log"
        # Paths go in as positional arguments, never into the shell text.
        self._run(
            [
                "sh",
                "-c",
                'cd "$(dirname "$0")" && setsid nohup "$0" >>"$1" 2>&1 </dev/null &',
                source,
                out,
            ]
        )

    def health_url(self, launch: LaunchArgs) -> str:
        if self.spec.health_url:
            return self.spec.health_url
        port = 30000
        for i, arg in enumerate(launch.argv):
            if arg == "--port" and i + 1 < len(launch.argv) and launch.argv[i + 1].isdigit():
                port = int(launch.argv[i + 1])
            elif arg.startswith("--port=") and arg[7:].isdigit():
                port = int(arg[7:])
        return f"http://127.0.0.1:{port}/health"

    def wait_healthy(self, launch: LaunchArgs) -> str | None:
        """None when healthy, else why not."""
        url = self.health_url(launch)
        python = launch.python if launch.python and launch.python.startswith("/") else "python3"
        deadline = time.monotonic() + self.health_timeout
        why = "no answer"
        while time.monotonic() < deadline:
            try:
                res = self.t.run([python, "-c", HEALTH_PROBE, url], timeout=10)
            except DoctorError as e:
                res = None
                why = str(e)
            if res is not None:
                if res.ok:
                    self.steps.append(f"healthy: {url}")
                    return None
                why = res.stderr.decode("utf-8", "replace").strip()[-200:] or why
            time.sleep(0.5)
        return f"{url} not healthy after {self.health_timeout:g}s ({why})"

    def log_tail(self, facts: HostFacts | None, lines: int = 20) -> list[str]:
        path = self.spec.log_path or (facts.log.source if facts is not None else None)
        if not path:
            return []
        try:
            res = self.t.run(["tail", "-n", str(lines), self.spec.path(path)], timeout=10)
        except DoctorError:
            return []
        return res.stdout.decode("utf-8", "replace").splitlines()


def apply_plan(
    spec: HostSpec,
    transport: Transport,
    plan: FixPlan,
    facts: HostFacts,
    *,
    stamp: str,
    health_timeout: float = 300.0,
    bench: BenchStep | None = None,
) -> Outcome:
    if not plan.changes:
        return Outcome("unchanged", "nothing to change: the launch already has every fix")
    if plan.source is None or plan.new_text is None or plan.launch is None:
        return Outcome(
            "failed", "no launch file to edit; start the server with: " + (plan.new_command or "?")
        )
    if bench is not None and not (spec.offline or spec.recorded):
        bench.before()  # before any change: a failure here changes nothing
    a = Applier(spec, transport, health_timeout)
    bak, old, mode = a.backup(plan.source, stamp)
    a.write(plan.source, plan.new_text.encode("utf-8"), mode)
    a.steps.append(f"wrote {plan.source}")
    if spec.offline or spec.recorded:
        return Outcome(
            "written", f"wrote {plan.source} (backup {bak}); nothing relaunched", bak, steps=a.steps
        )
    pid = _pid_of(facts)
    log = facts.log.value.path if facts.log.value is not None else spec.log_path
    failure: str | None = None
    new_facts: HostFacts | None = None
    try:
        a.relaunch(plan.launch, plan.source, pid, log)
        failure = a.wait_healthy(plan.launch)
        if failure is None:
            new_facts = gather(spec.model_copy(update={"pid": None}), transport)
            # Still failing: a check that still asks for a launch edit (an upgrade it also
            # asks for is a manual step the edit never claimed to do).
            still = [
                r.check_id
                for r in run_checks(new_facts, plan.check_ids)
                if any(x.action in EDITABLE for f in r.findings for x in f.fixes)
            ]
            if still:
                failure = f"after the relaunch {', '.join(still)} still fail"
            elif set(plan.check_ids) & set(SPAN_CHECKS):
                # Success means the re-gathered served spans equal the trained ones
                # (version, flag and the new log together), not merely compact_cache=True.
                mismatch = span_mismatch(new_facts)
                if mismatch is not None:
                    failure = f"after the relaunch the served spans differ: {mismatch}"
            if failure is None and bench is not None:
                failure = bench.after()
    except DoctorError as e:
        failure = str(e)
    if failure is None:
        return Outcome("applied", f"applied to {plan.source} and verified", bak, steps=a.steps)
    tail = a.log_tail(new_facts or facts)
    # Roll back: the old file, the old server.
    a.write(plan.source, old, mode)
    a.steps.append(f"restored {plan.source} from {bak}")
    try:
        current = gather(spec.model_copy(update={"pid": None}), transport)
        a.relaunch(plan.launch, plan.source, _pid_of(current), log)
        back = a.wait_healthy(plan.launch)
    except DoctorError as e:
        back = str(e)
    status: Status = "rolled_back" if back is None else "failed"
    msg = f"fix failed: {failure}; rolled back" + (
        "" if back is None else f", and the old server did not come back: {back}"
    )
    return Outcome(status, msg, bak, tail, a.steps)


def describe_relaunch(spec: HostSpec, launch: LaunchArgs | None, source: str | None) -> str:
    if spec.offline or spec.recorded:
        return "nothing is relaunched (offline or recorded host): only the file is written"
    if spec.relaunch:
        return f"run the configured relaunch command: {spec.relaunch}"
    if launch is None or source is None:
        return "no launch file: restart the server with the new command yourself"
    if launch.kind == "systemd":
        return f"systemctl daemon-reload && systemctl restart {posixpath.basename(source)}"
    if launch.kind == "compose":
        return f"docker compose -f {source} up -d --force-recreate"
    return f"stop the running server, start {source} detached, wait for /health, re-check"


def _pid_of(facts: HostFacts) -> int | None:
    launch = facts.launch.value
    if launch is None or launch.kind != "process":
        return None
    return int(launch.source.split()[-1])


def latest_backup(transport: Transport, spec: HostSpec, source: str) -> str | None:
    directory = posixpath.dirname(source) or "."
    name = posixpath.basename(source)
    try:
        entries = transport.list_dir(spec.path(directory))
    except DoctorError:
        return None
    ours = sorted(
        e for e in entries if e.startswith(name + BACKUP_TAG) and e.endswith(BACKUP_SUFFIX)
    )
    return posixpath.join(directory, ours[-1]) if ours else None


def rollback(
    spec: HostSpec,
    transport: Transport,
    source: str,
    facts: HostFacts,
    launch: LaunchArgs,
    health_timeout: float,
) -> Outcome:
    bak = latest_backup(transport, spec, source)
    if bak is None:
        return Outcome("failed", f"no dflash-doctor backup of {source} found")
    a = Applier(spec, transport, health_timeout)
    data = transport.read_file(spec.path(bak), max_bytes=1 << 20)
    a.write(source, data, transport.file_mode(spec.path(bak)))
    a.steps.append(f"restored {source} from {bak}")
    if spec.offline or spec.recorded:
        return Outcome("written", f"restored {source} from {bak}", bak, steps=a.steps)
    log = facts.log.value.path if facts.log.value is not None else spec.log_path
    a.relaunch(launch, source, _pid_of(facts), log)
    why = a.wait_healthy(launch)
    if why is not None:
        return Outcome("failed", f"restored {source}, but {why}", bak, a.log_tail(facts), a.steps)
    return Outcome("applied", f"restored {source} from {bak} and relaunched", bak, steps=a.steps)
