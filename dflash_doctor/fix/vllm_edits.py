"""Edit a vLLM launch script or systemd unit: a key of `--speculative-config`, or the
environment variable the server starts with. Pure text in, text out, then proved.

A key lives where vLLM reads it (vllm/utils/argparse_utils.py 0.34.0:462-500,
vllm/engine/arg_utils.py 0.34.0:2141-2161): the `--spec-tokens` shorthand when given; else
the dotted `--speculative-config.KEY VALUE` words, which win over the JSON wherever they
stand; else inside the JSON of the last `--speculative-config` / `-sc` word, edited as text
(fix/json_text.py) and written back in the word's own quoting. A variable is changed where
the script assigns it (an `export`, a plain assignment, the command's `NAME=value` prefix)
or in the unit's `Environment=` lines.

Every result is read back as its runner reads it (fix/word_edits.py readers with vLLM's
command test): the launch command must be exactly the planned argv, every other command or
directive the same but for the planned assignment, and vLLM's own reading of it
(facts/vllm_launch.py) must give the planned `--speculative-config` object and variable.
Otherwise FactError, one line, and nothing is written.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import partial
from typing import Any

from dflash_doctor.errors import FactError
from dflash_doctor.facts.launch import compose_services
from dflash_doctor.facts.shell import Command, Env, launch_words, script_commands
from dflash_doctor.facts.systemd_unit import directives
from dflash_doctor.facts.vllm_launch import (
    parse_vllm_compose,
    parse_vllm_script,
    parse_vllm_systemd_unit,
    runs_vllm,
    speculative_object,
    vllm_args_start,
)
from dflash_doctor.fix import json_text
from dflash_doctor.fix import word_edits as wd
from dflash_doctor.fix.compose_edits import edit_command
from dflash_doctor.fix.edits import first_difference
from dflash_doctor.launch_edits import Edit

JSON_FLAGS = ("--speculative-config", "-sc")
DOTTED = "--speculative-config."
SPEC_TOKENS = "--spec-tokens"
# (what, first index, last index, new words): "replace" word i; "remove" words i..j;
# "append" words at the end.
Op = tuple[str, int, int, list[str]]


def key_of(e: Edit) -> str:
    """The key an edit names: `--speculative-config.KEY`."""
    if not e.flag.startswith(DOTTED):
        raise FactError(f"{e.flag}: not a --speculative-config key")
    return e.flag[len(DOTTED) :].replace("-", "_")


def _name(word: str) -> tuple[str, str, str]:
    """(flag name as vLLM spells it, `=` or "", inline value): underscores in a long
    option's name are dashes up to its first dot (vllm/utils/argparse_utils.py
    0.34.0:378-393)."""
    name, eq, inline = word.partition("=")
    if name.startswith("--"):
        head, dot, rest = name.partition(".")
        name = head.replace("_", "-") + dot + rest
    return name, eq, inline


def _occurrences(words: list[str]) -> dict[str, list[tuple[int, int, str]]]:
    """Where the options that hold keys stand: kind -> (flag index, value index, dotted key)."""
    found: dict[str, list[tuple[int, int, str]]] = {"json": [], "dotted": [], "spec": []}
    i = vllm_args_start(words)
    while i < len(words):
        name, eq, _ = _name(words[i])
        base, dot, key = name.partition(".")
        kind = (
            "dotted"
            if base == "--speculative-config" and dot
            else "json"
            if base in JSON_FLAGS and not dot
            else "spec"
            if name == SPEC_TOKENS
            else None
        )
        if kind is None or not words[i].startswith("-"):
            i += 1
            continue
        value = i if eq else i + 1
        if value >= len(words):
            raise FactError(f"{name} expects a value")
        found[kind].append((i, value, key.replace("-", "_")))
        i = value + 1
    return found


def _with_value(words: list[str], at: tuple[int, int, str], value: str) -> Op:
    i, v, _ = at
    if v == i:
        return ("replace", i, i, [words[i].partition("=")[0] + "=" + value])
    return ("replace", v, v, [value])


def key_ops(words: list[str], e: Edit) -> list[Op]:
    """The word changes one key edit makes on a vLLM command line, where vLLM reads it."""
    key, found = key_of(e), _occurrences(words)
    if key == "num_speculative_tokens" and found["spec"]:
        at = found["spec"][-1]
        if e.action == "set_key" and e.value is not None:
            return [_with_value(words, at, str(json.loads(e.value)))]
        raise FactError(f"{SPEC_TOKENS} holds the key: {e.action} it by hand")
    if found["dotted"]:
        return _dotted_ops(words, found["dotted"], key, e)
    if not found["json"]:
        raise FactError("the launch has no --speculative-config to edit")
    at = found["json"][-1]
    i, v, _ = at
    text = words[v].partition("=")[2] if v == i else words[v]
    if e.action == "set_key" and e.value is not None:
        new = json_text.set_key(text, key, e.value)
    elif e.action == "remove_key":
        new = json_text.remove_key(text, key)
    elif e.action == "rename_key" and e.value is not None:
        new = json_text.rename_key(text, key, e.value)
    else:
        raise FactError(f"{e.action}: not a key edit")
    return [] if new == text else [_with_value(words, at, new)]


Where = tuple[int, int, str]


def _dotted_ops(words: list[str], dotted: list[Where], key: str, e: Edit) -> list[Op]:
    mine = [d for d in dotted if d[2] == key]
    if e.action == "set_key" and e.value is not None:
        if not mine:
            return [("append", len(words), len(words), [DOTTED + key, e.value])]
        return [_with_value(words, d, e.value) for d in mine]
    if e.action == "remove_key":
        return [("remove", i, v, []) for i, v, _ in mine]
    if e.action == "rename_key" and e.value is not None:
        if any(d[2] == e.value for d in dotted):
            raise FactError(f"--speculative-config gives both {key!r} and {e.value!r}")
        out: list[Op] = []
        for i, _, _ in mine:
            _, eq, inline = words[i].partition("=")
            out.append(("replace", i, i, [DOTTED + e.value + eq + inline]))
        return out
    raise FactError(f"{e.action}: not a key edit")


def edit_vllm_argv(argv: list[str], edits: list[Edit]) -> list[str]:
    """The new vLLM command line: `argv` with the key edits of `edits` made, in order
    (variables are not words of the command: they change nothing here)."""
    out = list(argv)
    for e in edits:
        if e.action == "set_env":
            continue
        for what, i, j, new in sorted(key_ops(out, e), key=lambda op: -op[1]):
            if what == "append":
                out += new
            else:
                out[i : j + 1] = new
    return out


def proved_vllm_argv(argv: list[str], edits: list[Edit]) -> list[str]:
    """`argv` with the key edits made (edit_vllm_argv), proved by vLLM's own reading: the
    `--speculative-config` object it reads must be the planned one, else FactError. For a
    command that is an argv with no file around it (an inventory's list entry, a `docker
    run` container's Entrypoint + Cmd): no quoting, word for word."""
    new_argv = edit_vllm_argv(list(argv), edits)
    planned = planned_object(speculative_object(list(argv)), edits)
    if speculative_object(new_argv) != planned:
        raise FactError("refused: vLLM would read another --speculative-config")
    return new_argv


def planned_object(before: dict[str, Any], edits: list[Edit]) -> dict[str, Any]:
    """The `--speculative-config` object the key edits promise."""
    out = dict(before)
    for e in edits:
        if e.action == "set_env":
            continue
        key = key_of(e)
        if e.action == "set_key" and e.value is not None:
            out[key] = json.loads(e.value)
        elif e.action == "remove_key":
            out.pop(key, None)
        elif e.action == "rename_key" and e.value is not None and key in out:
            out[e.value] = out.pop(key)
    return out


# -- quoting ----------------------------------------------------------------------------------

_SINGLE = re.compile(r"'[^']*'")
_DOUBLE = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)


def requote(raw: str, word: str, systemd: bool) -> str:
    """`word` spelt for the file in the quoting `raw` (the old word's bytes) used: single
    quotes stay single, double quotes stay double with `\\ " $ \\`` escaped; otherwise the
    runner's own quoting. systemd would expand `$` and `%`, so a word with them is refused."""
    if systemd and re.search(r"[$%\n\r]", word):
        raise FactError(f"cannot write {word[:60]!r} into ExecStart= safely; edit it by hand")
    if _SINGLE.fullmatch(raw) and "'" not in word and (not systemd or "\\" not in word):
        return f"'{word}'"
    if _DOUBLE.fullmatch(raw):
        special = r'([\\"])' if systemd else r'([\\"$`])'
        return '"' + re.sub(special, r"\\\1", word) + '"'
    if systemd:
        return wd.quote_systemd(word) if '"' not in word else f"'{word}'"
    return wd.quote_shell(word)


# -- the launch command -----------------------------------------------------------------------


def _ops_on_text(text: str, r: wd.Reading, ops: list[Op], systemd: bool) -> str:
    """The ops of one edit made on the file's bytes, the last word first."""
    for what, i, j, new in sorted(ops, key=lambda op: -op[1]):
        if what == "append":
            text = wd.append_words(text, r, " ".join(requote("", w, systemd) for w in new))
        elif what == "remove":
            text = wd.remove_words(text, r, i, j)
        else:
            s, e = r.spans[i]
            text = wd.replace_word(text, r, i, requote(text[s:e], new[0], systemd))
    return text


# -- the variable -----------------------------------------------------------------------------


def _assignments(cmds: list[Command], at: int, name: str) -> list[tuple[int, int]]:
    """(command, word) of every assignment of `name` that reaches the launch: `export`
    words, plain assignments, and the launch command's own prefix."""
    found = []
    for n, c in enumerate(cmds[: at + 1]):
        if n == at:
            positions = range(len(c.words) - len(launch_words(c).words))
        elif c.words[:1] == ["export"]:
            positions = range(1, len(c.words))
        elif all(re.match(r"[A-Za-z_]\w*=", w) for w in c.words):
            positions = range(len(c.words))
        else:
            continue
        found += [(n, k) for k in positions if c.words[k].startswith(name + "=")]
    return found


def _script_env(text: str, name: str, value: str) -> str:
    cmds, at = script_commands(text, Env(), runs_vllm)
    if at is None:
        raise FactError("no vLLM server command found in the launch script")
    spots = _assignments(cmds, at, name)
    if not spots:
        raise FactError(f"the script does not assign {name} itself; set it by hand")
    for n, k in sorted(spots, key=lambda nk: -cmds[nk[0]].spans[nk[1]][0]):
        s, e = cmds[n].spans[k]
        if not text[s:e].startswith(name + "="):
            raise FactError(f"{name} is not assigned literally; edit it by hand")
        text = text[: s + len(name) + 1] + wd.quote_shell(value) + text[e:]
    return text


def _planned_commands(text: str, edits: list[Edit], launch: list[str]) -> list[list[str]]:
    """Every command's words as the plan promises them: the assignments set, the launch
    command's words `launch` (after its prefix)."""
    cmds, at = script_commands(text, Env(), runs_vllm)
    assert at is not None
    out = [list(c.words) for c in cmds]
    for e in edits:
        if e.action == "set_env" and e.value is not None:
            for n, k in _assignments(cmds, at, e.flag):
                out[n][k] = f"{e.flag}={e.value}"
    prefix = len(cmds[at].words) - len(launch_words(cmds[at]).words)
    out[at] = out[at][:prefix] + launch
    return out


_ENV_VALUE = r"(?<![^\s\"']){name}=([^\s\"'\\]*)"


def _unit_env(text: str, name: str, value: str) -> str:
    spots = []
    for d in directives(text):
        if d.key != "Environment":
            continue
        for m in re.finditer(_ENV_VALUE.format(name=re.escape(name)), d.value):
            s, e = m.span(1)
            start = d.offsets[s - 1] + 1
            end = d.offsets[e - 1] + 1 if e > s else start
            if end - start != e - s:
                raise FactError(f"{name} is split across lines in Environment=; edit it by hand")
            spots.append((start, end))
    if not spots:
        raise FactError(f"the unit sets no {name} in Environment=; set it by hand")
    for start, end in sorted(spots, reverse=True):
        text = text[:start] + value + text[end:]
    return text


def _planned_directive(item: object, edits: list[Edit]) -> object:
    """A directive (section, key, value) of the unit as the plan promises it."""
    if not (isinstance(item, tuple) and len(item) == 3 and item[1] == "Environment"):
        return item
    section, key, value = str(item[0]), str(item[1]), str(item[2])
    for e in edits:
        if e.action == "set_env" and e.value is not None:
            pattern = _ENV_VALUE.format(name=re.escape(e.flag))
            value = re.sub(pattern, f"{e.flag}={e.value}".replace("\\", "\\\\"), value)
    return (section, key, value)


# -- the whole file ---------------------------------------------------------------------------


def edit_vllm_text(text: str, kind: str, edits: list[Edit]) -> str:
    """A vLLM launch script (`kind` "script") or systemd unit ("systemd") with `edits` made,
    proved by reading it back; FactError (nothing written) when the proof fails."""
    systemd = kind == "systemd"
    read: Callable[[str], wd.Reading] = partial(
        wd.read_unit if systemd else wd.read_script, runs=runs_vllm
    )
    before = read(text)
    out = text
    for e in edits:
        if e.action == "set_env" and e.value is not None:
            out = (_unit_env if systemd else _script_env)(out, e.flag, e.value)
        else:
            out = _ops_on_text(out, read(out), key_ops(read(out).words, e), systemd)
    _prove(text, out, kind, edits, before)
    return out


def _prove(text: str, out: str, kind: str, edits: list[Edit], before: wd.Reading) -> None:
    """The edited file read back: the planned command, the rest as planned, and vLLM's own
    reading of the object and the variable."""
    systemd = kind == "systemd"
    try:
        after = (wd.read_unit if systemd else wd.read_script)(out, runs=runs_vllm)
        promised = edit_vllm_argv(before.words, edits)
        if after.words != promised:
            raise FactError(
                f"refused: the edited file would not run the planned command "
                f"({first_difference(after.words, promised)}); edit it by hand"
            )
        if systemd:
            others_ok = after.others == [_planned_directive(o, edits) for o in before.others]
        else:
            got = [c.words for c in script_commands(out, Env(), runs_vllm)[0]]
            others_ok = got == _planned_commands(text, edits, promised)
        if not others_ok:
            raise FactError("refused: the edit would change another line of the file")
        _same_reading(text, out, systemd, edits, before.words)
    except FactError as err:
        raise FactError(str(err) if "refused" in str(err) else f"refused: {err}") from None


def _lax(config: dict[str, Any]) -> dict[str, Any]:
    """Integers as their text: `--spec-tokens 15` gives "15", the JSON 15, and pydantic's lax
    mode, as vLLM validates the object, takes both."""
    return {
        k: str(v) if isinstance(v, int | str) and not isinstance(v, bool) else v
        for k, v in config.items()
    }


def _same_reading(text: str, out: str, systemd: bool, edits: list[Edit], words: list[str]) -> None:
    """vLLM's reading of the new file against the old one's: the object and the variables
    as planned, every other field the same."""
    parse = parse_vllm_systemd_unit if systemd else parse_vllm_script
    old = parse(text.encode(), source="launch")
    new = parse(out.encode(), source="launch")
    after = (wd.read_unit if systemd else wd.read_script)(out, runs=runs_vllm).words
    if _lax(speculative_object(after)) != _lax(planned_object(speculative_object(words), edits)):
        raise FactError("refused: vLLM would read another --speculative-config")
    env = dict(old.environ)
    env.update({e.flag: e.value for e in edits if e.action == "set_env" and e.value is not None})
    if new.environ != env:
        raise FactError("refused: the server would not start with the planned environment")
    # Lines move, and the options list follows the words (already proved equal to the plan).
    same = {
        "speculative": new.speculative,
        "environ": new.environ,
        "flag_lines": new.flag_lines,
        "options": new.options,
        "option_lines": new.option_lines,
    }
    if old.model_copy(update=same) != new:
        raise FactError("refused: vLLM would read another launch")


# -- a compose service ------------------------------------------------------------------------


def compose_argv(text: str, service: str | None = None) -> tuple[str, list[str]]:
    """(name, `entrypoint` + `command` words) of the compose service that runs vLLM's
    server (the named one, else the first), as facts/vllm_launch.parse_vllm_compose reads it."""
    _, services = compose_services(text.encode(), service)
    for name, _svc, argv in services:
        if runs_vllm(argv):
            return name, argv
    raise FactError("no compose service runs `vllm serve`")


def edit_vllm_compose(text: str, edits: list[Edit], service: str | None = None) -> str:
    """A compose file whose vLLM service's `command:` gets the key edits (the YAML node edit
    of fix/compose_edits.py), proved by vLLM's own reading of the result. A variable is not
    edited here (the plan leaves it to the user: `environment:` may be a list, a mapping or
    an env_file)."""
    if any(e.action == "set_env" for e in edits):
        raise FactError("refused: a compose service's environment is not edited; set it by hand")
    name, argv = compose_argv(text, service)

    def plan(command: list[str]) -> list[str]:
        entry = argv[: len(argv) - len(command)]
        new = edit_vllm_argv(argv, edits)
        if argv[len(entry) :] != command or new[: len(entry)] != entry:
            raise FactError("refused: the edit would change the service's entrypoint")
        return new[len(entry) :]

    out = edit_command(text, plan, name, runs_vllm)
    try:
        after = compose_argv(out, name)[1]
        old = parse_vllm_compose(text.encode(), source="launch", service=name)
        new = parse_vllm_compose(out.encode(), source="launch", service=name)
    except FactError as err:
        raise FactError(f"refused: {err}") from None
    if _lax(speculative_object(after)) != _lax(planned_object(speculative_object(argv), edits)):
        raise FactError("refused: vLLM would read another --speculative-config")
    same = {
        "speculative": new.speculative,
        "flag_lines": new.flag_lines,
        "options": new.options,
        "option_lines": new.option_lines,
    }
    if old.model_copy(update=same) != new:
        raise FactError("refused: vLLM would read another launch")
    return out
