"""Shell launch files read as bash runs them (facts/shell.py), never executed."""

from __future__ import annotations

import contextlib

import pytest

from dflash_doctor.errors import FactError
from dflash_doctor.facts.launch import logical_lines, parse_launch_file, parse_script


def script(text: str, files: dict[str, bytes] | None = None):  # type: ignore[no-untyped-def]
    def read(path: str) -> bytes:
        if files is None or path not in files:
            raise FactError(f"{path}: no such file")
        return files[path]

    return parse_script(text.encode(), source="/srv/launch.sh", read=read, path="/srv/launch.sh")


def test_the_command_that_runs_not_an_echo_or_pkill() -> None:
    args = script(
        "#!/bin/bash\n"
        "pkill -f sglang.launch_server || true\n"
        'echo "starting python -m sglang.launch_server --tp-size 1"\n'
        "exec python3 -m sglang.launch_server --model-path m --tp-size 4 >/var/log/s.log 2>&1\n"
    )
    assert args.tp_size == 4 and args.command_lines == (4, 4)
    assert args.argv[-1] == "4"  # the redirections are not arguments


def test_parameter_expansions() -> None:
    args = script(
        "CTX=${CTX:=32768}\n"
        ": ${PAGE:=64}\n"
        "TP=${1:-2}\n"
        "python -m sglang.launch_server --model-path ${MODEL-Qwen/Qwen3-8B} "
        "--context-length $CTX --page-size ${PAGE} --tp-size ${TP} "
        "--mem-fraction-static ${MEM:+0.5}${MEM:-0.8}\n"
    )
    assert args.model_path == "Qwen/Qwen3-8B" and args.context_length == 32768
    assert (args.page_size, args.tp_size, args.mem_fraction_static) == (64, 2, 0.8)
    assert args.parser_notes == []


def test_arrays_and_word_splitting() -> None:
    args = script(
        "ARGS=(\n"
        "  --model-path m\n"
        '  --speculative-draft-model-path "/models/my drafter"\n'
        ")\n"
        "ARGS+=(--page-size 16)\n"
        'EXTRA="--tp-size 8 --context-length 64k"\n'
        'python -m sglang.launch_server "${ARGS[@]}" $EXTRA\n'
    )
    assert args.draft_model_path == "/models/my drafter"
    assert (args.page_size, args.tp_size, args.context_length) == (16, 8, 64000)
    assert args.flag_lines["--tp-size"] == 7


def test_sourced_env_files_are_read_not_run() -> None:
    files = {
        "/srv/env.sh": b"export MODEL=/models/target\nsource ./more.sh\n",
        "/srv/more.sh": b"TP=8\n",
    }
    args = script(
        ". /srv/env.sh\npython -m sglang.launch_server --model-path $MODEL --tp $TP\n", files
    )
    assert args.model_path == "/models/target" and args.tp_size == 8


def test_one_lost_variable_keeps_every_other_value() -> None:
    args = script(
        "source /srv/missing.env\n"
        "python -m sglang.launch_server --model-path m --tp-size $TP --page-size 64 "
        "--context-length $(cat /etc/ctx)\n"
    )
    assert args.page_size == 64 and args.model_path == "m"
    assert args.tp_size == 1 and args.context_length is None
    notes = " ".join(args.parser_notes)
    assert "${TP}" in notes and "--tp-size" in notes and "/srv/missing.env" in notes
    assert "--context-length" in notes
    assert "${TP}" in args.argv


def test_trailing_space_after_backslash_ends_the_command() -> None:
    text = "python -m sglang.launch_server --model-path m \\ \n  --tp-size 8\n"
    args = script(text)
    assert args.tp_size == 1 and args.command_lines == (1, 1)
    assert [ll.span for ll in logical_lines(text)] == [(1, 1), (2, 2)]
    text = "python -m sglang.launch_server --model-path m \\\n  --tp-size 8\n"
    assert script(text).tp_size == 8 and script(text).command_lines == (1, 2)


def test_systemd_environment_file() -> None:
    unit = (
        b"[Service]\nEnvironmentFile=/etc/default/sglang\nEnvironmentFile=-/etc/optional\n"
        b"Environment=PAGE=32\n"
        b"ExecStart=/venv/bin/python -m sglang.launch_server --model-path ${MODEL} "
        b"--page-size $PAGE --tp-size ${TP}\n"
    )
    files = {"/etc/default/sglang": b'# defaults\nMODEL="/models/target"\n'}
    args = parse_launch_file(
        unit, source="u", path="sglang.service", read=lambda p: files.get(p, b"")
    )
    assert args.model_path == "/models/target" and args.page_size == 32
    assert any("${TP}" in n for n in args.parser_notes)


@pytest.mark.parametrize(
    "text",
    [
        "x=" + "$" * 200_000 + "\npython -m sglang.launch_server\n",
        "A=(" * 50_000 + "\n",
        "${" * 100_000,
        '"' + "a" * 500_000,
        "python -m sglang.launch_server " + "${A:-" * 20_000 + "\n",
        "\\" * 300_001,
    ],
)
def test_hostile_scripts_are_one_clear_error_or_a_parse(text: str) -> None:
    # Cost is measured by `python -m bench.launch_parse` (linear growth, ratio to grep -c),
    # not timed here: a timed test failed on a loaded CI machine.
    with contextlib.suppress(FactError):
        script(text)


def test_a_word_past_the_bound_is_refused_as_it_grows() -> None:
    from dflash_doctor.facts.shell import MAX_WORD

    # the file itself is bounded too: a word grows past the bound through expansions
    half = "a" * (MAX_WORD // 2 + 1)
    for text in (f"X={half}\nY=$X$X\n", f'X={half}\nY="$X$X"\n', f"X={half}\necho $X$X\n"):
        with pytest.raises(FactError, match="too large"):
            script(text)


@pytest.mark.parametrize(
    ("line", "value"),
    [("V=$X", "a b"), ("V+=$X", "a b"), ('V="$X"', "a b"), ("V=1$X", "1a b"), ("V=$X$X", "a ba b")],
)
def test_an_assignment_value_is_not_split(line: str, value: str) -> None:
    args = script(f"X='a b'\n{line}\npython -m sglang.launch_server --served-model-name \"$V\"\n")
    assert args.argv[-1] == value


@pytest.mark.parametrize(
    ("word", "tail"),
    [
        ("1V=$X", ["1V=a", "b"]),
        ("+V=$X", ["+V=a", "b"]),
        ("V+$X", ["V+a", "b"]),
        ("V$X", ["Va", "b"]),
    ],
)
def test_a_word_that_is_no_assignment_is_split(word: str, tail: list[str]) -> None:
    args = script(f"X='a b'\npython -m sglang.launch_server --served-model-name {word}\n")
    assert list(args.argv[-2:]) == tail


def test_lost_value_is_not_a_refusal() -> None:
    from dflash_doctor.facts.launch import replay_launch

    args = script("python -m sglang.launch_server --model-path m --tp-size $TP --page-size 16\n")
    replayed = replay_launch(args, "0.5.23")
    assert replayed.sglang_rejects is None and replayed.page_size == 16
    assert any("${TP}" in n for n in replayed.parser_notes)
