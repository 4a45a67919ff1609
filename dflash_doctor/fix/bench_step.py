"""`fix --apply --bench`: measure before and after the relaunch; keep the fix only if it helps.

`apply_plan` calls `before()` ahead of any change (a failure there changes nothing) and
`after()` once the relaunched server is healthy and re-checked; a reason from `after()`
is a failed fix, which apply_plan rolls back.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dflash_doctor.bench.compare import DEFAULT_THRESHOLD, Verdict, compare
from dflash_doctor.bench.matrix import BenchOptions, Matrix, plan_matrix
from dflash_doctor.bench.run import run_matrix
from dflash_doctor.errors import FactError
from dflash_doctor.facts.models import BenchResult, HostFacts
from dflash_doctor.gather import gather
from dflash_doctor.hosts import HostSpec
from dflash_doctor.transport.base import Transport


@dataclass
class BenchStep:
    spec: HostSpec
    transport: Transport
    facts: HostFacts
    options: BenchOptions
    threshold: float = DEFAULT_THRESHOLD
    matrix: Matrix | None = None
    before_result: BenchResult | None = None
    after_result: BenchResult | None = None
    verdict: Verdict | None = None
    steps: list[str] = field(default_factory=list)

    def _run(self, facts: HostFacts, pid: int | None) -> BenchResult:
        if self.matrix is None:
            self.matrix = plan_matrix(facts, self.options)
        return run_matrix(self.transport, facts, self.matrix, self.options, pid)

    def _live(self, spec: HostSpec) -> HostSpec:
        """Where the bench gathers the server it loads: on vLLM the running process (its
        pid, its HTTP API), never the launch file, which names no server to bench."""
        if self.facts.engine.value == "vllm":
            return spec.override(launch_file=None)
        return spec

    def before(self) -> None:
        facts = gather(self._live(self.spec), self.transport)
        self.before_result = self._run(facts, facts.server_pid() or self.spec.hints.pid)
        failed = [c for c in self.before_result.cells if c.accept_length is None]
        if failed:
            c = failed[0]
            why = c.error or next((r.error for r in c.requests if r.error), "no accept length")
            raise FactError(
                f"{self.spec.name}: the bench before the fix failed in {len(failed)} cell(s) "
                f"(first: {c.context} tokens x {c.concurrency}: {why}); nothing was changed"
            )
        self.steps.append(f"bench before: {len(self.before_result.cells)} cells")

    def after(self, followed: HostFacts | None = None) -> str | None:
        """None when the fix is kept; else why not. `followed`: the relaunched host as
        apply re-gathered it (by the new server's pid); a vLLM server is benched from it."""
        assert self.before_result is not None
        if followed is not None and followed.engine.value == "vllm":
            facts = followed
        else:
            facts = gather(self._live(self.spec.override(pid=None)), self.transport)
        # The server was just relaunched by us: its only traffic could be ours.
        options = self.options
        self.after_result = run_matrix(
            self.transport,
            facts,
            self.matrix or plan_matrix(facts, options),
            options,
            facts.server_pid(),
        )
        self.steps.append(f"bench after: {len(self.after_result.cells)} cells")
        self.verdict = compare(self.before_result, self.after_result, threshold=self.threshold)
        if self.verdict.keep:
            return None
        return f"bench: {self.verdict.reason}"
