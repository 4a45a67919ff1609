"""`fix` as data: the session returns a FixReport, render/fix.py prints it, and one function
turns reports into the exit code."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest
from rich.console import Console

from dflash_doctor.demo import demo_host
from dflash_doctor.exit_codes import EXIT_FIX_FAILED, EXIT_OK, EXIT_UNREACHABLE, EXIT_USAGE
from dflash_doctor.fix.report import FixOutcome, FixReport, PlanView, fix_exit_code
from dflash_doctor.fix.session import fix_host
from dflash_doctor.render.fix import render_fix
from dflash_doctor.transport.ssh_options import SSHOptions
from tests.conftest import REPO

WIDTH = 120


def rendered(report: FixReport) -> str:
    out = io.StringIO()
    render_fix(report, Console(file=out, width=WIDTH, force_terminal=False, color_system=None))
    return out.getvalue()


def test_session_prints_nothing_and_the_cli_prints_its_report(
    capsys: pytest.CaptureFixture[str],
) -> None:
    report = fix_host(
        demo_host(), SSHOptions(), apply=False, roll_back=False, stamp="1", health_timeout=1
    )
    assert capsys.readouterr() == ("", "")
    assert report.outcome == "planned" and report.plan is not None
    assert "+  --speculative-draft-window-size 2048" in report.plan.diff
    # the demo's key is a variable reference: shown as written, it is not the secret
    assert '--api-key "$SGLANG_API_KEY"' in report.plan.diff
    p = subprocess.run(
        [sys.executable, "-m", "dflash_doctor", "fix", "--demo"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        env={**os.environ, "COLUMNS": str(WIDTH), "PYTHONPATH": str(REPO)},
    )
    assert p.returncode == 0 and p.stdout == rendered(report)


def lines(report: FixReport) -> list[str]:
    return [line.rstrip() for line in rendered(report).splitlines()[1:]]  # after the rule


def test_unreachable_and_nothing_to_roll_back() -> None:
    assert lines(FixReport(host="h", outcome="unreachable", error="h:22: refused")) == [
        "unreachable: h:22: refused"
    ]
    assert lines(FixReport(host="h", outcome="no_rollback")) == ["no launch file to roll back"]


def test_plan_without_a_launch_file_names_the_secrets_to_set() -> None:
    plan = PlanView(
        command='python -m sglang.launch_server --api-key "$SGLANG_API_KEY" --x 1',
        secret_variables=["SGLANG_API_KEY"],
        manual=["DFD130: upgrade SGLang to 0.5.14 or newer"],
        notes=["DFD102: note"],
        relaunch="restart the unit",
    )
    assert lines(FixReport(host="h", outcome="planned", plan=plan)) == [
        "no launch file to edit: start the server with",
        'python -m sglang.launch_server --api-key "$SGLANG_API_KEY" --x 1',
        "secrets are not shown: set SGLANG_API_KEY to their values before you run it",
        "not automated: DFD130: upgrade SGLang to 0.5.14 or newer",
        "DFD102: note",
        "relaunch: restart the unit",
    ]


def test_failed_apply_shows_steps_message_and_log_tail_cleaned() -> None:
    report = FixReport(
        host="h",
        outcome="rolled_back",
        plan=PlanView(),
        steps=["backed up a to b", "relaunched\x1b[2J"],
        message="the server did not come up: rolled back",
        log_tail=["Traceback", "RuntimeError: boom"],
    )
    assert lines(report) == [
        "nothing to change",
        "  backed up a to b",
        "  relaunched\ufffd[2J",  # control characters from the host never reach the terminal
        "the server did not come up: rolled back",
        "last server log lines:",
        "Traceback",
        "RuntimeError: boom",
    ]


def test_an_error_after_planning_keeps_the_plan_shown() -> None:
    report = FixReport(host="h", outcome="error", error="x: gone", plan=PlanView(notes=["n"]))
    assert lines(report) == ["nothing to change", "n", "error: x: gone"]


EXPECTED: dict[FixOutcome, int] = {
    "planned": EXIT_OK,
    "unchanged": EXIT_OK,
    "written": EXIT_OK,
    "applied": EXIT_OK,
    "rolled_back": EXIT_FIX_FAILED,
    "failed": EXIT_FIX_FAILED,
    "unreachable": EXIT_UNREACHABLE,
    "error": EXIT_USAGE,
    "no_rollback": EXIT_USAGE,
}


@pytest.mark.parametrize("outcome", list(EXPECTED))
def test_exit_code_of_each_outcome(outcome: FixOutcome) -> None:
    assert fix_exit_code([FixReport(host="h", outcome=outcome)]) == EXPECTED[outcome]


def test_exit_code_is_the_worst_hosts() -> None:
    reports = [FixReport(host=o, outcome=o) for o in ("applied", "failed", "unreachable")]
    assert fix_exit_code(reports) == EXIT_FIX_FAILED
    assert fix_exit_code([]) == EXIT_OK


def test_a_plan_is_frozen_and_changed_by_copy() -> None:
    from pydantic import ValidationError

    from dflash_doctor.fix.plan import FixPlan

    plan = FixPlan(host="h", source="a.sh", launch=None, old_text="x", new_text="y")
    with pytest.raises(ValidationError, match="frozen"):
        plan.source = "b.sh"  # type: ignore[misc]
    moved = plan.model_copy(update={"source": "inventory.yaml"})
    assert (plan.source, moved.source, moved.changes) == ("a.sh", "inventory.yaml", True)
