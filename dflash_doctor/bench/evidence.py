"""`check --bench`: run the sweep as a fact, and put its curve into the window findings."""

from __future__ import annotations

from dflash_doctor.bench.matrix import BenchOptions, plan_matrix
from dflash_doctor.bench.run import run_matrix
from dflash_doctor.checks import CATALOG
from dflash_doctor.checks.base import CheckResult
from dflash_doctor.checks.views import bench_evidence
from dflash_doctor.errors import DoctorError
from dflash_doctor.facts.models import BenchResult, Fact, HostFacts
from dflash_doctor.transport.base import Transport

# The findings about the drafter's window are the ones a measured curve proves or refutes.
WINDOW_MODULE = "dflash_doctor.checks.window"


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
    for result in results:
        check = CATALOG.get(result.check_id)
        if check is None or check.func.__module__ != WINDOW_MODULE:
            continue
        for finding in result.findings:
            finding.evidence.extend(evidence)
            finding.impact.update(impact)
