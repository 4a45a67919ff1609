"""`check --bench`: run the sweep as a fact, and put its curve into the window findings."""

from __future__ import annotations

from dflash_doctor.bench.matrix import BenchOptions, plan_matrix
from dflash_doctor.bench.run import run_matrix
from dflash_doctor.checks.base import CheckResult
from dflash_doctor.checks.views import SPAN_CHECKS, bench_evidence
from dflash_doctor.errors import DoctorError
from dflash_doctor.facts.models import BenchResult, Fact, HostFacts
from dflash_doctor.transport.base import Transport


def pid_of(facts: HostFacts) -> int | None:
    launch = facts.launch.value
    if launch is None or launch.kind != "process":
        return None
    last = launch.source.split()[-1]
    return int(last) if last.isdigit() else None


def bench_fact(transport: Transport, facts: HostFacts, options: BenchOptions) -> Fact[BenchResult]:
    try:
        matrix = plan_matrix(facts, options)
        result = run_matrix(transport, facts, matrix, options, pid_of(facts))
    except DoctorError as e:
        return Fact[BenchResult].missing(f"bench: {e}", "bench")
    return Fact[BenchResult].of(result, "bench")


def attach_bench_evidence(facts: HostFacts, results: list[CheckResult]) -> None:
    evidence, impact = bench_evidence(facts)
    if not evidence:
        return
    # The findings on served vs trained spans are the ones a measured curve proves or refutes.
    for result in results:
        if result.check_id not in SPAN_CHECKS:
            continue
        for finding in result.findings:
            finding.evidence.extend(evidence)
            finding.impact.update(impact)
