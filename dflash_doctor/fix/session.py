"""One host's fix: gather, plan; apply or roll back when asked. Prints nothing: it returns a
FixReport (fix/report.py) that render/fix.py prints and the CLI turns into the exit code."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import TYPE_CHECKING

from dflash_doctor.errors import DoctorError, HostUnreachable
from dflash_doctor.facts.models import HostFacts, LaunchArgs
from dflash_doctor.facts.vllm_launch import command_words
from dflash_doctor.finders.base import host_file_reader
from dflash_doctor.finders.process import owner_name, server_process
from dflash_doctor.finders.vllm import process_argv, vllm_server_on
from dflash_doctor.fix.apply import Outcome, apply_plan, describe_relaunch, rollback
from dflash_doctor.fix.containers import ContainerFix, container_fix
from dflash_doctor.fix.launch_sources import InventoryEntry, file_backed, parse_file
from dflash_doctor.fix.plan import FixPlan, plan_fixes
from dflash_doctor.fix.report import BenchPair, FixReport, PlanView
from dflash_doctor.gather import gather
from dflash_doctor.hosts import HostSpec
from dflash_doctor.pipeline import open_transport, within_budget
from dflash_doctor.redact import redact_argv, redact_block, redact_text, shell_with_placeholders
from dflash_doctor.runner import run_checks
from dflash_doctor.transport.base import Transport
from dflash_doctor.transport.open import open_here
from dflash_doctor.transport.ssh_options import SSHOptions

if TYPE_CHECKING:
    from dflash_doctor.bench.matrix import BenchOptions


def fix_host(
    spec: HostSpec,
    ssh: SSHOptions,
    *,
    apply: bool,
    roll_back: bool,
    stamp: str,
    health_timeout: float,
    bench: BenchOptions | None = None,
    bench_threshold: float = 0.05,
    local_env: Mapping[str, str] | None = None,
    shown: PlanView | None = None,
    read_timeout: float | None = None,
) -> FixReport:
    """One host's fix report: planned, applied (`apply`) or rolled back (`roll_back`); an
    unreachable host or a failing step is an outcome in the report, never an exception.
    `shown`: the plan the user said yes to; `apply` carries out that plan or nothing."""
    try:
        transport = open_transport(spec, ssh)
    except DoctorError as e:
        return FixReport(host=spec.name, outcome="unreachable", error=str(e))
    view: PlanView | None = None
    try:
        if isinstance(facts := _read_host(spec, transport, local_env, read_timeout), FixReport):
            return facts  # not read within `read_timeout` (_read_host)
        container = container_fix(spec, transport, facts, health_timeout=health_timeout)
        if container is not None:
            if roll_back or apply:
                shown = shown if apply and not roll_back else None
                return _container(spec, container, roll_back=roll_back, shown=shown, stamp=stamp)
            return _container_plan(spec, container)
        source, text, source_launch = _launch_source(spec, transport, facts)
        if facts.engine.value == "vllm":
            spec = _with_vllm_pid(spec, transport, facts, source_launch)
        if roll_back:
            return _roll_back(spec, transport, facts, source, source_launch, health_timeout)
        plan, writer = _plan(spec, transport, facts, source, text, source_launch)
        view = _view(plan)
        if plan.changes:
            view = _with_processes(view, spec, transport, writer, facts, plan, source)
        if not apply:
            return FixReport(host=spec.name, outcome="planned", plan=view)
        return _apply(
            spec,
            transport,
            writer,
            plan,
            facts,
            view,
            shown=shown,
            stamp=stamp,
            health_timeout=health_timeout,
            bench=bench,
            bench_threshold=bench_threshold,
        )
    except (DoctorError, UnicodeDecodeError) as e:
        return FixReport(host=spec.name, outcome="error", error=str(e), plan=view)
    finally:
        transport.close()


def _container_plan(spec: HostSpec, c: ContainerFix) -> FixReport:
    """A container's fix as planned: the change shown, nothing done."""
    if c.failed is not None:
        return FixReport(host=spec.name, outcome="failed", message=c.failed)
    return FixReport(host=spec.name, outcome="planned", plan=c.view)


def _container(
    spec: HostSpec, c: ContainerFix, *, roll_back: bool, shown: PlanView | None, stamp: str
) -> FixReport:
    """A container's fix applied or rolled back, through the same loop as a launch file's
    (fix/apply.py); a Kubernetes pod's is refused (the doctor never changes a cluster)."""
    changes = c.plan is not None and c.plan.changes
    if c.refused is not None and changes:
        return FixReport(host=spec.name, outcome="error", plan=c.view, error=c.refused)
    if roll_back:
        if c.roll_back is None:
            return _container_plan(spec, c)
        return _outcome(spec.name, c.roll_back())
    if c.plan is None or c.view is None or c.apply is None:
        return _container_plan(spec, c)
    if (stale := _not_shown(spec, c.view, shown)) is not None:
        return stale
    return _outcome(spec.name, c.apply(c.plan, stamp), c.view)


def _not_shown(spec: HostSpec, view: PlanView, shown: PlanView | None) -> FixReport | None:
    """`shown`: the plan the user said yes to at the terminal; one that differs by now is
    not applied (the report says so), None when it is the same."""
    if shown is None or view == shown:
        return None
    message = "nothing changed: the plan is no longer the one shown; run fix again"
    return FixReport(host=spec.name, outcome="failed", plan=view, message=message)


def _read_host(
    spec: HostSpec,
    transport: Transport,
    local_env: Mapping[str, str] | None,
    read_timeout: float | None,
) -> HostFacts | FixReport:
    """The host's facts, gathered within `read_timeout` (None: no limit); past it (a slow
    or dripping peer), the host's report as unreachable: nothing was changed. Only the
    reading has this budget: an apply under way is never abandoned (its steps have their
    own limits, `health_timeout`)."""
    try:
        return within_budget(
            spec.name, read_timeout, lambda: gather(spec, transport, local_env=local_env)
        )
    except HostUnreachable as e:
        return FixReport(host=spec.name, outcome="unreachable", error=str(e))


def _with_processes(
    view: PlanView,
    spec: HostSpec,
    transport: Transport,
    writer: Transport,
    facts: HostFacts,
    plan: FixPlan,
    source: str | None,
) -> PlanView:
    """The view with the process `--apply` stops and how it relaunches the server. Made
    after the view: a launch it cannot describe still shows the change, then the error."""
    relaunch = describe_relaunch(spec, plan.launch, source, writer.relaunch_refused)
    stop = _stop_line(spec, transport, facts, source, writer.relaunch_refused)
    return view.model_copy(update={"relaunch": relaunch, "stop": stop})


def _stop_line(
    spec: HostSpec,
    transport: Transport,
    facts: HostFacts,
    source: str | None,
    refused: str | None,
) -> str | None:
    """The process `--apply` stops, named exactly: pid, owner and command line (redacted).
    None where the doctor stops nothing (recorded or offline host, a configured relaunch
    command, no launch file to relaunch from, no server running)."""
    pid = spec.hints.pid or facts.server_pid()
    if refused is not None or spec.fix.relaunch or source is None or pid is None:
        return None
    server, launch = facts.server.value, facts.launch.value
    if server is None and launch is None:  # a vLLM server: its process, read here
        server = server_process(transport, pid, None, None)
    owner = owner_name(transport, server.owner_uid if server is not None else None)
    argv = launch.argv if launch is not None else process_argv(transport, pid)
    command = shlex.join(redact_argv(argv)) if argv else "?"
    return f"pid {pid} (owner {owner}): {command}"


def _launch_source(
    spec: HostSpec, transport: Transport, facts: HostFacts
) -> tuple[str | None, str | None, LaunchArgs | None]:
    """The file the launch comes from (the inventory's hint, else the running launch's own
    file), its text and its parsed launch; all None for a launch no file backs."""
    running = facts.launch.value
    source = spec.hints.launch_file or (running.source if file_backed(running) else None)
    vllm = facts.vllm_launch.value
    if source is None and vllm is not None and vllm.kind in ("script", "systemd", "compose"):
        source = vllm.source
    if source is None:
        return None, None, None
    data = transport.read_file(source, max_bytes=1 << 20)
    text = data.decode("utf-8")
    source_launch = parse_file(
        data,
        source=source,
        path=source,
        service=spec.hints.compose_service,
        read=host_file_reader(transport),
        engine=facts.engine.value,
    )
    return source, text, source_launch


def _with_vllm_pid(
    spec: HostSpec, transport: Transport, facts: HostFacts, source_launch: LaunchArgs | None
) -> HostSpec:
    """A vLLM host with the server the apply stops and relaunches named by pid: the one
    read (`--pid`, the process), else the one vLLM server that listens on the launch
    file's port; none found: nothing is stopped (the relaunch says why it cannot bind)."""
    vllm = facts.vllm_launch.value
    if spec.hints.pid is not None or vllm is None:
        return spec
    if vllm.pid is not None:
        return spec.override(pid=vllm.pid)
    if source_launch is None or transport.relaunch_refused is not None:
        return spec
    pid = vllm_server_on(transport, source_launch.argv)
    return spec.override(pid=pid) if pid is not None else spec


def _roll_back(
    spec: HostSpec,
    transport: Transport,
    facts: HostFacts,
    source: str | None,
    source_launch: LaunchArgs | None,
    health_timeout: float,
) -> FixReport:
    """The launch file's last backup put back and relaunched; none to restore without a file."""
    if source is None or source_launch is None:
        return FixReport(host=spec.name, outcome="no_rollback")
    out = rollback(spec, transport, source, facts, source_launch, health_timeout)
    return _outcome(spec.name, out)


def _plan(
    spec: HostSpec,
    transport: Transport,
    facts: HostFacts,
    source: str | None,
    text: str | None,
    source_launch: LaunchArgs | None,
) -> tuple[FixPlan, Transport]:
    """The fix plan and the transport that writes it: the host's own, or this machine's when
    the launch is the inventory's `launch:` entry."""
    results = run_checks(facts)
    running = facts.launch.value
    if facts.engine.value == "vllm" and spec.hints.launch is not None and spec.fix.inventory_file:
        # The inventory's vLLM `launch:` command: its key edits are made in the inventory.
        words = command_words(spec.hints.launch)
        running = LaunchArgs(source="launch", kind="argv", argv=words)
    plan = plan_fixes(
        spec.name,
        results,
        source=source,
        source_text=text,
        source_launch=source_launch,
        running=running,
        engine=facts.engine.value,
    )
    writer = transport
    if spec.hints.launch is not None and spec.fix.inventory_file and plan.new_argv is not None:
        # The launch is the inventory's own `launch:` entry: edit that file, here.
        # Written here, never relaunched (the host runs what the inventory says later).
        writer = open_here("local")
        update = InventoryEntry().rewrite(spec, plan.edits, writer, plan.launch)
        update["manual"] = [*plan.manual, *update["manual"]]
        plan = plan.model_copy(update=update)
    return plan, writer


def _apply(
    spec: HostSpec,
    transport: Transport,
    writer: Transport,
    plan: FixPlan,
    facts: HostFacts,
    view: PlanView,
    *,
    shown: PlanView | None,
    stamp: str,
    health_timeout: float,
    bench: BenchOptions | None,
    bench_threshold: float,
) -> FixReport:
    """The plan applied through `writer` (benchmarked before and after on the host when asked
    and the host is live), reported with the view shown. `shown`: the plan the user said
    yes to at the terminal; a plan that differs by now is not applied."""
    if (stale := _not_shown(spec, view, shown)) is not None:
        return stale
    step = None
    if bench is not None and plan.changes and transport.live_refused is None:
        from dflash_doctor.fix.bench_step import BenchStep

        step = BenchStep(spec, transport, facts, bench, threshold=bench_threshold)
    out = apply_plan(
        spec,
        writer,
        plan,
        facts,
        stamp=stamp,
        health_timeout=health_timeout,
        bench=step,
    )
    pair = None
    if step is not None and step.before_result is not None:
        pair = BenchPair(before=step.before_result, after=step.after_result, verdict=step.verdict)
    return _outcome(spec.name, out, view, pair)


def _view(plan: FixPlan) -> PlanView:
    """The plan as shown. Secrets are hidden in what is shown (the diff's context lines too),
    never in what is written."""
    diff = redact_block(plan.diff())
    command: str | None = None
    variables: list[str] = []
    if not diff and plan.new_argv and plan.changes:
        command, variables = shell_with_placeholders(redact_argv(plan.new_argv))
    return PlanView(
        diff=diff,
        command=command,
        secret_variables=variables,
        manual=plan.manual,
        notes=plan.notes,
    )


def _outcome(
    host: str, out: Outcome, view: PlanView | None = None, bench: BenchPair | None = None
) -> FixReport:
    return FixReport(
        host=host,
        outcome=out.status,
        plan=view,
        bench=bench,
        steps=[redact_text(step) for step in out.steps],
        message=redact_text(out.message) if out.message is not None else None,
        log_tail=[redact_text(line) for line in out.log_tail],
    )
