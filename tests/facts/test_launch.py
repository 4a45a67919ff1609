from __future__ import annotations

import pytest

from dflash_doctor.errors import FactError
from dflash_doctor.facts.launch import parse_cmdline, parse_launch_file, parse_script
from tests.conftest import DEMO_HOST, FIXTURE_HOSTS


def test_proc_cmdline() -> None:
    args = parse_cmdline((DEMO_HOST / "proc/4242/cmdline").read_bytes(), source="process 4242")
    assert args.is_dflash
    assert args.draft_model_path == "/models/Kimi-K2.6-DFlash"
    assert (args.tp_size, args.page_size, args.context_length) == (8, 64, 131072)
    assert args.draft_window_flag is None and args.draft_window_size is None
    assert args.python == "/opt/sglang/venv/bin/python3"
    assert "sk-fixture-secret-000000000000" not in " ".join(args.argv)


def test_script_with_variables_and_continuations() -> None:
    data = (DEMO_HOST / "etc/sglang/launch.sh").read_bytes()
    args = parse_script(data, source="launch.sh")
    assert args.model_path == "moonshotai/Kimi-K2.6"
    assert args.draft_model_path == "/models/Kimi-K2.6-DFlash"
    lines = data.decode().splitlines()
    assert "--context-length" in lines[args.flag_lines["--context-length"] - 1]


def test_systemd_unit() -> None:
    path = FIXTURE_HOSTS / "v0513/etc/systemd/system/sglang.service"
    args = parse_launch_file(path.read_bytes(), source="unit", path=str(path))
    assert args.kind == "systemd"
    assert args.draft_window_flag == "--speculative-dflash-draft-window-size"
    assert args.draft_window_size == 4096 and args.num_draft_tokens == 8
    assert "sk-fixture" not in " ".join(args.argv)


def test_equals_form_and_last_occurrence_wins() -> None:
    args = parse_script(
        b"python -m sglang.launch_server --speculative-dflash-draft-window-size 1024 "
        b"--speculative-draft-window-size=2048\n",
        source="s",
    )
    assert (args.draft_window_flag, args.draft_window_size) == (
        "--speculative-draft-window-size",
        2048,
    )


def test_abbreviations_are_not_guessed() -> None:
    args = parse_script(
        b"python -m sglang.launch_server --speculative-draft-window 2048\n", source="s"
    )
    assert args.draft_window_size is None
    assert "--speculative-draft-window" in args.other_flags


def test_sglang_serve_form() -> None:
    args = parse_script(b"sglang serve --model-path m --speculative-algorithm DFLASH\n", source="s")
    assert args.is_dflash


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"#!/bin/sh\necho hello\n", "no sglang.launch_server"),
        (b"python -m sglang.launch_server --model-path 'unterminated\n", "cannot split"),
        (b"python -m sglang.launch_server\x00\x01", "binary"),
        (b"\xff\xfe python -m sglang.launch_server", "not UTF-8"),
        (b"python -m sglang.launch_server --page-size\n", "expected one argument"),
    ],
)
def test_hostile_scripts(data: bytes, message: str) -> None:
    with pytest.raises(FactError, match=message):
        parse_script(data, source="s")


def test_a_value_argparse_cannot_convert_is_its_error_not_a_fact_error() -> None:
    """SGLang declares these options type=int (0.5.23 arg_groups/arg_utils.py:417): argparse
    refuses `abc` with its own text; every other value is still read."""
    args = parse_script(
        b"python -m sglang.launch_server --page-size abc --speculative-num-draft-tokens 0\n",
        source="s",
    )
    assert args.value_errors == ["argument --page-size: invalid int value: 'abc'"]
    assert args.page_size is None and args.num_draft_tokens == 0


def test_an_unknown_window_variable_is_named_not_a_crash() -> None:
    """`"$WINDOW"` set nowhere in the file: unknown offline (the caller's environment may
    set it), said in the notes; the window stays unknown and nothing else is lost."""
    args = parse_script(
        b'W=$1\npython -m sglang.launch_server --speculative-draft-window-size "$WINDOW" '
        b"--page-size 64\n",
        source="s",
    )
    assert args.draft_window_size is None and args.page_size == 64
    assert any("${WINDOW}" in n for n in args.parser_notes), args.parser_notes


def test_hostile_cmdline() -> None:
    with pytest.raises(FactError, match="empty"):
        parse_cmdline(b"", source="p")
    with pytest.raises(FactError, match="no sglang"):
        parse_cmdline(b"/usr/bin/sleep\x00100\x00", source="p")


def test_unit_without_execstart() -> None:
    with pytest.raises(FactError, match="ExecStart"):
        parse_launch_file(b"[Service]\nType=simple\n", source="u", path="x.service")
