"""The report: per-host results, the summary and the exit code (schema version 1).

The exit code is decided here, never in a renderer:
0 nothing at or above --fail-on, 1 findings at or above it, 2 usage or input error,
3 a host unreachable (takes precedence over 1), 4 a fix that failed and was rolled back.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from dflash_doctor import __version__
from dflash_doctor.checks.base import CheckResult, Finding, Severity
from dflash_doctor.facts.models import HostFacts

SCHEMA_VERSION = 1

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_FIX_FAILED = 4


class HostReport(BaseModel):
    host: str
    reachable: bool = True
    error: str | None = None
    facts: HostFacts | None = None
    fact_errors: list[str] = Field(default_factory=list)
    results: list[CheckResult] = Field(default_factory=list)

    @property
    def findings(self) -> list[Finding]:
        return [f for r in self.results for f in r.findings]


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


class Report(BaseModel):
    schema_version: int = SCHEMA_VERSION
    tool_version: str = __version__
    fail_on: Severity = Severity.ERROR
    hosts: list[HostReport] = Field(default_factory=list)
    summary: Summary = Field(default_factory=Summary)
    notes: list[str] = Field(default_factory=list)
    exit_code: int = EXIT_OK


def fact_errors(facts: HostFacts) -> list[str]:
    errors = []
    for name in HostFacts.model_fields:
        if name == "host":
            continue
        fact = getattr(facts, name)
        if fact.value is None and fact.error:
            errors.append(f"{name}: {fact.error}")
    if facts.launch.value is not None:
        # what the launch parse could not know (a lost shell variable, an unread --config)
        errors.extend(f"launch: {note}" for note in facts.launch.value.parser_notes)
    return errors


def build_report(
    hosts: list[HostReport], fail_on: Severity = Severity.ERROR, notes: list[str] | None = None
) -> Report:
    summary = Summary(hosts=len(hosts))
    gate = False
    for host in hosts:
        if not host.reachable:
            summary.unreachable += 1
        for result in host.results:
            setattr(summary, result.status, getattr(summary, result.status) + 1)
        for finding in host.findings:
            if finding.suppressed is not None:
                summary.suppressed += 1
                continue
            key = {"error": "errors", "warning": "warnings", "info": "infos"}[
                finding.severity.value
            ]
            setattr(summary, key, getattr(summary, key) + 1)
            if finding.severity.rank >= fail_on.rank:
                gate = True
    code = EXIT_OK
    if gate:
        code = EXIT_FINDINGS
    if summary.unreachable:
        code = EXIT_UNREACHABLE
    return Report(fail_on=fail_on, hosts=hosts, summary=summary, notes=notes or [], exit_code=code)
