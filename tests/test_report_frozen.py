"""The report is frozen: a changed report is a new one, and what builds one leaves its inputs
as they were (issue 27 item 5)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from dflash_doctor.fleet.drift import DRIFT_ID, drift_results
from dflash_doctor.report import HostReport, NextStep, build_report
from tests.conftest import host_facts, launch


def test_reports_refuse_edits() -> None:
    host = HostReport(host="a")
    with pytest.raises(ValidationError):
        host.fix_command = "dflash-doctor fix a --apply"  # type: ignore[misc]
    report = build_report([host])
    with pytest.raises(ValidationError):
        report.hosts = []  # type: ignore[misc]


def test_a_next_step_is_given_as_data() -> None:
    host = HostReport(host="a", error="x")
    step = NextStep(fix_command="dflash-doctor fix a --apply", fix_file="/etc/launch.sh:3-9")
    given = host.with_next_step(step)
    assert (given.fix_command, given.fix_file, given.pending_relaunch) == (
        "dflash-doctor fix a --apply",
        "/etc/launch.sh:3-9",
        None,
    )
    assert given.error == "x" and host.fix_command is None


def test_drift_results_leave_their_hosts_as_they_were() -> None:
    hosts = [
        HostReport(host="a", facts=host_facts(launch_args=launch("--attention-backend", "fa3"))),
        HostReport(host="b", facts=host_facts(launch_args=launch("--attention-backend", "fa3"))),
        HostReport(host="c", facts=host_facts(launch_args=launch("--attention-backend", "fa2"))),
    ]
    drifted, table = drift_results(hosts)
    assert all(h.results == [] for h in hosts)
    assert [[r.check_id for r in h.results] for h in drifted] == [[DRIFT_ID]] * 3
    assert [h.results[0].status for h in drifted] == ["passed", "passed", "failed"]
    assert table
    # merged again: each host keeps one DFD170 result, this fleet's
    again, _ = drift_results(drifted)
    assert [[r.check_id for r in h.results] for h in again] == [[DRIFT_ID]] * 3
