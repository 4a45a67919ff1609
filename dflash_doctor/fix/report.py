"""What one host's `fix` did, as data: the plan shown, the steps, the outcome.

`fix/session.py` builds it and prints nothing; `render/fix.py` prints it; the CLI maps it to
the exit code (`fix_exit_code`). Host text in it is already redacted where it is shown
(the diff, the command, the steps, the log tail) and not yet cleaned of control characters:
cleaning is the renderer's business.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from dflash_doctor.bench.compare import Verdict
from dflash_doctor.exit_codes import EXIT_FIX_FAILED, EXIT_OK, EXIT_UNREACHABLE, EXIT_USAGE
from dflash_doctor.facts.models import BenchResult

# planned: shown, not applied. The apply outcomes are fix/apply.py's Status.
# unreachable: no transport; error: a fact or input error, shown as "error: ...";
# no_rollback: --rollback where there is no launch file to restore.
FixOutcome = Literal[
    "planned",
    "unchanged",
    "written",
    "applied",
    "rolled_back",
    "failed",
    "unreachable",
    "error",
    "no_rollback",
]
# Outcomes that carried out what was asked.
SUCCEEDED: frozenset[FixOutcome] = frozenset({"planned", "unchanged", "written", "applied"})


class PlanView(BaseModel):
    """The change as shown: a diff of the launch file, else the command to start with."""

    model_config = ConfigDict(frozen=True)

    diff: str = ""
    # Without a launch file: the changed command, secrets as $VARIABLES (named here).
    command: str | None = None
    # What the command is (a container's `docker run`, a `kubectl patch` of a pod's owner).
    command_intro: str = "no launch file to edit: start the server with"
    secret_variables: list[str] = Field(default_factory=list)
    manual: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    # The exact process `--apply` stops (pid, owner, command line), when one runs.
    stop: str | None = None
    # How the server would be relaunched, when there is a change.
    relaunch: str | None = None


class BenchPair(BaseModel):
    """`fix --apply --bench`: before and after the change, and whether it was kept."""

    model_config = ConfigDict(frozen=True)

    before: BenchResult
    after: BenchResult | None = None
    verdict: Verdict | None = None


class FixReport(BaseModel):
    model_config = ConfigDict(frozen=True)

    host: str
    outcome: FixOutcome
    # unreachable / error: why, in one line.
    error: str | None = None
    plan: PlanView | None = None
    bench: BenchPair | None = None
    # apply or roll back: what was done, step by step, and how it ended.
    steps: list[str] = Field(default_factory=list)
    message: str | None = None
    log_tail: list[str] = Field(default_factory=list)

    @property
    def succeeded(self) -> bool:
        return self.outcome in SUCCEEDED


def fix_exit_code(reports: list[FixReport]) -> int:
    """The run's exit code: the worst host's (README "Exit codes")."""
    codes = [EXIT_OK]
    for report in reports:
        if report.outcome == "unreachable":
            codes.append(EXIT_UNREACHABLE)
        elif report.outcome in ("error", "no_rollback"):
            codes.append(EXIT_USAGE)
        elif not report.succeeded:
            codes.append(EXIT_FIX_FAILED)
    return max(codes)
