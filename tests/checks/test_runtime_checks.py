"""DFD141 (launch file not what runs) and DFD142 (lossy accept thresholds): fires and clean.

The facts are what `/server_info` answers: the resolved args at the top level
(srt/entrypoints/http_server.py 0.5.11:632-645, 0.5.19:812-840) and the schedulers' own
args in `internal_states`, which `/set_internal_state` changes (managers/scheduler.py
0.5.11:3370-3433; scheduler_components/internal_state.py 0.5.23:45-199).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from dflash_doctor.checks.base import CheckResult
from dflash_doctor.facts.models import Fact, HostFacts, ServerRuntime
from dflash_doctor.runner import run_checks
from tests.conftest import drafter_cfg, host_facts, launch


def runtime(
    states: Sequence[Mapping[str, object]] | None = None, /, **args: object
) -> ServerRuntime:
    return ServerRuntime(
        url="http://127.0.0.1:30000",
        endpoint="/server_info",
        version="0.5.23",
        args=args,
        internal_states=[dict(s) for s in states] if states is not None else [dict(args)],
    )


def facts_with(rt: ServerRuntime, *flags: str) -> HostFacts:
    facts = host_facts(drafter=drafter_cfg(), launch_args=launch(*flags))
    facts = facts.model_copy(update={"runtime": Fact.of(rt, "server HTTP API")})
    return facts


def result(facts: HostFacts, check_id: str) -> CheckResult:
    (r,) = run_checks(facts, [check_id])
    return r


RUNNING = {
    "context_length": 65536,
    "speculative_algorithm": "DFLASH",
    "speculative_draft_window_size": None,
    "page_size": 64,
    "speculative_num_draft_tokens": 16,
}


def test_dfd141_fires_when_the_file_is_not_what_runs() -> None:
    facts = facts_with(
        runtime(**RUNNING),
        "--context-length", "131072", "--speculative-draft-window-size", "2048",
    )  # fmt: skip
    r = result(facts, "DFD141")
    assert r.status == "failed"
    (f,) = r.findings
    assert f.title == "launch.sh is not what runs (context_length, speculative_draft_window_size)"
    texts = [e.text for e in f.evidence]
    assert "--context-length 131072" in texts and "server answers context_length=65536" in texts
    assert "server answers speculative_draft_window_size=None" in texts
    assert f.evidence[1].file == "http://127.0.0.1:30000/server_info"
    assert f.fixes[0].action == "manual" and "--context-length 65536" in (f.fixes[0].note or "")


def test_dfd141_clean_when_they_agree_and_unset_flags_are_not_compared() -> None:
    # page_size 64 and 16 draft tokens were resolved by SGLang; the file does not set them.
    facts = facts_with(runtime(**RUNNING), "--context-length", "65536")
    assert result(facts, "DFD141").status == "passed"


def test_dfd141_skips_without_a_launch_file_or_runtime() -> None:
    facts = facts_with(runtime(**RUNNING))
    assert facts.launch.value is not None
    facts = facts.model_copy(
        update={"launch": Fact.of(facts.launch.value.model_copy(update={"kind": "process"}))}
    )
    assert result(facts, "DFD141").status == "skipped"
    plain = host_facts(drafter=drafter_cfg(), launch_args=launch())
    assert result(plain, "DFD141").status == "skipped"


def test_dfd142_fires_on_a_threshold_changed_at_runtime() -> None:
    top = {"speculative_accept_threshold_single": 1.0, "speculative_accept_threshold_acc": 1.0}
    changed = {**top, "speculative_accept_threshold_single": 0.6}
    r = result(facts_with(runtime([changed], **top)), "DFD142")
    (f,) = r.findings
    assert "changed at runtime" in f.title and "lossy" in f.title
    assert "is 0.6 (launched with 1)" in f.message
    assert "internal_states[0].speculative_accept_threshold_single=0.6" in f.evidence[-1].text
    assert f.fixes[0].action == "manual" and "/set_internal_state" in (f.fixes[0].note or "")


def test_dfd142_fires_on_a_relaxed_threshold_at_launch() -> None:
    top = {"speculative_accept_threshold_single": 1.0, "speculative_accept_threshold_acc": 0.5}
    (f,) = result(facts_with(runtime(**top)), "DFD142").findings
    assert f.title == "relaxed accept thresholds: acceptance is lossy"
    assert [x.flag for x in f.fixes] == ["--speculative-accept-threshold-acc"]


def test_dfd142_clean_with_exact_acceptance() -> None:
    top = {"speculative_accept_threshold_single": 1.0, "speculative_accept_threshold_acc": 1.0}
    assert result(facts_with(runtime(**top)), "DFD142").status == "passed"
