from __future__ import annotations

from dflash_doctor.checks import CATALOG
from dflash_doctor.checks.base import Severity
from dflash_doctor.facts.models import LogLine
from dflash_doctor.runner import run_check
from tests.conftest import (
    QWEN4B_DRAFTER,
    QWEN8B_DRAFTER,
    QWEN8B_TARGET,
    drafter_cfg,
    host_facts,
    init_log,
    launch,
    target_cfg,
)


def result(check_id: str, **kw):  # type: ignore[no-untyped-def]
    return run_check(CATALOG[check_id], host_facts(**kw))


# DFD105 block size ------------------------------------------------------------------------


def test_dfd105_fires_on_num_draft_tokens_mismatch() -> None:
    r = result(
        "DFD105",
        drafter=drafter_cfg(QWEN8B_DRAFTER),
        launch_args=launch("--speculative-num-draft-tokens", "8"),
    )
    (f,) = r.findings
    assert f.severity is Severity.WARNING
    assert f.impact == {"server_block_size": 8, "drafter_block_size": 16}
    assert (f.fixes[0].flag, f.fixes[0].value) == ("--speculative-num-draft-tokens", "16")
    # top-level block_size of the z-lab config is the key that is cited
    assert f.evidence[0].key == "block_size" and f.evidence[0].line is not None


def test_dfd105_uses_dflash_config_block_size_first() -> None:
    cfg = drafter_cfg(QWEN8B_DRAFTER, dflash_config={"block_size": 8, "target_layer_ids": [1]})
    assert cfg.block_size == 8 and cfg.block_size_key == "dflash_config.block_size"
    assert (
        result(
            "DFD105", drafter=cfg, launch_args=launch("--speculative-num-draft-tokens", "8")
        ).status
        == "passed"
    )


def test_dfd105_from_log_mismatch_line() -> None:
    log = init_log(None, block=8)
    log.block_size_mismatch = LogLine(line=5, text="DFLASH block size mismatch: using ...")
    r = result("DFD105", drafter=drafter_cfg(QWEN8B_DRAFTER), log=log)
    assert r.status == "failed"
    assert any(e.kind == "log" and e.line == 5 for e in r.findings[0].evidence)


def test_alias_flags_that_disagree_are_a_startup_refusal_not_dfd105s() -> None:
    """SGLang raises on them (DFD111); DFD105 judges block sizes of a server that starts."""
    args = launch("--speculative-num-draft-tokens", "16", "--speculative-dflash-block-size", "8")
    r = result("DFD105", drafter=drafter_cfg(QWEN8B_DRAFTER), launch_args=args)
    assert r.status == "skipped" and "DFD111" in (r.reason or "")
    refused = result("DFD111", drafter=drafter_cfg(QWEN8B_DRAFTER), launch_args=args)
    assert refused.findings[0].severity is Severity.ERROR
    assert refused.findings[0].fixes[0].action == "remove_flag"


def test_dfd105_passes_when_equal_or_inferred() -> None:
    cfg = drafter_cfg(QWEN8B_DRAFTER)
    assert result("DFD105", drafter=cfg, launch_args=launch()).status == "passed"
    assert (
        result(
            "DFD105", drafter=cfg, launch_args=launch("--speculative-dflash-block-size", "16")
        ).status
        == "passed"
    )


# DFD106 drafter vs target ---------------------------------------------------------------


def test_dfd106_passes_matching_pair() -> None:
    r = result(
        "DFD106",
        drafter=drafter_cfg(QWEN8B_DRAFTER),
        target=target_cfg(QWEN8B_TARGET),
        launch_args=launch(),
    )
    assert r.status == "passed"


def test_dfd106_hidden_size_mismatch() -> None:
    r = result(
        "DFD106",
        drafter=drafter_cfg(QWEN4B_DRAFTER),
        target=target_cfg(QWEN8B_TARGET),
        launch_args=launch(),
    )
    titles = [f.title for f in r.findings]
    assert titles == ["Drafter and target hidden sizes differ"]


def test_dfd106_layer_ids_out_of_range() -> None:
    cfg = drafter_cfg(
        QWEN8B_DRAFTER, dflash_config={"target_layer_ids": [1, 9, 40]}, num_target_layers=None
    )
    r = result("DFD106", drafter=cfg, target=target_cfg(QWEN8B_TARGET), launch_args=launch())
    (f,) = r.findings
    assert "[40]" in f.message and f.evidence[0].key == "target_layer_ids"


def test_dfd106_num_target_layers_mismatch() -> None:
    cfg = drafter_cfg(QWEN8B_DRAFTER, num_target_layers=28)
    r = result("DFD106", drafter=cfg, target=target_cfg(QWEN8B_TARGET), launch_args=launch())
    assert [f.title for f in r.findings] == [
        "Drafter was trained for a target with another layer count"
    ]


def test_dfd106_kimi_text_config_target() -> None:
    r = result("DFD106", drafter=drafter_cfg(), target=target_cfg(), launch_args=launch())
    assert r.status == "passed"


def test_dfd106_skips_without_target() -> None:
    r = result("DFD106", drafter=drafter_cfg(), launch_args=launch())
    assert r.status == "skipped" and "needs target" in (r.reason or "")


# DFD107 draft attention backend ----------------------------------------------------------


def test_dfd107_inherited_unsupported_backend() -> None:
    r = result("DFD107", launch_args=launch("--attention-backend", "trtllm_mha"), version="0.5.11")
    (f,) = r.findings
    assert f.fixes[0].flag == "--speculative-draft-attention-backend"
    assert f.fixes[0].value == "flashinfer"


def test_dfd107_explicit_draft_backend_wins() -> None:
    ok = launch("--attention-backend", "trtllm_mha", "--speculative-draft-attention-backend", "fa3")
    assert result("DFD107", launch_args=ok).status == "passed"
    bad = launch("--speculative-draft-attention-backend", "flashmla")
    assert result("DFD107", launch_args=bad).status == "failed"


def test_dfd107_log_fallback_line_alone() -> None:
    log = init_log(None, backend="flashinfer")
    log.backend_fallbacks = [LogLine(line=3, text="DFLASH draft worker ... Falling back to 'x'")]
    r = result("DFD107", log=log)
    assert r.status == "failed" and r.findings[0].evidence[-1].line == 3


def test_dfd107_skips_with_nothing_to_judge() -> None:
    assert result("DFD107", launch_args=launch()).status == "skipped"


def test_every_check_is_documented() -> None:
    for c in CATALOG.values():
        for part in ("What it finds", "Why it hurts", "How to fix"):
            assert part in c.doc, (c.id, part)
        assert c.id.startswith("DFD") and len(c.id) == 6


# DFD109 acceptance falling ---------------------------------------------------------------


def _series_log(values: list[float], window: int | None = None):  # type: ignore[no-untyped-def]
    from dflash_doctor.facts.models import DecodePoint

    log = init_log(window)
    log.decode.series = [
        DecodePoint(offset=i, timestamp=f"t{i}", accept_len=v, gen_throughput=1.0)
        for i, v in enumerate(values)
    ]
    log.decode.count = len(values)
    return log


def test_dfd109_fires_on_falling_acceptance() -> None:
    """0.5.13 serves the sliding layers over the whole context (dflash.py 0.5.13:116-122)."""
    log = _series_log([3.5] * 4 + [3.0] * 4 + [2.0] * 4)
    r = result("DFD109", drafter=drafter_cfg(), log=log, version="0.5.13")
    (f,) = r.findings
    assert f.impact["Accept length before the drop (tokens per step)"] == 3.25
    assert f.impact["Accept length after the drop (tokens per step)"] == 2.0
    assert f.impact["Drop began"] == "between t7 and t8"


def test_dfd109_reports_a_collapse_in_the_last_5_percent_whatever_the_window() -> None:
    """4.1 for 95% of the run, 1.0 after: the quarter means (4.1, 3.48) hid it. A collapse
    is reported on 0.5.23 too, where the window is served as trained (DFD103 does not fire),
    and says when it began."""
    values = [4.1] * 190 + [1.0] * 10
    for version in ("0.5.13", "0.5.23"):
        r = result("DFD109", drafter=drafter_cfg(), log=_series_log(values), version=version)
        (f,) = r.findings
        assert f.impact["Drop began"] == "between t189 and t190", version
        assert "bonus token" in f.message, version
        assert f.impact["Decode lines after the drop (share of the run)"] == 0.05
    # a mild late drift on 0.5.23 is not blamed on the window, and not a collapse
    drift = _series_log([4.1] * 190 + [3.0] * 10)
    assert result("DFD109", drafter=drafter_cfg(), log=drift, version="0.5.23").status == "passed"
    # a dip that recovered, and a warm-up, are not drops
    dip = _series_log([4.1] * 100 + [1.0] * 10 + [4.1] * 90)
    warm = _series_log([6.0] * 10 + [3.5] * 190)
    for log in (dip, warm):
        assert result("DFD109", drafter=drafter_cfg(), log=log, version="0.5.13").status == (
            "passed"
        )


def test_dfd109_passes_steady_or_windowed() -> None:
    """Windowed on 0.5.13, or no window on 0.5.23 (dflash.py 0.5.23:166-190 honours
    layer_types): the sliding layers are served as trained, so the drafter is not blamed."""
    steady = _series_log([3.5] * 12)
    assert result("DFD109", drafter=drafter_cfg(), log=steady, version="0.5.13").status == "passed"
    falling = [3.5] * 6 + [2.0] * 6
    windowed = _series_log(falling, window=2048)
    assert result("DFD109", drafter=drafter_cfg(), log=windowed, version="0.5.13").status == (
        "passed"
    )
    unwindowed = _series_log(falling)
    assert result("DFD109", drafter=drafter_cfg(), log=unwindowed).status == "passed"


def test_dfd109_skips_short_logs_and_full_attention_drafters() -> None:
    assert result("DFD109", drafter=drafter_cfg(), log=_series_log([3.0] * 3)).status == "skipped"
    falling = [3.5] * 6 + [2.0] * 6
    assert (
        result("DFD109", drafter=drafter_cfg(QWEN8B_DRAFTER), log=_series_log(falling)).status
        == "skipped"
    )


def test_dfd107_backends_follow_the_version() -> None:
    trt = launch("--attention-backend", "trtllm_mha")
    for version, status in (
        ("0.5.11", "failed"),
        ("0.5.16", "failed"),
        ("0.5.17", "passed"),
        ("0.5.23", "passed"),
    ):
        assert result("DFD107", launch_args=trt, version=version).status == status, version
    ascend = launch("--speculative-draft-attention-backend", "ascend")
    assert result("DFD107", launch_args=ascend, version="0.5.12").status == "failed"
    assert result("DFD107", launch_args=ascend, version="0.5.13").status == "passed"


def test_dfd107_trtllm_mha_needs_an_all_sliding_or_causal_drafter_from_0_5_17() -> None:
    """From 0.5.17 trtllm_mha stays for the draft only when every layer is sliding or the
    draft is causal (arg_groups/speculative_hook.py 0.5.17:464-494, 0.5.23:945-978);
    through 0.5.16 it always falls back (speculative_hook.py 0.5.16:455-462)."""
    trt = launch("--attention-backend", "trtllm_mha")
    mixed = drafter_cfg()  # the seed drafter: sliding layers and one full layer
    assert "full_attention" in mixed.layer_types and "sliding_attention" in mixed.layer_types
    all_sliding = drafter_cfg(layer_types=["sliding_attention"] * mixed.num_hidden_layers)
    causal = drafter_cfg(is_causal=True)
    assert causal.is_causal
    for version, cfg, status in (
        ("0.5.16", all_sliding, "failed"),
        ("0.5.17", mixed, "failed"),
        ("0.5.17", all_sliding, "passed"),
        ("0.5.17", causal, "passed"),
        ("0.5.23", mixed, "failed"),
        ("0.5.23", all_sliding, "passed"),
    ):
        r = result("DFD107", launch_args=trt, drafter=cfg, version=version)
        assert r.status == status, (version, cfg.layer_types, cfg.is_causal)
    (f,) = result("DFD107", launch_args=trt, drafter=mixed, version="0.5.23").findings
    assert "all sliding_attention" in f.message and f.fixes[0].value == "flashinfer"
