"""Issue 25 items 5, 6, 7 and 10: DFD165 (adaptive ignored), DFD166 (PD disaggregation),
DFD167 (capture hook present but inert), DFD168 (the DFlash family), and the family-aware
skip of every DFLASH check.

Launches go through the real fallback parser, logs through the real scan (each release's
own text, rendered from data/log_patterns.json), versions at both ends of each range.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dflash_doctor.checks import CATALOG
from dflash_doctor.checks.base import CheckResult, Severity
from dflash_doctor.facts.capture_hooks import inert_hook
from dflash_doctor.facts.dflash_family import answer, family_algorithms, family_drafter
from dflash_doctor.facts.log_patterns import pattern
from dflash_doctor.facts.models import CaptureHook, Fact, HostFacts, LogFacts
from dflash_doctor.facts.server_log import scan_log
from dflash_doctor.runner import run_check
from tests.checks.test_catalog_checks import target_with
from tests.conftest import QWEN8B_DRAFTER, REPO, drafter_cfg, host_facts, launch

WHEELS = Path("/work/wheels/src")
QWEN4 = "Qwen4ExpForConditionalGeneration"


def result(check_id: str, facts: HostFacts) -> CheckResult:
    return run_check(CATALOG[check_id], facts)


def log_of(*lines: str) -> LogFacts:
    body = "".join(f"[2026-11-30 10:00:{i:02d} TP0] {t}\n" for i, t in enumerate(lines))
    return scan_log([body.encode()], "/var/log/sglang.log")


def written(pattern_id: str, release: str, **fields: str) -> str:
    """The text `pattern_id` has in `release`, its fields filled by name."""
    fmt = next(f for f in pattern(pattern_id).formats if release in f.sites)
    text = fmt.format
    for name, value in fields.items():
        text = text.replace("{" + name + "}", value)
    return text


def dump(release: str, **fields: str) -> str:
    pairs = {"speculative_algorithm": "DFLASH", **fields}
    if release >= "0.5.19":
        return "server_args={" + ", ".join(f"'{k}': '{v}'" for k, v in pairs.items()) + "}"
    return "server_args=ServerArgs(" + ", ".join(f"{k}='{v}'" for k, v in pairs.items()) + ")"


# DFD165 --speculative-adaptive ------------------------------------------------------------


@pytest.mark.parametrize("version", ["0.5.11", "0.5.23"])
def test_dfd165_fires_on_the_flag_at_both_ends(version: str) -> None:
    r = result("DFD165", host_facts(launch_args=launch("--speculative-adaptive"), version=version))
    (f,) = r.findings
    assert f.severity is Severity.WARNING
    assert "only EAGLE/EAGLE3" in f.message and "--speculative-num-draft-tokens" in f.message
    assert [(x.action, x.flag) for x in f.fixes] == [("remove_flag", "--speculative-adaptive")]
    assert f.evidence[0].key == "--speculative-adaptive"


def test_dfd165_clean_without_the_flag_and_for_eagle() -> None:
    assert result("DFD165", host_facts(launch_args=launch())).status == "passed"
    eagle = launch("--speculative-algorithm", "EAGLE3", "--speculative-adaptive")
    assert result("DFD165", host_facts(launch_args=eagle)).status == "passed"


@pytest.mark.parametrize("release", ["0.5.11", "0.5.23"])
def test_dfd165_reads_the_line_each_release_logs_before_its_dump(release: str) -> None:
    """SGLang logs it while ServerArgs is resolved, before the `server_args=` dump."""
    line = written("adaptive_disabled", release, algorithm="DFLASH")
    log = log_of(line, dump(release))
    assert "adaptive_disabled" in log.events
    r = result("DFD165", host_facts(log=log, version=release))
    (f,) = r.findings
    assert f.evidence[0].kind == "log" and "speculative_algorithm=DFLASH" in f.evidence[0].text


def test_dfd165_ignores_the_line_for_an_algorithm_outside_the_family() -> None:
    line = written("adaptive_disabled", "0.5.23", algorithm="NGRAM")
    log = log_of(line, dump("0.5.23", speculative_algorithm="NGRAM"))
    assert result("DFD165", host_facts(log=log, version="0.5.23")).status == "passed"


# DFD166 prefill/decode disaggregation -----------------------------------------------------


def test_dfd166_data_serves_dflash_from_0_5_20() -> None:
    def served(version: str) -> bool:
        found = answer("disaggregation", version)
        assert found is not None and found.exact, version
        return bool(found.value["served"])

    assert not any(served(v) for v in ("0.5.11", "0.5.13.post1", "0.5.14", "0.5.19"))
    assert all(served(v) for v in ("0.5.20", "0.5.23"))


@pytest.mark.parametrize(
    ("version", "text"),
    [
        ("0.5.11", "DFLASH decode requires DFlashDraftInput"),
        ("0.5.14", "'NoneType' object has no attribute 'prepare_for_decode'"),
        ("0.5.19", "'NoneType' object has no attribute 'prepare_for_decode'"),
    ],
)
def test_dfd166_fires_before_0_5_20(version: str, text: str) -> None:
    args = launch("--disaggregation-mode", "decode")
    (f,) = result("DFD166", host_facts(launch_args=args, version=version)).findings
    assert f.severity is Severity.ERROR and text in f.message
    assert f.fixes[0].action == "upgrade_sglang" and f.fixes[0].value == "0.5.20"


@pytest.mark.parametrize("version", ["0.5.20", "0.5.23"])
def test_dfd166_clean_from_0_5_20(version: str) -> None:
    args = launch("--disaggregation-mode", "prefill")
    assert result("DFD166", host_facts(launch_args=args, version=version)).status == "passed"


def test_dfd166_judges_dspark_by_its_own_releases() -> None:
    args = launch("--speculative-algorithm", "DSPARK", "--disaggregation-mode", "decode")
    (f,) = result("DFD166", host_facts(launch_args=args, version="0.5.16")).findings
    assert "DSPARK" in f.title and f.fixes[0].value == "0.5.17"
    assert result("DFD166", host_facts(launch_args=args, version="0.5.17")).status == "passed"
    # Before 0.5.16 DSPARK is no family member: the DFLASH skip speaks.
    r = result("DFD166", host_facts(launch_args=args, version="0.5.15"))
    assert r.status == "skipped" and "does not use DFLASH" in (r.reason or "")


@pytest.mark.parametrize("version", ["0.5.11", "0.5.23"])
def test_dfd166_the_decode_radix_cache_is_refused_with_dflash(version: str) -> None:
    args = launch("--disaggregation-mode", "decode", "--disaggregation-decode-enable-radix-cache")
    findings = result("DFD166", host_facts(launch_args=args, version=version)).findings
    refusal = [f for f in findings if "refuses" in f.title]
    assert len(refusal) == 1 and refusal[0].fixes[0].action == "remove_flag"
    # DSPARK (served by PD from 0.5.17) is let through from 0.5.21 only.
    dspark = launch(
        "--speculative-algorithm",
        "DSPARK",
        "--disaggregation-mode",
        "decode",
        "--disaggregation-decode-enable-radix-cache",
    )
    assert result("DFD166", host_facts(launch_args=dspark, version="0.5.21")).findings == []
    assert result("DFD166", host_facts(launch_args=dspark, version="0.5.20")).findings


def test_dfd166_clean_without_disaggregation() -> None:
    for args in (launch(), launch("--disaggregation-mode", "null")):
        assert result("DFD166", host_facts(launch_args=args, version="0.5.19")).status == "passed"


def test_dfd166_reads_the_crash_and_the_mode_from_a_log() -> None:
    log = log_of(
        dump("0.5.13", disaggregation_mode="decode"),
        "Scheduler hit an exception: Traceback (most recent call last):",
        "RuntimeError: " + written("crash_pd_no_draft_input", "0.5.13"),
    )
    assert "crash_pd_no_draft_input" in log.crashes
    (f,) = result("DFD166", host_facts(log=log, version="0.5.13")).findings
    assert [e.kind for e in f.evidence] == ["version", "log", "log"]


# DFD167 capture hook present but inert ----------------------------------------------------


@pytest.mark.parametrize(("version", "line"), [("0.5.20", "1708"), ("0.5.23", "2171")])
def test_dfd167_fires_on_qwen4exp(version: str, line: str) -> None:
    facts = host_facts(
        launch_args=launch(), target=target_with(architectures=[QWEN4]), version=version
    )
    (f,) = result("DFD167", facts).findings
    assert f"srt/models/qwen4_exp.py:{line}" in f.message
    assert f.fixes[0].action == "manual"
    # DFD129 (no hook at all) stays quiet: the hook exists.
    assert result("DFD129", facts).status == "passed"


def test_dfd167_clean_on_a_capturing_target_and_skips_where_dfd129_speaks() -> None:
    qwen3 = host_facts(launch_args=launch(), target=target_with(), version="0.5.23")
    assert result("DFD167", qwen3).status == "passed"
    facts = host_facts(launch_args=launch(), target=target_with(architectures=[QWEN4]))
    no_hook = CaptureHook(architecture=QWEN4, implements=False, file="qwen4_exp.py", files_read=2)
    facts = facts.model_copy(update={"capture_hook": Fact[CaptureHook].of(no_hook, "x")})
    r = result("DFD167", facts)
    assert r.status == "skipped" and "DFD129" in (r.reason or "")


def test_the_inert_list_is_qwen4exp_only_and_notes_what_source_cannot_show() -> None:
    assert inert_hook("0.5.19", QWEN4) is None
    found = inert_hook("0.5.23", QWEN4)
    assert found is not None and "too many values to unpack" in (found.note or "")
    assert inert_hook("0.5.23", "Qwen3ForCausalLM") is None


def test_dfd143_names_the_inert_hook_as_a_cause() -> None:
    from dflash_doctor.checks.silent_collapse import likely_causes

    facts = host_facts(launch_args=launch(), target=target_with(architectures=[QWEN4]))
    assert "(DFD167)" in likely_causes(facts)[0]


# DFD168 the DFlash family ----------------------------------------------------------------


def test_the_family_per_release() -> None:
    assert family_algorithms("0.5.15.post1") == ("DFLASH",)
    assert family_algorithms("0.5.16") == ("DFLASH", "DSPARK")
    assert family_algorithms(None) == family_algorithms("0.5.23")  # unknown: the newest
    assert family_algorithms("0.5.10") == ("DFLASH",)
    assert family_drafter("0.5.18", ["DFlash2DraftModel"]) is None
    assert family_drafter("0.5.19", ["DFlash2DraftModel"]) == ("DFlash2DraftModel", "dflash")
    assert family_drafter("0.5.23", ["MiniMaxDFlash2DraftModel"]) is not None


@pytest.mark.parametrize("version", ["0.5.16", "0.5.23"])
def test_dfd168_dspark_ignores_the_window_and_the_dflash_block_alias(version: str) -> None:
    args = launch(
        "--speculative-algorithm",
        "DSPARK",
        "--speculative-draft-window-size",
        "2048",
        "--speculative-dflash-block-size",
        "8",
    )
    (f,) = result("DFD168", host_facts(launch_args=args, version=version)).findings
    assert f.severity is Severity.WARNING
    assert {x.flag for x in f.fixes} == {
        "--speculative-draft-window-size",
        "--speculative-dflash-block-size",
    }
    assert "gamma" in f.message


@pytest.mark.parametrize("version", ["0.5.21", "0.5.23"])
def test_dfd168_the_sink_has_no_dflash_reader(version: str) -> None:
    args = launch("--speculative-draft-window-size", "4096", "--speculative-draft-sink-size", "4")
    (f,) = result("DFD168", host_facts(launch_args=args, version=version)).findings
    assert f.fixes[0].flag == "--speculative-draft-sink-size"
    assert "spec_utils.py" in f.message


def test_dfd168_describes_a_dflash2_drafter_as_info() -> None:
    d2 = drafter_cfg(QWEN8B_DRAFTER, architectures=["DFlash2DraftModel"])
    (f,) = result("DFD168", host_facts(launch_args=launch(), drafter=d2)).findings
    assert f.severity is Severity.INFO and "flashinfer" in f.message and not f.fixes


def test_dfd168_clean_on_plain_dflash() -> None:
    facts = host_facts(launch_args=launch(), drafter=drafter_cfg(QWEN8B_DRAFTER))
    assert result("DFD168", facts).status == "passed"


# The family-aware skip -------------------------------------------------------------------


def test_dflash_checks_name_a_family_server_instead_of_not_dflash() -> None:
    drafter = drafter_cfg(QWEN8B_DRAFTER)
    dspark = launch("--speculative-algorithm", "DSPARK")
    r = result("DFD105", host_facts(launch_args=dspark, drafter=drafter, version="0.5.23"))
    assert r.status == "skipped" and "DFlash-family algorithm" in (r.reason or "")
    assert "does not use DFLASH" not in (r.reason or "")
    eagle = launch("--speculative-algorithm", "EAGLE")
    r = result("DFD105", host_facts(launch_args=eagle, drafter=drafter))
    assert "DFlash-family drafter (DFlashDraftModel)" in (r.reason or "")
    # DSPARK before 0.5.16 is no family member: the release decides.
    r = result("DFD105", host_facts(launch_args=dspark, drafter=drafter, version="0.5.15"))
    assert "DFlash-family algorithm" not in (r.reason or "")


# The data files are the wheels' ----------------------------------------------------------


@pytest.mark.skipif(not WHEELS.is_dir(), reason="SGLang wheels not unpacked here")
def test_family_data_is_what_the_wheels_give() -> None:
    script = REPO / "scripts" / "gen_dflash_family.py"
    done = subprocess.run([sys.executable, str(script), str(WHEELS), "--check"], check=False)
    assert done.returncode == 0, "rerun scripts/gen_dflash_family.py"
