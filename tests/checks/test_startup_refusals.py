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
    """0.5.20 has no sink option: argparse refuses it (DFD110); 0.5.20 raises no sink text."""
    assert judge("0.5.20", "--speculative-draft-sink-size", "4").status == "passed"
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
    facts = facts.model_copy(
        update={"runtime": Fact.of(ServerRuntime(url="http://h:30000", endpoint="/server_info"))}
    )
    r = run_check(CATALOG["DFD102"], facts)
    assert r.status == "failed", r.reason
    assert run_check(CATALOG["DFD111"], facts).status == "failed"


# Hold-out cases (issue 21 "Done when"): each was a wrong verdict before it was mended.


@pytest.mark.parametrize("window", [None, "4096"])
def test_a_negative_sink_is_refused_first(window: str | None) -> None:
    """0.5.23 arg_groups/speculative_hook.py:221-229: the non-negative check comes before
    the window's presence (0.5.21:185-193)."""
    flags = ["--speculative-draft-sink-size", "-2"]
    if window:
        flags += ["--speculative-draft-window-size", window]
    (f,) = judge("0.5.23", *flags).findings
    assert "must be non-negative, got -2." in f.message.split(" Then:")[0]


@pytest.mark.parametrize("version", ["0.5.11", "0.5.12"])
def test_before_0513_the_block_size_is_refused_before_the_window(version: str) -> None:
    """srt/server_args.py checks --speculative-dflash-block-size (0.5.11:3358-3375,
    0.5.12:3628-3645) before the window (0.5.11:3378-3385, 0.5.12:3648-3654); from 0.5.13
    the hook checks the window first (0.5.23:204 before 368)."""
    flags = (window_flag(version), "0", "--speculative-dflash-block-size", "0")
    (f,) = judge(version, *flags).findings
    first, _, then = f.message.partition(" Then:")
    assert "block-size to be positive" in first and "window-size" in then
    (late,) = judge("0.5.23", "--speculative-draft-window-size", "0", *flags[2:]).findings
    assert "window-size must be positive" in late.message.partition(" Then:")[0]


def test_a_null_dflash_config_block_size_hides_the_top_level_one() -> None:
    """`dflash_cfg.get("block_size", top_level)` (dflash_utils.py 0.5.23:609-612): a present
    null wins, so the block is SGLang's 16 and a window of 12 is refused."""
    cfg = drafter_cfg(block_size=8, dflash_config={"block_size": None, "target_layer_ids": [1]})
    assert cfg.block_size is None and cfg.block_size_key == "dflash_config.block_size"
    (f,) = judge("0.5.23", "--speculative-draft-window-size", "12", drafter=cfg).findings
    assert "window_size=12, block_size=16." in f.message


@pytest.mark.parametrize("version", ["0.5.11", "0.5.23"])
def test_a_drafter_block_size_below_one_is_refused_at_model_build(version: str) -> None:
    """parse_dflash_draft_config's min_value=1 (dflash_utils.py 0.5.11:338-342,
    0.5.23:613-617) raises while the draft model is built (models/dflash.py 0.5.23:700)."""
    cfg = drafter_cfg(block_size=0, dflash_config={"block_size": 0, "target_layer_ids": [1]})
    (f,) = judge(version, drafter=cfg).findings
    assert "DFLASH block_size must be positive, got 0." in f.message


def test_a_parser_refusal_does_not_hide_the_next_refusal_nor_allow_span_verdicts() -> None:
    """`sixteen` is argparse's refusal (DFD110); the window of 0 is the next one SGLang
    meets, and no span verdict is given for a window SGLang never serves."""
    flags = ("--speculative-num-draft-tokens", "sixteen", "--speculative-draft-window-size", "0")
    (f,) = judge("0.5.23", *flags).findings
    assert f.message.startswith("Once its parser accepts the command")
    assert "window-size must be positive, got 0." in f.message
    assert judge("0.5.23", *flags, check="DFD102").status == "skipped"


def test_an_unknown_window_value_is_unknown_not_absent() -> None:
    """`"$WINDOW"` set nowhere the walk sees: no window verdict, no sink refusal."""
    from dflash_doctor.facts.launch import parse_script

    args = parse_script(
        b"python3 -m sglang.launch_server --model-path m --speculative-algorithm DFLASH "
        b'--speculative-draft-model-path d --speculative-draft-window-size "$WINDOW" '
        b"--speculative-draft-sink-size 4\n",
        source="launch.sh",
    )
    facts = host_facts(
        drafter=drafter_cfg(), target=target_cfg(), launch_args=replay_launch(args, "0.5.23")
    )
    for check in ("DFD102", "DFD103", "DFD130"):
        r = run_check(CATALOG[check], facts)
        assert r.status == "skipped" and "window unknown" in (r.reason or ""), (check, r)
    assert run_check(CATALOG["DFD111"], facts).findings == []


def test_a_layer_type_sglang_does_not_build_is_refused_from_0514() -> None:
    """models/dflash.py 0.5.14:63-66, 0.5.23:189-191; 0.5.13 never reads layer_types."""
    types = ["sliding_attention"] * 5 + ["chunked_attention"]
    cfg = drafter_cfg(layer_types=types)
    assert cfg.unknown_layer_types == ["chunked_attention"]
    (f,) = judge("0.5.14", drafter=cfg).findings
    assert "layer_types[5]='chunked_attention'." in f.message
    assert judge("0.5.13", drafter=cfg).findings == []
    assert "types SGLang does not build" in (
        judge("0.5.13", drafter=cfg, check="DFD103").reason or ""
    )


@pytest.mark.parametrize(("raw", "parsed"), [("sixteen", None), ("16", 16), (16.0, 16)])
def test_a_drafter_block_size_is_read_as_sglangs_int(raw: object, parsed: int | None) -> None:
    """`int(value)` (dflash_utils.py 0.5.23:509-512): "16" is 16; "sixteen" raises
    `Invalid DFLASH block_size='sixteen'.` at model build."""
    cfg = drafter_cfg(dflash_config={"block_size": raw, "target_layer_ids": [1]})
    assert cfg.block_size == parsed
    findings = judge("0.5.23", drafter=cfg).findings
    if parsed is None:
        assert "Invalid DFLASH block_size='sixteen'." in findings[0].message
    else:
        assert findings == []
