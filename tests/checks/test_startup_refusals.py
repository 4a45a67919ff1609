"""DFD111: launches SGLang parses and then refuses to start, at both ends of each refusal's
release range and just outside it (issue 21 item 1). The launch goes through the release's
replayed parser (facts/launch.py replay_launch), as `gate` reads it.

Wheel facts (/work/wheels/src/<version>/sglang/srt): window positive server_args.py
0.5.11:3380-3384, arg_groups/speculative_hook.py 0.5.12 (server_args.py:3650-3653) ..
0.5.23:204-207; sink 0.5.21:191-194 .. 0.5.23:227-230 (flag absent before 0.5.21,
arg_groups/arg_utils.py:417); block size positive 0.5.11:3359-3363, 0.5.23:369-372; flags
differ 0.5.11:3364-3372, 0.5.23:373-381; window below block 0.5.11:3421-3428,
0.5.23:428-434, the block inferred from the drafter config else 16 (0.5.23:398-420);
sliding window speculative/dflash_utils.py 0.5.14:350-353, 0.5.23:411-414 (0.5.11-0.5.13
never read layer_types: models/dflash.py 0.5.13:116-122).
"""

from __future__ import annotations

import pytest

from dflash_doctor.checks import CATALOG
from dflash_doctor.checks.base import CheckResult
from dflash_doctor.checks.startup_refusals import fill
from dflash_doctor.facts.launch import replay_launch
from dflash_doctor.facts.log_patterns import pattern
from dflash_doctor.facts.models import DrafterConfig
from dflash_doctor.runner import run_check
from tests.conftest import drafter_cfg, host_facts, launch, target_cfg

WINDOW = {"0.5.11": "--speculative-dflash-draft-window-size"}


def window_flag(version: str) -> str:
    return WINDOW.get(version, "--speculative-draft-window-size")


def judge(
    version: str, *flags: str, drafter: DrafterConfig | None = None, check: str = "DFD111"
) -> CheckResult:
    args = replay_launch(launch(*flags), version)
    assert args.parser == "replay", args.parser_notes
    facts = host_facts(
        drafter=drafter or drafter_cfg(), target=target_cfg(), launch_args=args, version=version
    )
    return run_check(CATALOG[check], facts)


def texts(r: CheckResult) -> list[str]:
    return [f.message for f in r.findings]


@pytest.mark.parametrize("version", ["0.5.11", "0.5.12", "0.5.23"])
@pytest.mark.parametrize("value", ["0", "-4"])
def test_window_not_positive(version: str, value: str) -> None:
    r = judge(version, window_flag(version), value)
    assert r.status == "failed", r.reason
    (msg,) = texts(r)
    expected = (
        f"DFLASH requires --speculative-dflash-draft-window-size to be positive, got {value}."
        if version == "0.5.11"
        else f"--speculative-draft-window-size must be positive, got {value}."
    )
    assert expected in msg
    site = "srt/server_args.py:3382" if version == "0.5.11" else ""
    assert site in msg


@pytest.mark.parametrize("version", ["0.5.11", "0.5.23"])
def test_window_below_the_drafters_block_size(version: str) -> None:
    """No block flag: SGLang infers the block from the drafter (block_size 16)."""
    r = judge(version, window_flag(version), "8")
    (msg,) = texts(r)
    assert "window_size=8, block_size=16." in msg
    assert "must be >=" in msg
    assert [fx.action for fx in r.findings[0].fixes] == ["remove_flag"]


def test_window_below_the_flagged_block_and_at_it() -> None:
    assert judge("0.5.23", "--speculative-draft-window-size", "12").status == "failed"
    ok = judge(
        "0.5.23",
        "--speculative-draft-window-size",
        "8",
        "--speculative-num-draft-tokens",
        "8",
    )
    assert ok.status == "passed", texts(ok)


def test_window_below_sglangs_default_block_when_the_drafter_names_none() -> None:
    cfg = drafter_cfg(block_size=None, dflash_config={"target_layer_ids": [1, 12, 24, 35, 47, 58]})
    assert cfg.block_size is None
    r = judge("0.5.23", "--speculative-draft-window-size", "15", drafter=cfg)
    assert "window_size=15, block_size=16." in texts(r)[0]


@pytest.mark.parametrize("version", ["0.5.21", "0.5.23"])
def test_sink_without_a_window(version: str) -> None:
    r = judge(version, "--speculative-draft-sink-size", "4")
    (msg,) = texts(r)
    assert "--speculative-draft-sink-size requires --speculative-draft-window-size." in msg
    assert (
        judge(
            version, "--speculative-draft-sink-size", "4", "--speculative-draft-window-size", "2048"
        ).findings
        == []
    )


def test_sink_before_0521_is_the_parsers_refusal_not_a_startup_one() -> None:
    """0.5.20 has no sink option: argparse refuses it (DFD110), DFD111 leaves it."""
    assert judge("0.5.20", "--speculative-draft-sink-size", "4").status == "skipped"
    assert judge("0.5.20", "--speculative-draft-sink-size", "4", check="DFD110").status == (
        "failed"
    )


@pytest.mark.parametrize("version", ["0.5.11", "0.5.23"])
def test_block_size_flags(version: str) -> None:
    differ = judge(
        version, "--speculative-num-draft-tokens", "8", "--speculative-dflash-block-size", "16"
    )
    assert "speculative_num_draft_tokens=8, speculative_dflash_block_size=16." in texts(differ)[0]
    zero = judge(version, "--speculative-dflash-block-size", "0")
    assert "to be positive, got 0." in texts(zero)[0]
    same = judge(
        version, "--speculative-num-draft-tokens", "16", "--speculative-dflash-block-size", "16"
    )
    assert same.findings == []


@pytest.mark.parametrize(("version", "refused"), [("0.5.13", False), ("0.5.14", True)])
@pytest.mark.parametrize("version_end", ["first", "last"])
def test_sliding_layers_without_a_window(version: str, refused: bool, version_end: str) -> None:
    """A qwen3 drafter with sliding layers but use_sliding_window false: Qwen3Config
    (transformers 5.6.0-5.19.0 models/qwen3/configuration_qwen3.py:87) nulls the window."""
    v = {"first": version, "last": "0.5.23" if refused else "0.5.11"}[version_end]
    r = judge(v, drafter=drafter_cfg(use_sliding_window=False))
    if refused:
        (msg,) = texts(r)
        assert "DFLASH sliding_attention layers require config.sliding_window." in msg
        assert "srt/speculative/dflash_utils.py:" in msg
    else:
        assert r.findings == []


def test_gpt_oss_drafter_with_a_null_window_is_refused() -> None:
    """GptOssConfig derives even layers sliding; an explicit null window stays null."""
    cfg = drafter_cfg(model_type="gpt_oss", sliding_window=None, layer_types=None)
    assert "sliding_attention" in cfg.layer_types and cfg.sliding_window_unset
    assert judge("0.5.23", drafter=cfg).status == "failed"


def test_a_refused_launch_silences_the_span_and_block_verdicts() -> None:
    """A server that never starts has no served spans to judge."""
    for check in ("DFD102", "DFD103", "DFD130", "DFD105"):
        r = judge("0.5.23", "--speculative-draft-window-size", "8", check=check)
        assert r.status == "skipped", (check, r.status, texts(r))
        assert "refuses to start this launch (DFD111)" in (r.reason or "")


def test_fill_takes_each_fields_last_name() -> None:
    fmt = pattern("crash_block_size_flags_differ").formats[-1].format
    filled = fill(fmt, {"speculative_num_draft_tokens": 8, "speculative_dflash_block_size": 16})
    assert "{" not in filled and "=8," in filled and "=16." in filled


def test_a_server_that_answers_is_judged_even_if_a_restart_would_be_refused() -> None:
    """Running 0.5.13 with 0.5.14 installed: the qwen3 drafter without use_sliding_window
    starts on 0.5.13 (layer_types ignored) and is refused by a 0.5.14 restart (DFD111); the
    verdicts on the running server still run."""
    from dflash_doctor.facts.models import Fact, ServerRuntime

    args = replay_launch(launch("--speculative-draft-window-size", "8"), "0.5.14")
    facts = host_facts(
        drafter=drafter_cfg(), target=target_cfg(), launch_args=args, version="0.5.13"
    )
    facts.runtime = Fact.of(ServerRuntime(url="http://h:30000", endpoint="/server_info"))
    r = run_check(CATALOG["DFD102"], facts)
    assert r.status == "failed", r.reason
    assert run_check(CATALOG["DFD111"], facts).status == "failed"
