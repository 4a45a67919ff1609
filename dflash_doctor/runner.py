"""Run the check catalog over one host's facts. Pure: facts in, results out."""

from __future__ import annotations

from dflash_doctor.checks import CATALOG
from dflash_doctor.checks.base import Check, CheckResult, Skip, Unjudged
from dflash_doctor.errors import one_line
from dflash_doctor.facts.models import Fact, HostFacts


def _fact(facts: HostFacts, name: str) -> Fact[object]:
    fact: Fact[object] = getattr(facts, name)
    return fact


def _missing_reason(facts: HostFacts, check: Check) -> tuple[str, bool] | None:
    """Why a needed fact is missing, and whether that leaves the check unjudged (False: this
    kind of host never has the fact, so the check does not apply here)."""
    for name in check.needs:
        fact = _fact(facts, name)
        if fact.value is None:
            return f"needs {name.replace('_', ' ')}: {fact.error}", not fact.out_of_reach
    if check.needs_any and all(_fact(facts, n).value is None for n in check.needs_any):
        reasons = "; ".join(f"{n}: {_fact(facts, n).error}" for n in check.needs_any)
        reach = any(not _fact(facts, n).out_of_reach for n in check.needs_any)
        return f"needs one of {', '.join(check.needs_any)} ({reasons})", reach
    return None


def other_engine(facts: HostFacts, check: Check) -> str | None:
    """Why the check does not apply to this host's engine: an SGLang check on a
    vLLM server is never run (never "does not use DFLASH"), a vLLM check needs one."""
    served = facts.engine.value or "sglang"
    if check.engine == served:
        return None
    if served == "vllm":
        return "a vLLM server: this check judges SGLang servers (docs/vllm.md)"
    return "not a vLLM server: this check judges vLLM servers"


def run_check(check: Check, facts: HostFacts) -> CheckResult:
    base = {"check_id": check.id, "name": check.name, "severity": check.severity}
    engine = other_engine(facts, check)
    if engine is not None:
        return CheckResult(status="skipped", reason=engine, unjudged=False, **base)
    missing = _missing_reason(facts, check)
    if missing is not None:
        reason, unjudged = missing
        return CheckResult(status="skipped", reason=one_line(reason), unjudged=unjudged, **base)
    try:
        findings = check.func(facts)
    except Skip as skip:
        return CheckResult(
            status="skipped",
            reason=one_line(str(skip)),
            unjudged=isinstance(skip, Unjudged),
            **base,
        )
    except Exception as e:  # a check crashing on hostile facts checked nothing
        why = str(e).splitlines()[0][:160] if str(e) else ""
        return CheckResult(
            status="skipped",
            reason=f"the check could not judge these facts ({type(e).__name__}"
            + (f": {why})" if why else ")"),
            unjudged=True,
            **base,
        )
    status = "failed" if findings else "passed"
    return CheckResult(status=status, findings=findings, **base)


def run_checks(facts: HostFacts, select: list[str] | None = None) -> list[CheckResult]:
    chosen = [c for cid, c in CATALOG.items() if select is None or cid in select]
    return [run_check(c, facts) for c in chosen]
