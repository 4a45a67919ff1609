from __future__ import annotations

from dflash_doctor.checks import CATALOG
from dflash_doctor.checks.base import Severity
from dflash_doctor.runner import run_check
from tests.conftest import QWEN8B_DRAFTER, drafter_cfg, host_facts, init_log, launch, target_cfg


def result(check_id: str, **kw):  # type: ignore[no-untyped-def]
    return run_check(CATALOG[check_id], host_facts(**kw))


# DFD101 ---------------------------------------------------------------------------------


def test_dfd101_fires_on_flag_absent_and_log_none(kimi) -> None:  # type: ignore[no-untyped-def]
    r = result(
        "DFD101",
        drafter=kimi,
        launch_args=launch("--context-length", "131072", "--tp-size", "8", "--page-size", "64"),
        log=init_log(None),
    )
    assert r.status == "failed"
    (f,) = r.findings
    assert f.severity is Severity.ERROR
    kinds = {e.kind for e in f.evidence}
    assert {"config", "flag", "log"} <= kinds
    assert any("draft_window_size=None" in e.text for e in f.evidence)
    assert f.fixes[0].action == "set_flag"
    assert (f.fixes[0].flag, f.fixes[0].value) == ("--speculative-draft-window-size", "2048")
    # 6 layers x 8 kv heads / tp 8 x 128 x bf16 x 2 (K,V) = 3072 B per token per GPU
    assert f.impact["draft_kv_full_gib_per_request_per_gpu"] == round(131072 * 3072 / 2**30, 4)


def test_dfd101_from_log_alone(kimi) -> None:  # type: ignore[no-untyped-def]
    r = result("DFD101", drafter=kimi, log=init_log(None))
    assert r.status == "failed"


def test_dfd101_passes_with_window(kimi) -> None:  # type: ignore[no-untyped-def]
    r = result(
        "DFD101",
        drafter=kimi,
        launch_args=launch("--speculative-draft-window-size", "2048"),
        log=init_log(2048),
    )
    assert r.status == "passed"


def test_dfd101_log_wins_over_launch(kimi) -> None:  # type: ignore[no-untyped-def]
    # The flag was asked for, but the running worker says it keeps no window.
    r = result(
        "DFD101",
        drafter=kimi,
        launch_args=launch("--speculative-draft-window-size", "2048"),
        log=init_log(None),
    )
    assert r.status == "failed"


def test_dfd101_skips_full_attention_drafter() -> None:
    r = result("DFD101", drafter=drafter_cfg(QWEN8B_DRAFTER), launch_args=launch())
    assert r.status == "skipped" and "no sliding_attention" in (r.reason or "")


def test_dfd101_skips_without_drafter() -> None:
    r = result("DFD101", launch_args=launch())
    assert r.status == "skipped" and "needs drafter" in (r.reason or "")


def test_dfd101_skips_non_dflash(kimi) -> None:  # type: ignore[no-untyped-def]
    from dflash_doctor.facts.launch import parse_argv

    args = parse_argv(
        ["python", "-m", "sglang.launch_server", "--model-path", "m"], source="x", kind="script"
    )
    r = result("DFD101", drafter=kimi, launch_args=args)
    assert r.status == "skipped" and "does not use DFLASH" in (r.reason or "")


def test_dfd101_fix_uses_0511_spelling(kimi) -> None:  # type: ignore[no-untyped-def]
    r = result("DFD101", drafter=kimi, launch_args=launch(), version="0.5.11")
    assert r.findings[0].fixes[0].flag == "--speculative-dflash-draft-window-size"
    assert r.findings[0].impact["drafter_attention"].startswith("full context")


def test_dfd101_unknown_version_notes_both_spellings(kimi) -> None:  # type: ignore[no-untyped-def]
    r = result("DFD101", drafter=kimi, launch_args=launch(), version=None)
    fix = r.findings[0].fixes[0]
    assert fix.flag == "--speculative-draft-window-size"
    assert fix.note is not None and "0.5.11" in fix.note


def test_derived_layer_types_count_as_sliding() -> None:
    cfg = drafter_cfg(layer_types=None, max_window_layers=1)
    assert cfg.layer_types_derived
    assert cfg.sliding_layers == [1, 2, 3, 4, 5]
    r = result("DFD101", drafter=cfg, launch_args=launch())
    assert r.status == "failed"


def test_use_sliding_window_false_means_no_window() -> None:
    cfg = drafter_cfg(use_sliding_window=False)
    assert cfg.sliding_layers == []
    assert result("DFD101", drafter=cfg, launch_args=launch()).status == "skipped"


# DFD102 ---------------------------------------------------------------------------------


def test_dfd102_smaller_is_error(kimi) -> None:  # type: ignore[no-untyped-def]
    r = result("DFD102", drafter=kimi, launch_args=launch("--speculative-draft-window-size", "512"))
    assert r.status == "failed" and r.findings[0].severity is Severity.ERROR
    assert r.findings[0].fixes[0].value == "2048"


def test_dfd102_larger_is_warning(kimi) -> None:  # type: ignore[no-untyped-def]
    r = result("DFD102", drafter=kimi, log=init_log(8192))
    assert r.status == "failed" and r.findings[0].severity is Severity.WARNING


def test_dfd102_equal_passes_and_absent_passes(kimi) -> None:  # type: ignore[no-untyped-def]
    assert result("DFD102", drafter=kimi, log=init_log(2048)).status == "passed"
    assert result("DFD102", drafter=kimi, log=init_log(None)).status == "passed"


# DFD103 ---------------------------------------------------------------------------------


def test_dfd103_fires_on_0511_to_0513(kimi) -> None:  # type: ignore[no-untyped-def]
    for v in ("0.5.11", "0.5.12", "0.5.13", "0.5.13.post2"):
        r = result("DFD103", drafter=kimi, launch_args=launch(), version=v)
        assert r.status == "failed", v
        actions = [f.action for f in r.findings[0].fixes]
        assert actions == ["upgrade_sglang", "set_flag"]


def test_dfd103_with_window_only_recommends_upgrade(kimi) -> None:  # type: ignore[no-untyped-def]
    r = result(
        "DFD103",
        drafter=kimi,
        version="0.5.11",
        launch_args=launch("--speculative-dflash-draft-window-size", "2048"),
    )
    assert [f.action for f in r.findings[0].fixes] == ["upgrade_sglang"]


def test_dfd103_passes_from_0514(kimi) -> None:  # type: ignore[no-untyped-def]
    for v in ("0.5.14", "0.5.23"):
        assert result("DFD103", drafter=kimi, launch_args=launch(), version=v).status == "passed"


def test_dfd103_skips_without_version(kimi) -> None:  # type: ignore[no-untyped-def]
    r = result("DFD103", drafter=kimi, launch_args=launch(), version=None)
    assert r.status == "skipped" and "version" in (r.reason or "")


# DFD104 ---------------------------------------------------------------------------------


def test_dfd104_new_spelling_on_0511_is_error() -> None:
    r = result(
        "DFD104", launch_args=launch("--speculative-draft-window-size", "2048"), version="0.5.11"
    )
    (f,) = r.findings
    assert f.severity is Severity.ERROR
    assert (f.fixes[0].action, f.fixes[0].flag, f.fixes[0].replaces, f.fixes[0].value) == (
        "replace_flag",
        "--speculative-dflash-draft-window-size",
        "--speculative-draft-window-size",
        "2048",
    )


def test_dfd104_old_spelling_removed_from_0520_is_error() -> None:
    for v in ("0.5.20", "0.5.23"):
        r = result(
            "DFD104",
            launch_args=launch("--speculative-dflash-draft-window-size", "2048"),
            version=v,
        )
        assert r.findings and r.findings[0].severity is Severity.ERROR, v


def test_dfd104_old_spelling_deprecated_on_0513_to_0519() -> None:
    for v in ("0.5.13", "0.5.14", "0.5.19"):
        r = result(
            "DFD104",
            launch_args=launch("--speculative-dflash-draft-window-size", "2048"),
            version=v,
        )
        assert r.findings[0].severity is Severity.WARNING, v
        assert r.findings[0].fixes[0].flag == "--speculative-draft-window-size"


def test_dfd104_both_spellings_fine_on_0512() -> None:
    for flag in ("--speculative-dflash-draft-window-size", "--speculative-draft-window-size"):
        r = result("DFD104", launch_args=launch(flag, "2048"), version="0.5.12")
        assert r.status == "passed", flag


def test_dfd104_passes_right_spelling() -> None:
    assert (
        result(
            "DFD104",
            launch_args=launch("--speculative-draft-window-size", "2048"),
            version="0.5.23",
        ).status
        == "passed"
    )
    assert (
        result(
            "DFD104",
            launch_args=launch("--speculative-dflash-draft-window-size", "2048"),
            version="0.5.11",
        ).status
        == "passed"
    )


def test_dfd104_skips_without_flag() -> None:
    assert result("DFD104", launch_args=launch(), version="0.5.23").status == "skipped"


# DFD108 ---------------------------------------------------------------------------------


def test_dfd108_fires_far_beyond_window(kimi) -> None:  # type: ignore[no-untyped-def]
    r = result(
        "DFD108",
        drafter=kimi,
        launch_args=launch(
            "--context-length",
            "131072",
            "--max-running-requests",
            "32",
            "--tp-size",
            "8",
            "--page-size",
            "64",
        ),
    )
    (f,) = r.findings
    per_token = 2 * 6 * 1 * 128 * 2
    assert f.impact["draft_kv_full_gib_per_request_per_gpu"] == round(131072 * per_token / 2**30, 4)
    # windowed: 2048 rounded to 64-token pages plus one page of alignment slack
    assert f.impact["draft_kv_windowed_gib_per_request_per_gpu"] == round(
        (2048 + 64) * per_token / 2**30, 4
    )
    assert f.impact["draft_kv_saved_gib_per_gpu_at_max_running_requests"] == round(
        (131072 - 2112) * per_token * 32 / 2**30, 3
    )


def test_dfd108_uses_target_max_positions_without_flag(kimi) -> None:  # type: ignore[no-untyped-def]
    r = result("DFD108", drafter=kimi, launch_args=launch(), target=target_cfg())
    assert r.status == "failed"
    assert any(e.key == "max_position_embeddings" for e in r.findings[0].evidence)


def test_dfd108_short_context_passes(kimi) -> None:  # type: ignore[no-untyped-def]
    r = result("DFD108", drafter=kimi, launch_args=launch("--context-length", "4096"))
    assert r.status == "passed"


def test_dfd108_skips_without_context(kimi) -> None:  # type: ignore[no-untyped-def]
    assert result("DFD108", drafter=kimi, launch_args=launch()).status == "skipped"


def test_dfd108_fp8_kv_halves_bytes(kimi) -> None:  # type: ignore[no-untyped-def]
    bf16 = result("DFD108", drafter=kimi, launch_args=launch("--context-length", "65536"))
    fp8 = result(
        "DFD108",
        drafter=kimi,
        launch_args=launch("--context-length", "65536", "--kv-cache-dtype", "fp8_e4m3"),
    )
    a = bf16.findings[0].impact["draft_kv_full_gib_per_request_per_gpu"]
    b = fp8.findings[0].impact["draft_kv_full_gib_per_request_per_gpu"]
    assert a == 2 * b
