"""The launch rewriter over generated layouts: every fix kind, every layout, read back by its
runner. Shell scripts are run by real bash (the server replaced by a stand-in that prints its
argv); systemd units are read by systemd's line rules (facts/systemd_unit.py); compose files
by YAML. The argv read back must equal the plan's (`edit_argv`), or the edit is refused with
one line. Fixed seeds (derandomize), bounded examples.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dflash_doctor.errors import FactError
from dflash_doctor.facts.launch import parse_compose, parse_script, parse_systemd_unit
from dflash_doctor.fix.edits import Edit, edit_argv, edit_compose, edit_shell

SETTINGS = settings(
    max_examples=120,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
HEAD = ["/opt/venv/bin/python3", "-m", "sglang.launch_server"]
FLAGS = ["--context-length", "--page-size", "--speculative-draft-window-size", "--tp-size"]
BOOLS = ["--trust-remote-code", "--enable-metrics"]
NEW = "--speculative-num-draft-tokens"

_value = st.sampled_from(["8", "2048", "64", "1"])
_quote = st.sampled_from(["plain", "double", "single", "var"])
_flag = st.one_of(
    st.tuples(st.sampled_from(FLAGS), _value, st.sampled_from([" ", "="]), _quote),
    st.tuples(st.sampled_from(BOOLS), st.none(), st.just(" "), st.just("plain")),
)


@st.composite
def launches(draw: st.DrawFn) -> list[tuple[str, str | None, str, str]]:
    """Distinct flags in some order, each with its value's spelling."""
    flags: list[tuple[str, str | None, str, str]] = draw(
        st.lists(_flag, min_size=1, max_size=6, unique_by=lambda f: f[0])
    )
    return flags


@st.composite
def layouts(draw: st.DrawFn) -> dict[str, object]:
    return {
        "breaks": draw(st.sampled_from(["word", "pair", "one", "random"])),
        "indent": draw(st.sampled_from(["  ", "    ", "\t", ""])),
        "trailing": draw(st.booleans()),
        "comments": draw(st.booleans()),
        "split_rand": draw(st.lists(st.booleans(), min_size=20, max_size=20)),
    }


@st.composite
def edits(draw: st.DrawFn, flags: list[tuple[str, str | None, str, str]]) -> list[Edit]:
    names = [f[0] for f in flags]
    kind = draw(st.sampled_from(["remove", "set", "add", "replace", "several"]))
    some = draw(st.sampled_from(names))
    if kind == "remove":
        return [Edit("remove_flag", some)]
    if kind == "set":
        return [Edit("set_flag", some, None if some in BOOLS else "4096")]
    if kind == "add":
        return [Edit("set_flag", NEW, "8")]
    if kind == "replace":
        return [Edit("replace_flag", NEW, "16", some)]
    return [Edit("remove_flag", some), Edit("set_flag", NEW, "8"), Edit("set_flag", names[0], "1")]


def _spell(value: str, quote: str, *, unit: bool) -> str:
    if quote == "double":
        return f'"{value}"'
    if quote == "single":
        return f"'{value}'"
    if quote == "var":
        return "${V}"  # V=2048: the script's assignment, the unit's Environment=
    return value


def _words(flags: list[tuple[str, str | None, str, str]], unit: bool) -> list[list[str]]:
    """Source tokens grouped by flag: [flag value] or [flag=value] or [flag]."""
    out = []
    for name, value, sep, quote in flags:
        if value is None:
            out.append([name])
        elif sep == "=":
            out.append([f"{name}={_spell(value, quote, unit=unit)}"])
        else:
            out.append([name, _spell(value, quote, unit=unit)])
    return out


def _command(
    flags: list[tuple[str, str | None, str, str]],
    lay: dict[str, object],
    *,
    unit: bool,
    comment_lines: bool,
) -> list[str]:
    """The launch command's physical lines (no line ends), continuations included."""
    groups = [[w] for w in HEAD[:1]] + [HEAD[1:]] + _words(flags, unit)
    tokens = [t for g in groups for t in g]
    breaks = lay["breaks"]
    rand = list(lay["split_rand"])  # type: ignore[call-overload]
    lines: list[list[str]] = [[]]
    for n, tok in enumerate(tokens):
        if n and (
            breaks == "word"
            or (breaks == "pair" and tok.startswith("--"))
            or (breaks == "random" and rand[n % len(rand)])
        ):
            lines.append([])
        lines[-1].append(tok)
    indent = str(lay["indent"])
    out = []
    for n, ws in enumerate(lines):
        text = (indent if n else "") + " ".join(ws)
        if n < len(lines) - 1:
            out.append(text + " \\")
            if comment_lines and n % 2 == 0:
                out.append(indent + "# between continuation lines")
        else:
            out.append(text + ("   " if lay["trailing"] else ""))
    return out


def script_text(flags: list[tuple[str, str | None, str, str]], lay: dict[str, object]) -> str:
    body = _command(flags, lay, unit=False, comment_lines=False)
    body[0] = "exec " + body[0]
    head = ["#!/usr/bin/env bash", "# launch", "V=2048", "export HF_HOME=/data/hf", ""]
    tail = ["# after the launch"] if lay["comments"] else []
    if lay["comments"]:
        body[-1] = body[-1].rstrip() + "  # the end"
    return "\n".join(head + body + tail) + "\n"


def unit_text(
    flags: list[tuple[str, str | None, str, str]], lay: dict[str, object], crlf: bool
) -> str:
    body = _command(flags, lay, unit=True, comment_lines=bool(lay["comments"]))
    body[0] = "ExecStart=" + body[0]
    lines = [
        "[Unit]",
        "Description=x",
        "",
        "[Service]",
        "Environment=V=2048",
        *body,
        "Restart=on-failure",
        "",
        "[Install]",
        "WantedBy=multi-user.target",
    ]
    eol = "\r\n" if crlf else "\n"
    return eol.join(lines) + eol


def bash_argv(text: str) -> list[str]:
    """What bash runs: the script with its interpreter replaced by a stand-in printing argv."""
    with tempfile.TemporaryDirectory() as tmp:
        stub = Path(tmp) / "python3"
        stub.write_text('#!/bin/sh\nprintf "%s\\0" "$0" "$@"\n')
        stub.chmod(0o755)
        script = Path(tmp) / "launch.sh"
        script.write_text(text.replace(HEAD[0], str(stub)))
        run = subprocess.run(
            ["bash", str(script)],
            capture_output=True,
            timeout=10,
            env={"PATH": os.environ["PATH"]},
            check=False,
        )
        argv = run.stdout.decode().split("\0")[:-1]
        return [HEAD[0], *argv[1:]]


@SETTINGS
@given(flags=launches(), lay=layouts(), data=st.data())
def test_script_edits_read_back_by_bash(flags, lay, data) -> None:  # type: ignore[no-untyped-def]
    text = script_text(flags, lay)
    fixes = data.draw(edits(flags))
    before = bash_argv(text)
    assert before == parse_script(text.encode(), source="s").argv
    out = edit_shell(text, parse_script(text.encode(), source="s"), fixes)
    assert bash_argv(out) == edit_argv(before, fixes)
    assert out.splitlines()[:5] == text.splitlines()[:5]


@SETTINGS
@given(flags=launches(), lay=layouts(), crlf=st.booleans(), data=st.data())
def test_unit_edits_read_back_by_systemd_rules(flags, lay, crlf, data) -> None:  # type: ignore[no-untyped-def]
    text = unit_text(flags, lay, crlf)
    fixes = data.draw(edits(flags))
    before = parse_systemd_unit(text.encode(), source="u")
    assert before.argv[: len(HEAD)] == HEAD and len(before.argv) == len(HEAD) + sum(
        len(g) for g in _words(flags, unit=True)
    )
    out = edit_shell(text, before, fixes)
    after = parse_systemd_unit(out.encode(), source="u")
    assert after.argv == edit_argv(before.argv, fixes)
    assert "Restart=on-failure" in out and out.count("\r\n") in (0, out.count("\n"))


@SETTINGS
@given(flags=launches(), style=st.sampled_from(["block", "flow", "string"]), data=st.data())
def test_compose_edits_read_back_by_yaml(flags, style, data) -> None:  # type: ignore[no-untyped-def]
    plain = [(name, value, sep, "plain") for name, value, sep, _ in flags]
    argv = HEAD + [w for g in _words(plain, False) for w in g]
    if style == "block":
        cmd = "\n" + "".join(f"      - {yaml.safe_dump(a).splitlines()[0]}\n" for a in argv)
        cmd = cmd.replace("      - -m", "      # the module\n      - -m")
    elif style == "flow":
        cmd = " " + yaml.safe_dump(argv, default_flow_style=True, width=10**6)
    else:
        cmd = " " + yaml.safe_dump(" ".join(argv), width=10**6).splitlines()[0] + "\n"
    text = f"services:\n  web:\n    image: nginx\n  sglang:\n    image: x\n    command:{cmd}"
    text += "    ports: ['30000:30000']\n"
    fixes = data.draw(edits(flags))
    out = edit_compose(text, fixes)
    got = parse_compose(out.encode(), source="c", service="sglang").argv
    assert got == edit_argv(argv, fixes)
    assert "image: nginx" in out and "ports: ['30000:30000']" in out


def test_crlf_script_is_refused_in_one_line() -> None:
    text = "python3 -m sglang.launch_server \\\r\n  --page-size 64\r\n"
    launch = parse_script(text.encode(), source="s")
    with pytest.raises(FactError) as e:
        edit_shell(text, launch, [Edit("remove_flag", "--page-size")])
    assert "CRLF" in str(e.value) and "\n" not in str(e.value)


def test_flag_inside_a_multi_word_variable_is_refused() -> None:
    text = 'EXTRA="--page-size 64"\npython3 -m sglang.launch_server --tp-size 8 $EXTRA\n'
    launch = parse_script(text.encode(), source="s")
    with pytest.raises(FactError, match="variable holding several words"):
        edit_shell(text, launch, [Edit("set_flag", "--page-size", "32")])


def test_one_word_per_line_remove_takes_the_value_line() -> None:
    text = (
        "python3 -m sglang.launch_server \\\n  --speculative-draft-window-size \\\n"
        "  2048 \\\n  --port 30000\n"
    )
    out = edit_shell(
        text,
        parse_script(text.encode(), source="s"),
        [Edit("remove_flag", "--speculative-draft-window-size")],
    )
    assert out == "python3 -m sglang.launch_server \\\n  --port 30000\n"


def test_unit_set_on_a_continued_line_keeps_its_backslash() -> None:
    text = (
        "[Service]\nExecStart=/usr/bin/python3 -m sglang.launch_server \\\n"
        "    --speculative-num-draft-tokens \\\n    16 \\\n    --port 30000\n"
    )
    launch = parse_systemd_unit(text.encode(), source="u")
    out = edit_shell(text, launch, [Edit("set_flag", "--speculative-num-draft-tokens", "8")])
    assert out == text.replace("    16 \\", "    8 \\")
    assert parse_systemd_unit(out.encode(), source="u").argv[-2:] == ["--port", "30000"]
