"""Run the check catalog over one host's facts. Pure: facts in, results out."""

from __future__ import annotations

from dflash_doctor.checks import CATALOG
from dflash_doctor.checks.base import Check, CheckResult, Skip
from dflash_doctor.errors import one_line
from dflash_doctor.facts.models import Fact, HostFacts


def _fact(facts: HostFacts, name: str) -> Fact[object]:
    fact: Fact[object] = getattr(facts, name)
    return fact


def _missing_reason(facts: HostFacts, check: Check) -> str | None:
    for name in check.needs:
        fact = _fact(facts, name)
        if fact.value is None:
            return f"needs {name.replace('_', ' ')}: {fact.error}"
    if check.needs_any and all(_fact(facts, n).value is None for n in check.needs_any):
        reasons = "; ".join(f"{n}: {_fact(facts, n).error}" for n in check.needs_any)
        return f"needs one of {', '.join(check.needs_any)} ({reasons})"
    return None


def run_check(check: Check, facts: HostFacts) -> CheckResult:
    base = {"check_id": check.id, "name": check.name, "severity": check.severity}
    reason = _missing_reason(facts, check)
    if reason is not None:
        return CheckResult(status="skipped", reason=one_line(reason), **base)
    try:
        findings = check.func(facts)
    except Skip as skip:
        return CheckResult(status="skipped", reason=one_line(str(skip)), **base)
    except Exception as e:  # a check crashing on hostile facts checked nothing
        why = str(e).splitlines()[0][:160] if str(e) else ""
        return CheckResult(
            status="skipped",
            reason=f"the check could not judge these facts ({type(e).__name__}"
            + (f": {why})" if why else ")"),
            **base,
        )
    status = "failed" if findings else "passed"
    return CheckResult(status=status, findings=findings, **base)


def run_checks(facts: HostFacts, select: list[str] | None = None) -> list[CheckResult]:
    chosen = [c for cid, c in CATALOG.items() if select is None or cid in select]
    return [run_check(c, facts) for c in chosen]
