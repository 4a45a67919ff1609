"""The report: per-host results, the summary and the exit code (schema version 1).

The exit code is decided here, never in a renderer:
0 nothing at or above --fail-on, 1 findings at or above it, 2 usage or input error (a host
whose data could not be processed; with --fail-on-skip, a check skipped for want of facts),
3 a host unreachable or timed out, 4 a fix that failed, 5 an internal error (a bug in
dflash-doctor, never findings), 130 interrupted (Ctrl-C). Precedence: 3, then 2, then 1.
"""

from __future__ import annotations

import hashlib
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from dflash_doctor import __version__
from dflash_doctor.checks.base import CheckResult, Finding, Severity
from dflash_doctor.errors import one_line
from dflash_doctor.exit_codes import (
    EXIT_FINDINGS,
    EXIT_OK,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
)
from dflash_doctor.facts.models import HostFacts

SCHEMA_VERSION = 1

# Skip reasons of checks that could not judge (runner.py): a fact missing, or unusable.
UNJUDGED_PREFIXES = ("needs ", "the check could not judge")


class NextStep(BaseModel):
    """What `check` tells a host to do next, built by the CLI from how the host was named
    (commands/check.py) and given to its report as data (`HostReport.with_next_step`)."""

    model_config = ConfigDict(frozen=True)

    # Where `fix --apply` can change something: the exact command to run (built from how the
    # host was named) and the launch file (and lines) it edits.
    fix_command: str | None = None
    fix_file: str | None = None
    # Instead of fix_command when the launch file already has the fix and only a relaunch is
    # missing (what `fix` would otherwise contradict).
    pending_relaunch: str | None = None


class HostReport(BaseModel):
    """One host's report. Frozen: a changed report is a new one (`model_copy(update=...)`)."""

    model_config = ConfigDict(frozen=True)

    host: str
    reachable: bool = True
    error: str | None = None
    facts: HostFacts | None = None
    fact_errors: list[str] = Field(default_factory=list)
    results: list[CheckResult] = Field(default_factory=list)
    # The host's NextStep, flat: the JSON report's fields stay where they were (schema 1).
    fix_command: str | None = None
    fix_file: str | None = None
    pending_relaunch: str | None = None

    @property
    def findings(self) -> list[Finding]:
        return [f for r in self.results for f in r.findings]

    def with_next_step(self, step: NextStep) -> HostReport:
        """This report with `step` as its next step: the one place hints join a report."""
        return self.model_copy(update=step.model_dump())


class Summary(BaseModel):
    hosts: int = 0
    unreachable: int = 0
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    errors: int = 0
    warnings: int = 0
    infos: int = 0
    suppressed: int = 0
    # Of the skipped: the checks that applied but could not judge (report.wanted_facts).
    unjudged: int = 0
    # Hosts reached whose data could not be processed (each has its one-line error).
    host_errors: int = 0


class Report(BaseModel):
    """The run's report. Frozen, as its hosts' are: built whole by `build_report`."""

    model_config = ConfigDict(frozen=True)

    schema_version: int = SCHEMA_VERSION
    tool_version: str = __version__
    fail_on: Severity = Severity.ERROR
    hosts: list[HostReport] = Field(default_factory=list)
    summary: Summary = Field(default_factory=Summary)
    notes: list[str] = Field(default_factory=list)
    exit_code: int = EXIT_OK


class Identified(Protocol):
    """What a finding's identity rests on: a Finding, or one read back from a JSON report."""

    @property
    def check_id(self) -> str: ...

    @property
    def title(self) -> str: ...


def fingerprint(host: str, finding: Identified) -> str:
    """A finding's identity across runs (host, check, title), for baselines and SARIF.

    The value is what SARIF has always carried in `partialFingerprints`, so code scanning
    keeps tracking the same alerts; a baseline compares the same value."""
    key = f"{host}|{finding.check_id}|{finding.title}"
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def gates(finding: Finding, fail_on: Severity) -> bool:
    """Whether a finding fails the run: not waived or baselined, and at or above --fail-on.
    The exit code and the JUnit failures both ask this, so they cannot disagree."""
    return finding.suppressed is None and finding.severity.rank >= fail_on.rank


def fact_errors(facts: HostFacts) -> list[str]:
    errors = []
    for name in HostFacts.model_fields:
        if name == "host":
            continue
        fact = getattr(facts, name)
        # A fact this kind of host never has (offline: no log) is no error: its checks do
        # not apply, and their skips say why.
        if fact.value is None and fact.error and not fact.out_of_reach:
            errors.append(one_line(f"{name}: {fact.error}"))
    if facts.launch.value is not None:
        # what the launch parse could not know (a lost shell variable, an unread --config)
        errors.extend(one_line(f"launch: {note}") for note in facts.launch.value.parser_notes)
    return errors


def wanted_facts(result: CheckResult) -> bool:
    """Skipped because an input it needs could not be read or used: the check applies but
    could not judge (not merely not applicable here). A report written before the runner
    said so (`unjudged` None) is read by its reason's words."""
    if result.status != "skipped":
        return False
    if result.unjudged is not None:
        return result.unjudged
    return (result.reason or "").startswith(UNJUDGED_PREFIXES)


def _counted_as(result: CheckResult) -> str:
    """A result's summary column: findings that are all info are notes, not a failure."""
    if result.status == "failed" and all(f.severity is Severity.INFO for f in result.findings):
        return "passed"
    return result.status


def unread_inputs(hosts: list[HostReport], given: dict[str, str]) -> list[str]:
    """Per host, each fact the command line named that could not be read, and a host on
    which no check could run: input errors (exit 2)."""
    errors = []
    for host in hosts:
        if host.facts is None:
            continue
        for name, option in given.items():
            fact = getattr(host.facts, name)
            # On a vLLM host the launch named (--pid, a launch file) is the vLLM launch.
            vllm = name == "launch" and host.facts.vllm_launch.value is not None
            if fact.value is None and not vllm:
                # Its reason is the host's fact error already (`could not read NAME: ...`):
                # said once, the note names the option that asked for it.
                said = one_line(f"{name}: {fact.error}") in host.fact_errors
                why = f" (see {name} above)" if said else f": {fact.error}"
                errors.append(one_line(f"{host.host}: {option} could not be read{why}"))
        if host.results and all(r.status == "skipped" for r in host.results):
            errors.append(f"{host.host}: no check could run: nothing was checked")
    return errors


def tally_host(summary: Summary, host: HostReport, fail_on: Severity) -> bool:
    """Count one host into `summary` (all but `hosts`); whether a finding of it fails the run.
    `report merge` counts a fleet one host at a time with it (fleet/stream.py)."""
    if not host.reachable:
        summary.unreachable += 1
    elif host.error is not None:
        summary.host_errors += 1
    gate = False
    for result in host.results:
        status = _counted_as(result)
        setattr(summary, status, getattr(summary, status) + 1)
        summary.unjudged += wanted_facts(result)
    for finding in host.findings:
        if finding.suppressed is not None:
            summary.suppressed += 1
            continue
        key = {"error": "errors", "warning": "warnings", "info": "infos"}[finding.severity.value]
        setattr(summary, key, getattr(summary, key) + 1)
        gate = gate or gates(finding, fail_on)
    return gate


def conclude(
    summary: Summary,
    gate: bool,
    notes: list[str] | None,
    input_errors: list[str],
    *,
    fail_on_skip: bool = False,
) -> tuple[list[str], int]:
    """The notes and exit code of hosts counted into `summary` (`gate`: a finding fails)."""
    notes = list(notes or [])
    notes.extend(input_errors)
    unjudged = summary.unjudged
    if unjudged:
        # A run that checked less than it could must not look green.
        notes.append(
            f"{unjudged} check(s) were skipped for want of facts, so they checked nothing: "
            "see each skip's reason"
            + ("" if fail_on_skip or input_errors else "; --fail-on-skip makes this fail the run")
        )
    code = EXIT_OK
    if gate:
        code = EXIT_FINDINGS
    if summary.host_errors or input_errors or (fail_on_skip and unjudged):
        code = EXIT_USAGE
    if summary.unreachable:
        code = EXIT_UNREACHABLE
    return notes, code


def build_report(
    hosts: list[HostReport],
    fail_on: Severity = Severity.ERROR,
    notes: list[str] | None = None,
    *,
    fail_on_skip: bool = False,
    given: dict[str, str] | None = None,
    input_errors: list[str] | None = None,
) -> Report:
    """`given`: fact name -> the command-line option that named it (`drafter` -> `--drafter
    models/x`); such a fact left unread is an input error, not a skip. `input_errors`: the
    caller's own (a gate lacking what it needs to judge a launch): exit 2, said first."""
    summary = Summary(hosts=len(hosts))
    gate = False
    for host in hosts:
        gate = tally_host(summary, host, fail_on) or gate
    input_errors = [*(input_errors or []), *unread_inputs(hosts, given or {})]
    notes, code = conclude(summary, gate, notes, input_errors, fail_on_skip=fail_on_skip)
    return Report(fail_on=fail_on, hosts=hosts, summary=summary, notes=notes, exit_code=code)
