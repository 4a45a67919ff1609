"""Window verdicts per SGLang version range x drafter kind x draft window flag.

The SGLang facts behind the table (wheels at /work/wheels/src/<version>/sglang/):
- 0.5.11-0.5.13 build every draft layer full: srt/models/dflash.py 0.5.11:112-118,
  0.5.13:116-122 (`attn_type=AttentionType.ENCODER_ONLY`, no window).
- 0.5.14+ honour layer_types: srt/models/dflash.py 0.5.14:44-66, 0.5.23:166-190, window_left
  `sliding_window - 1` from speculative/dflash_utils.py 0.5.14:341-356, 0.5.23:400-417.
- The flag clamps every layer to the compact view: `_compute_compact_draft_seq_lens`,
  speculative/dflash_worker.py 0.5.11:423-439, 0.5.13:425-441; dflash_worker_v2.py
  0.5.14:511-527, 0.5.23:1209-1225.
"""

from __future__ import annotations

from typing import Any

import pytest

from dflash_doctor.checks import CATALOG
from dflash_doctor.checks.base import Severity
from dflash_doctor.facts.models import DrafterConfig
from dflash_doctor.runner import run_check
from tests.conftest import QWEN8B_DRAFTER, drafter_cfg, host_facts, init_log, launch, target_cfg

W = 2048
CTX = ("--context-length", "131072", "--tp-size", "8", "--page-size", "64")


def result(check_id: str, **kw: Any):  # type: ignore[no-untyped-def]
    return run_check(CATALOG[check_id], host_facts(**kw))


# Drafter kinds: (id, how built, class S=all sliding, M=mixed, F=all full)
def _kind(name: str) -> DrafterConfig:
    if name == "sliding-explicit":
        return drafter_cfg(layer_types=["sliding_attention"] * 6)
    if name == "mixed-explicit":  # the seed drafter: layers 0-4 sliding, 5 full
        return drafter_cfg()
    if name == "full-explicit":  # z-lab Qwen3-8B-DFlash-b16
        return drafter_cfg(QWEN8B_DRAFTER)
    if name == "sliding-qwen3-derived":  # Qwen3Config: i >= max_window_layers (0) slides
        return drafter_cfg(layer_types=None, max_window_layers=0)
    if name == "mixed-qwen3-derived":  # layer 0 full, 1-5 sliding
        return drafter_cfg(layer_types=None, max_window_layers=1)
    if name == "mixed-gpt_oss-derived":  # GptOssConfig: even layers sliding, odd full
        # GptOssConfig has no use_sliding_window: false must not drop its window.
        return drafter_cfg(layer_types=None, model_type="gpt_oss", use_sliding_window=False)
    raise AssertionError(name)


KINDS = {
    "sliding-explicit": "S",
    "mixed-explicit": "M",
    "full-explicit": "F",
    "sliding-qwen3-derived": "S",
    "mixed-qwen3-derived": "M",
    "mixed-gpt_oss-derived": "M",
}
FLAGS = {"none": None, "equal": W, "smaller": W // 4, "larger": W * 4}

# (range, drafter class, flag) -> {check id: (severity, first fix action)} at warning+.
# Nothing listed means nothing at warning or above.
PRE = {
    # 0.5.11-0.5.13 (dflash.py 0.5.13:116-122): no flag -> sliding layers see everything.
    ("S", "none"): {"DFD103": ("error", "upgrade_sglang")},
    # flag == W: compact view W..W+63 (page 64) == trained up to page alignment.
    ("S", "equal"): {},
    ("S", "smaller"): {"DFD102": ("error", "set_flag")},
    ("S", "larger"): {"DFD103": ("error", "upgrade_sglang")},
    ("M", "none"): {"DFD103": ("error", "upgrade_sglang")},
    # the lesser evil: the flag clamps the full layer, but without it 5 layers see all.
    ("M", "equal"): {"DFD130": ("warning", "upgrade_sglang")},
    ("M", "smaller"): {"DFD102": ("error", "set_flag")},
    ("M", "larger"): {"DFD103": ("error", "upgrade_sglang")},
    ("F", "none"): {},
    ("F", "equal"): {"DFD130": ("warning", "remove_flag")},
    ("F", "smaller"): {"DFD130": ("warning", "remove_flag")},
    ("F", "larger"): {"DFD130": ("warning", "remove_flag")},
}
POST = {
    # 0.5.14+ (dflash.py 0.5.14:44-66): served as trained without a flag.
    ("S", "none"): {},
    ("S", "equal"): {},
    ("S", "smaller"): {"DFD102": ("error", "remove_flag")},
    ("S", "larger"): {},
    ("M", "none"): {},
    ("M", "equal"): {"DFD130": ("warning", "remove_flag")},
    ("M", "smaller"): {"DFD102": ("error", "remove_flag")},
    ("M", "larger"): {"DFD130": ("warning", "remove_flag")},
    ("F", "none"): {},
    ("F", "equal"): {"DFD130": ("warning", "remove_flag")},
    ("F", "smaller"): {"DFD130": ("warning", "remove_flag")},
    ("F", "larger"): {"DFD130": ("warning", "remove_flag")},
}
VERSIONS = {"0.5.11": PRE, "0.5.13": PRE, "0.5.14": POST, "0.5.23": POST}
WINDOW_CHECKS = ("DFD102", "DFD103", "DFD130")


def _flag_args(version: str, value: int | None) -> tuple[str, ...]:
    if value is None:
        return ()
    flag = (
        "--speculative-dflash-draft-window-size"
        if version == "0.5.11"
        else "--speculative-draft-window-size"
    )
    return (flag, str(value))


@pytest.mark.parametrize("flag", list(FLAGS))
@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("version", list(VERSIONS))
def test_window_verdict_matrix(version: str, kind: str, flag: str) -> None:
    """One verdict per (version, drafter kind, flag); SGLang lines in the module docstring:
    dflash.py 0.5.13:116-122 vs 0.5.14:44-66, dflash_worker.py 0.5.11:423-439."""
    cfg = _kind(kind)
    value = FLAGS[flag]
    if KINDS[kind] == "M" and kind == "mixed-gpt_oss-derived":
        assert cfg.layer_types_source == "gpt_oss" and cfg.sliding_layers == [0, 2, 4]
    expected = VERSIONS[version][(KINDS[kind], flag)]
    got: dict[str, tuple[str, str]] = {}
    for cid in WINDOW_CHECKS:
        r = result(
            cid,
            drafter=cfg,
            launch_args=launch(*CTX, *_flag_args(version, value)),
            log=init_log(value),
            version=version,
        )
        assert r.status in ("passed", "failed", "skipped"), r
        for f in r.findings:
            if f.severity.rank >= Severity.WARNING.rank:
                got[cid] = (f.severity.value, f.fixes[0].action)
    assert got == expected


def test_dfd103_seed_on_0513_names_both_fixes_and_the_clamped_layer(kimi) -> None:  # type: ignore[no-untyped-def]
    """0.5.13 ignores layer_types (dflash.py 0.5.13:116-122): error, two fixes; the flag
    fix names full_attention layer 5, which the compact view clamps
    (dflash_worker.py 0.5.13:425-441)."""
    r = result(
        "DFD103", drafter=kimi, launch_args=launch(*CTX), log=init_log(None), version="0.5.13"
    )
    (f,) = r.findings
    assert f.severity is Severity.ERROR
    assert [x.action for x in f.fixes] == ["upgrade_sglang", "set_flag"]
    assert (f.fixes[1].flag, f.fixes[1].value) == ("--speculative-draft-window-size", "2048")
    assert "full_attention layer(s) 5" in (f.fixes[1].note or "")
    assert any("draft_window_size=None" in e.text for e in f.evidence)
    assert any("version table: SGLang 0.5.13" in e.text for e in f.evidence)


def test_dfd103_all_sliding_flag_fix_is_exact_up_to_page_alignment() -> None:
    """All layers sliding: the flag at W is exact but for page alignment (at most
    page_size - 1 older tokens, dflash_worker.py 0.5.11:430-439)."""
    cfg = drafter_cfg(layer_types=["sliding_attention"] * 6)
    r = result("DFD103", drafter=cfg, launch_args=launch(*CTX), version="0.5.12")
    note = r.findings[0].fixes[1].note or ""
    assert note.startswith("exact") and "63 older tokens of page alignment" in note


def test_dfd103_fix_uses_0511_spelling(kimi) -> None:  # type: ignore[no-untyped-def]
    """0.5.11 spells the flag --speculative-dflash-draft-window-size (server_args.py 0.5.11)."""
    r = result("DFD103", drafter=kimi, launch_args=launch(), version="0.5.11")
    assert r.findings[0].fixes[1].flag == "--speculative-dflash-draft-window-size"


def test_dfd103_short_context_is_served_as_trained(kimi) -> None:  # type: ignore[no-untyped-def]
    """At a context no longer than W a full-context layer sees exactly its window."""
    args = launch("--context-length", "2048")
    assert result("DFD103", drafter=kimi, launch_args=args, version="0.5.13").status == "passed"


def test_dfd103_skips_without_version_or_code(kimi) -> None:  # type: ignore[no-untyped-def]
    r = result("DFD103", drafter=kimi, launch_args=launch(), version=None)
    assert r.status == "skipped" and "behaviour unknown" in (r.reason or "")


def test_dfd103_host_code_beats_the_version(kimi) -> None:  # type: ignore[no-untyped-def]
    """A patched build: version says 0.5.23 but its dflash.py never reads layer_types."""
    from dflash_doctor.facts.models import Fact, SGLangCode

    facts = host_facts(drafter=kimi, launch_args=launch(*CTX), version="0.5.23")
    code = SGLangCode(
        path="/venv/sglang/srt/models/dflash.py",
        honours_layer_types=False,
        evidence="no code reads layer_types and passes a sliding_window_size",
    )
    facts = facts.model_copy(update={"sglang_code": Fact.of(code, code.path)})
    r = run_check(CATALOG["DFD103"], facts)
    assert r.status == "failed"
    assert "the host's SGLang source /venv/sglang/srt/models/dflash.py" in r.findings[0].message


def test_a_class_without_layer_types_is_judged_all_full() -> None:
    """LlamaConfig has no layer_types (transformers 5.6.0-5.19.0
    models/llama/configuration_llama.py): SGLang gets None and builds every layer full
    (models/dflash.py 0.5.14:47-49, 0.5.23:169-171), so a window clamps them all (DFD130)."""
    cfg = drafter_cfg(layer_types=None, model_type="llama")
    assert cfg.layer_types_source == "class_default"
    assert cfg.layer_types == ["full_attention"] * cfg.num_hidden_layers
    r = result("DFD130", drafter=cfg, launch_args=launch("--speculative-draft-window-size", "2048"))
    assert r.status == "failed", r.reason
    assert "0-5" in r.findings[0].title
    assert result("DFD130", drafter=cfg, launch_args=launch()).status == "passed"


def test_a_class_that_derives_layer_types_unmodelled_is_skipped() -> None:
    """GlmMoeDsaConfig derives layer_types by its own rule, not modelled: say so."""
    cfg = drafter_cfg(layer_types=None, model_type="glm_moe_dsa")
    assert cfg.layer_types_source == "unknown"
    r = result("DFD130", drafter=cfg, launch_args=launch("--speculative-draft-window-size", "2048"))
    assert r.status == "skipped" and "layer types unknown" in (r.reason or "")


def test_drafter_context_length_is_the_config_class_default() -> None:
    """SGLang's get_context_length reads the config object: Qwen3Config's
    max_position_embeddings defaults to 32768 (transformers 5.6.0-5.19.0
    models/qwen3/configuration_qwen3.py:70), LlamaConfig's to 2048."""
    qwen = drafter_cfg(max_position_embeddings=None)
    assert qwen.context_length == 32768
    assert "qwen3 config class default" in (qwen.context_length_key or "")
    assert drafter_cfg(max_position_embeddings=None, model_type="llama").context_length == 2048


def test_window_checks_skip_non_dflash(kimi) -> None:  # type: ignore[no-untyped-def]
    from dflash_doctor.facts.launch import parse_argv

    args = parse_argv(
        ["python", "-m", "sglang.launch_server", "--model-path", "m"], source="x", kind="script"
    )
    r = result("DFD103", drafter=kimi, launch_args=args, version="0.5.13")
    assert r.status == "skipped" and "does not use DFLASH" in (r.reason or "")


def test_log_wins_over_launch(kimi) -> None:  # type: ignore[no-untyped-def]
    """The flag was asked for, but the running worker logs that it keeps no window
    (dflash_worker.py 0.5.13:191-196 `draft_window_size=None, compact_cache=False`)."""
    r = result(
        "DFD103",
        drafter=kimi,
        launch_args=launch(*CTX, "--speculative-draft-window-size", "2048"),
        log=init_log(None),
        version="0.5.13",
    )
    assert r.status == "failed"


def test_use_sliding_window_false_means_no_window() -> None:
    """Qwen3Config drops sliding_window unless use_sliding_window (transformers
    models/qwen3/configuration_qwen3.py:86)."""
    cfg = drafter_cfg(use_sliding_window=False)
    assert cfg.sliding_layers == []
    assert result("DFD103", drafter=cfg, launch_args=launch()).status == "skipped"


def test_dfd130_lesser_evil_message_on_0513(kimi) -> None:  # type: ignore[no-untyped-def]
    r = result(
        "DFD130",
        drafter=kimi,
        launch_args=launch(*CTX, "--speculative-draft-window-size", "2048"),
        version="0.5.13",
    )
    (f,) = r.findings
    assert "lesser evil" in f.message and "layer(s) 5" in f.title


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


def test_dfd104_removes_a_flag_the_spans_say_must_go() -> None:
    """0.5.23 honours layer_types: on an all-full drafter the flag only clamps (DFD130),
    so renaming it would keep the harm: the fix removes it."""
    r = result(
        "DFD104",
        drafter=drafter_cfg(QWEN8B_DRAFTER),
        launch_args=launch("--speculative-dflash-draft-window-size", "2048"),
        version="0.5.23",
    )
    assert r.findings[0].fixes[0].action == "remove_flag"


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


# DFD131 draft KV memory -----------------------------------------------------------------


def test_dfd131_bytes_share_and_lever_on_0523(kimi) -> None:  # type: ignore[no-untyped-def]
    """dflash_draft_cell_size_per_token (dflash_utils.py 0.5.18:139-151): 2 x 6 layers x
    max(1, 8 // 8) heads x 128 x 2 B = 3072 B; Kimi-K2.6 MLA: 61 x (512 + 64) x 2 B."""
    r = result(
        "DFD131",
        drafter=kimi,
        target=target_cfg(),
        launch_args=launch(*CTX, "--max-running-requests", "32"),
        version="0.5.23",
    )
    (f,) = r.findings
    assert f.severity is Severity.INFO
    assert f.impact["Draft KV per token per GPU (bytes)"] == 3072
    assert f.impact["Target KV per token per GPU (bytes)"] == 61 * 576 * 2
    assert f.impact["Draft share of the KV budget"] == f"{3072 / (3072 + 61 * 576 * 2):.1%}"
    assert f.impact["Draft KV at max running requests per GPU (GiB)"] == round(
        3072 * 131072 * 32 / 2**30, 2
    )
    (fix,) = f.fixes
    assert fix.action == "manual" and fix.flag == "--speculative-draft-kv-cache-dtype"
    assert "at the same --mem-fraction-static" in (fix.note or "")


@pytest.mark.parametrize("version", ["0.5.18", "0.5.23"])
def test_dfd131_the_draft_dtype_is_kv_capacity_by_itself(kimi, version: str) -> None:  # type: ignore[no-untyped-def]
    """From 0.5.18 the KV pool is sized by target + draft bytes/token with the draft at its
    own KV dtype (pool_configurator.py 0.5.18:227-233, 0.5.23:332-338; dflash_utils.py
    0.5.18:178-185; spec_aux_hidden_state.py 0.5.18:196-211, draft_kv_budget.py
    0.5.23:29-48): fp8_e4m3 for the draft turns into target KV tokens without raising
    --mem-fraction-static, so the advice never asks for it."""
    r = result("DFD131", drafter=kimi, launch_args=launch(*CTX), version=version)
    (fix,) = r.findings[0].fixes
    assert "raise" not in (fix.note or "") and "same --mem-fraction-static" in (fix.note or "")
    assert f"SGLang {version} sizes the KV pool" in r.findings[0].message
    # 0.5.17 has no draft-only dtype: no fix, the lever is --kv-cache-dtype for both.
    old = result("DFD131", drafter=kimi, launch_args=launch(*CTX), version="0.5.17")
    assert old.findings[0].fixes == [] and "--kv-cache-dtype fp8_e4m3" in old.findings[0].message


def test_dfd131_same_with_or_without_a_window(kimi) -> None:  # type: ignore[no-untyped-def]
    """One slot per target token whatever the window (dflash_worker.py 0.5.11:87-98)."""
    a = result("DFD131", drafter=kimi, launch_args=launch(*CTX), version="0.5.23")
    b = result(
        "DFD131",
        drafter=kimi,
        launch_args=launch(*CTX, "--speculative-draft-window-size", "2048"),
        version="0.5.23",
    )
    assert a.findings[0].impact == b.findings[0].impact


def test_dfd131_before_0518_names_no_draft_only_lever(kimi) -> None:  # type: ignore[no-untyped-def]
    """0.5.17 has no --speculative-draft-kv-cache-dtype (server_args.py 0.5.18:2187 adds it)
    and budgets the draft by layer count (dflash_utils.py 0.5.11:51-89)."""
    r = result(
        "DFD131", drafter=kimi, target=target_cfg(), launch_args=launch(*CTX), version="0.5.17"
    )
    (f,) = r.findings
    assert f.fixes == [] and "arrives in 0.5.18" in f.message
    assert f.impact["Draft share of the KV budget"].startswith(f"{6 / 67:.1%}")


def test_dfd131_passes_with_fp8_draft_kv(kimi) -> None:  # type: ignore[no-untyped-def]
    args = launch(*CTX, "--speculative-draft-kv-cache-dtype", "fp8_e4m3")
    assert result("DFD131", drafter=kimi, launch_args=args, version="0.5.18").status == "passed"


def test_dfd131_draft_follows_kv_cache_dtype(kimi) -> None:  # type: ignore[no-untyped-def]
    """The draft KV dtype "Default follows --kv-cache-dtype" (server_args.py 0.5.18:2187-2200):
    fp8 there already halves the draft pool, so no lever is left to pull."""
    from dflash_doctor.kv_math import draft_bytes_per_token

    fp8 = launch(*CTX, "--kv-cache-dtype", "fp8_e5m2")
    assert result("DFD131", drafter=kimi, launch_args=fp8, version="0.5.23").status == "passed"
    assert result("DFD131", drafter=kimi, launch_args=fp8, version="0.5.13").status == "passed"
    bf16 = draft_bytes_per_token(kimi, tp_size=8, kv_dtype=None)
    assert bf16 == 2 * draft_bytes_per_token(kimi, tp_size=8, kv_dtype="fp8_e4m3") == 3072


# retired ids ------------------------------------------------------------------------------


def test_retired_ids_are_not_reused_and_are_explained() -> None:
    from dflash_doctor.checks.retired import RETIRED

    for cid in ("DFD101", "DFD108"):
        assert cid not in CATALOG and "retired" in RETIRED[cid]
        assert "Replaced by" in RETIRED[cid]
