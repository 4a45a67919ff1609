"""The vLLM launch rewriter over generated launches: a `--speculative-config` object (keys,
values with quotes, dollars, backslashes, nested objects; its spacing) spelt in every way
vLLM reads it (a single-quoted word, a double-quoted word with escaped quotes, `=` inline,
`-sc`, dotted `--speculative-config.KEY VALUE` words), on one line or one word per line,
edited (a key set, added, removed, renamed; the runner variable set) and read back by its
runner: scripts by real bash (the server replaced by a stand-in printing its argv), units
by systemd's line rules. The argv read back must be the plan's (`edit_vllm_argv`) and the
object vLLM builds from it the planned one. Fixed seeds (derandomize), bounded examples.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dflash_doctor.facts.vllm_launch import (
    parse_vllm_script,
    parse_vllm_systemd_unit,
    runs_vllm,
    speculative_object,
)
from dflash_doctor.fix.vllm_edits import edit_vllm_argv, edit_vllm_text, planned_object
from dflash_doctor.fix.word_edits import read_unit
from dflash_doctor.launch_edits import Edit
from tests.test_rewrite_properties import bash_argv

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
HEAD = ["/opt/venv/bin/python3", "-m", "vllm.entrypoints.openai.api_server"]
# Keys whose type the launch parser checks (facts/vllm_launch.py) and keys it leaves alone.
TEXT_KEYS = ["method", "model", "attention_backend"]
INT_KEYS = ["num_speculative_tokens", "max_model_len"]
ANY_KEYS = ["quantization", "speculative_token_tree"]
KEYS = TEXT_KEYS + INT_KEYS + ANY_KEYS
RUNNER = "VLLM_USE_V2_MODEL_RUNNER"
# Values a host's JSON may hold; `unit`: the ones systemd passes through unexpanded.
UNIT_TEXT = ["dflash", "/models/z-lab/Kimi DFlash", "a,b:c", "{not: json}"]
UNIT_ANY = [16, True, None, {"x": [1, "}"]}, ["a", 2]]
SHELL_TEXT = ['say "hi"', "$HOME", "back\\slash", "`tick`", "it's", "100%"]
SEPARATORS = [(", ", ": "), (",", ":"), (" , ", " : ")]
FORMS = ["single", "double", "inline", "short", "dotted", "dotted_eq"]


@st.composite
def objects(draw: st.DrawFn, unit: bool) -> dict[str, Any]:
    text = UNIT_TEXT if unit else UNIT_TEXT + SHELL_TEXT
    keys = draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=4, unique=True))
    pools = {k: text for k in TEXT_KEYS} | {k: [7, 16, 131072] for k in INT_KEYS}
    return {k: draw(st.sampled_from(pools.get(k, text + UNIT_ANY))) for k in keys}


def _value(key: str) -> str:
    return '"x y"' if key in TEXT_KEYS else "15"


def _json(obj: dict[str, Any], seps: tuple[str, str]) -> str:
    return json.dumps(obj, separators=seps)


def spec_words(obj: dict[str, Any], form: str, seps: tuple[str, str], unit: bool) -> list[str]:
    """The object as source words, quoted for the file."""
    text = _json(obj, seps)
    if form.startswith("dotted"):
        out = []
        for n, (k, v) in enumerate(obj.items()):
            # vLLM turns underscores into dashes up to the first dot (argparse_utils.py
            # 0.34.0:378-393): every other option is spelt `--speculative_config.`.
            option = "--speculative_config." if n % 2 else "--speculative-config."
            value = json.dumps(v)
            quoted = f"'{value}'" if unit else shlex.quote(value)
            out += [f"{option}{k}={quoted}"] if form == "dotted_eq" else [option + k, quoted]
        return out
    if form == "double" or (form in ("single", "short") and "'" in text):
        escaped = text.replace("\\", "\\\\").replace('"', '\\"')
        if not unit:
            escaped = escaped.replace("$", "\\$").replace("`", "\\`")
        return ["--speculative-config", f'"{escaped}"']
    if form == "inline":
        return [shlex.quote("--speculative-config=" + text)]
    return ["-sc" if form == "short" else "--speculative-config", f"'{text}'"]


@st.composite
def key_edits(draw: st.DrawFn, obj: dict[str, Any]) -> list[Edit]:
    given_keys = list(obj)
    absent = [k for k in KEYS if k not in obj]
    some = draw(st.sampled_from(given_keys))
    option = f"--speculative-config.{some}"
    kind = draw(st.sampled_from(["set", "add", "remove", "rename", "several"]))
    if kind == "set" or (kind in ("add", "rename") and not absent):
        return [Edit("set_key", option, _value(some))]
    if kind == "add":
        new = draw(st.sampled_from(absent))
        return [Edit("set_key", f"--speculative-config.{new}", _value(new))]
    if kind == "remove":
        return [Edit("remove_key", option)]
    if kind == "rename":
        # To a key of the same kind: the parser checks a renamed value's type too.
        same = [k for k in absent if (k in TEXT_KEYS) == (some in TEXT_KEYS)
                and (k in INT_KEYS) == (some in INT_KEYS)]  # fmt: skip
        if same:
            return [Edit("rename_key", option, draw(st.sampled_from(same)))]
        return [Edit("remove_key", option)]
    return [Edit("set_key", option, _value(some)), Edit("remove_key", option)]


def command(words: list[str], per_line: bool) -> list[str]:
    if not per_line:
        return [" ".join(words)]
    return [w + " \\" for w in words[:-1]] + [words[-1]]


def _check_object(before: list[str], after: list[str], edits: list[Edit]) -> None:
    assert after == edit_vllm_argv(before, edits)
    assert speculative_object(after) == planned_object(speculative_object(before), edits)


@SETTINGS
@given(data=st.data(), form=st.sampled_from(FORMS), seps=st.sampled_from(SEPARATORS))
def test_script_edits_read_back_by_bash(data: st.DataObject, form: str, seps: Any) -> None:
    obj = data.draw(objects(unit=False))
    words = [*HEAD, "--model", "/m", *spec_words(obj, form, seps, False), "--port", "8001"]
    env = data.draw(st.sampled_from(["", "export", "prefix"]))
    lines = command(words, data.draw(st.booleans()))
    lines[0] = ("VLLM_USE_V2_MODEL_RUNNER=0 " if env == "prefix" else "") + "exec " + lines[0]
    head = ["#!/usr/bin/env bash", "# launch", "export HF_HOME=/data"]
    if env == "export":
        head.append(f"export {RUNNER}=0")
    text = "\n".join([*head, *lines]) + "\n"
    edits = data.draw(key_edits(obj))
    if env:
        edits.append(Edit("set_env", RUNNER, "1"))
    before = bash_argv(text)
    out = edit_vllm_text(text, "script", edits)
    _check_object(before, bash_argv(out), edits)
    assert out.splitlines()[:3] == head[:3]
    if env:
        assert parse_vllm_script(out.encode(), source="s").environ == {RUNNER: "1"}


@SETTINGS
@given(data=st.data(), form=st.sampled_from(FORMS), seps=st.sampled_from(SEPARATORS))
def test_unit_edits_read_back_by_systemd_rules(data: st.DataObject, form: str, seps: Any) -> None:
    obj = data.draw(objects(unit=True))
    words = [*HEAD, "--model", "/m", *spec_words(obj, form, seps, True), "--port", "8001"]
    lines = command(words, data.draw(st.booleans()))
    lines[0] = "ExecStart=" + lines[0]
    env = data.draw(st.sampled_from(["", f"Environment={RUNNER}=0", f'Environment="{RUNNER}=0"']))
    head = ["[Unit]", "Description=x", "", "[Service]", *([env] if env else [])]
    text = "\n".join([*head, *lines, "Restart=on-failure"]) + "\n"
    edits = data.draw(key_edits(obj))
    if env:
        edits.append(Edit("set_env", RUNNER, "1"))
    before = read_unit(text, runs_vllm).words
    out = edit_vllm_text(text, "systemd", edits)
    _check_object(before, read_unit(out, runs_vllm).words, edits)
    assert out.endswith("Restart=on-failure\n")
    if env:
        assert parse_vllm_systemd_unit(out.encode(), source="u").environ == {RUNNER: "1"}
