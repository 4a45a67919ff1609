"""Edit a shell script's or a systemd unit's launch command word by word, then prove it.

The file is read through a model of its grammar (facts/shell.py for bash words: quotes,
backslash continuations, comments, `=` forms, variables; facts/systemd_unit.py for
`ExecStart=`: continuations, comment lines inside them, CRLF): every word of the launch
command knows the bytes of the file it came from. An edit replaces, inserts or deletes those
bytes only, so a continuation backslash, a comment or a quote elsewhere is never touched.

Every result is read back the same way and must give exactly the argv the plan promised
(`edit_argv` of the words read before) with every other command or directive unchanged;
otherwise the edit is refused with one line and nothing is written. A layout the model cannot
stand behind (a flag inside a variable holding several words, a CRLF shell script, a value
systemd would expand) is refused the same way.
"""

from __future__ import annotations

import io
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass

from dflash_doctor.errors import FactError
from dflash_doctor.facts.launch import runs_sglang
from dflash_doctor.facts.shell import (
    Env,
    launch_words,
    run_script,
    script_commands,
)
from dflash_doctor.facts.systemd_unit import Directive, directives, exec_start
from dflash_doctor.facts.vllm_launch import runs_vllm

Span = tuple[int, int]
Runs = Callable[[list[str]], bool]
# The server command each `runs` test finds, in refusals.
_SERVER: dict[Runs, str] = {runs_sglang: "sglang.launch_server", runs_vllm: "vLLM server"}
_SYSTEMD_SAFE = re.compile(r"[\w@+=:,./-]+")
_SHELL_ESCAPES_CR = "bash reads a backslash before CR as an escaped CR, not a continuation"


@dataclass(frozen=True)
class Reading:
    """A launch file as its runner reads it: the launch command's words (a lost expansion
    keeps its NUL-marked name, which no literal can spell: an edit that turned `$W` into the
    text `${W}` would not compare equal), the file bytes each came from, and everything else
    the file says."""

    words: list[str]
    spans: list[Span]
    others: list[object]
    eol: str


def _eol(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def read_script(text: str, runs: Runs = runs_sglang) -> Reading:
    """A shell script read as bash would split it (sourced files are not read: their
    variables stay `${NAME}` on both sides of a comparison); `runs`: which command is the
    server's (SGLang's by default, vLLM's for a vLLM launch)."""
    if "\r" in text:
        raise FactError(f"the script has CRLF line ends ({_SHELL_ESCAPES_CR}); fix it by hand")
    cmds, at = script_commands(text, Env(), runs)
    if at is None:
        raise FactError(f"no {_SERVER.get(runs, 'server')} command found in the launch script")
    launch = launch_words(cmds[at])
    others: list[object] = [c.words for c in cmds]
    others[at] = None
    return Reading(launch.words, launch.spans, others, "\n")


def read_unit(text: str, runs: Runs = runs_sglang) -> Reading:
    """A systemd unit's last `ExecStart=`, read with systemd's line rules, its command split
    into words as facts/launch.py splits it; `others`: every other directive."""
    found = exec_start(text)
    if found is None:
        raise FactError("no ExecStart= line in the systemd unit")
    d, prefix = found
    command = d.value[prefix:]
    if "`" in command or "$(" in command:
        raise FactError("ExecStart= holds shell syntax systemd does not run; edit it by hand")
    cmd = run_script(command, Env(), read=None, is_sglang=runs)
    if cmd is None:
        raise FactError(f"ExecStart= does not run {_SERVER.get(runs, 'server')}")
    offsets = d.offsets[prefix:]
    spans = [(offsets[s], offsets[e - 1] + 1) for s, e in cmd.spans]
    others: list[object] = [(x.section, x.key, x.value) for x in _directives_but(text, d.first)]
    return Reading(cmd.words, spans, others, _eol(text))


def read_inline(text: str) -> Reading:
    """A one-line command as `shlex.split` reads it (an inventory's `launch:` string): every
    word with the characters it came from, so an edit touches those only (issue 22 item 10:
    the flags around it, ones SGLang does not know included, keep their spelling)."""
    stream = io.StringIO(text)
    lex = shlex.shlex(stream, posix=True)
    lex.whitespace_split, lex.commenters = True, ""
    words: list[str] = []
    spans: list[Span] = []
    at = 0
    try:
        while (word := lex.get_token()) is not None:
            while at < len(text) and text[at] in lex.whitespace:
                at += 1
            end = stream.tell()
            if end > at and end <= len(text) and text[end - 1] in lex.whitespace:
                end -= 1  # the blank that ended the word was read with it
            words.append(word)
            spans.append((at, end))
            at = end
    except ValueError as e:
        raise FactError(f"launch: {e}") from None
    if not words:
        raise FactError("launch: the command is empty")
    return Reading(words, spans, [], "\n")


def _directives_but(text: str, first: int) -> list[Directive]:
    """Every directive but the one starting on line `first`."""
    return [d for d in directives(text) if d.first != first]


def locate(words: list[str], flag: str) -> int | None:
    """The first word naming `flag` (`--flag` or `--flag=...`), as fix.edits.edit_argv finds it."""
    for i, w in enumerate(words):
        if w == flag or w.startswith(flag + "="):
            return i
    return None


def _own_span(r: Reading, i: int) -> Span:
    """Word i's bytes, refused when it shares them with another word (a variable that
    expanded to several words: changing it would change them all)."""
    span = r.spans[i]
    if sum(1 for s in r.spans if s[0] == span[0]) > 1 or span[1] <= span[0]:
        raise FactError(f"{r.words[i]!r} comes from a variable holding several words")
    return span


def _line_bounds(text: str, start: int, end: int) -> tuple[int, int]:
    """Where the line holding `start` starts and where the line holding `end` ends (its
    line break's index, or the text's end)."""
    ls = text.rfind("\n", 0, start) + 1
    le = text.find("\n", end)
    return ls, len(text) if le < 0 else le


_ALONE_AFTER = re.compile(r"[ \t]*(\\?)\r?")


def _delete_word(text: str, span: Span) -> tuple[str, bool]:
    """The text without one word; True when the word stood alone on its line without a
    continuation after it (the command ended there: its new last line must end it)."""
    s, e = span
    ls, le = _line_bounds(text, s, e)
    before, after = text[ls:s], text[e:le]
    alone = _ALONE_AFTER.fullmatch(after)
    if not before.strip(" \t") and alone:
        drop_to = le + 1 if le < len(text) else le
        if drop_to == le and ls > 0:
            ls -= 1  # the file's last line: drop the break before it instead
            if text[ls - 1 : ls] == "\r":
                ls -= 1
        return text[:ls] + text[drop_to:], not alone.group(1)
    if before.strip(" \t"):
        return text[: s - (len(before) - len(before.rstrip(" \t")))] + text[e:], False
    return text[:s] + text[e + len(after) - len(after.lstrip(" \t")) :], False


def _end_command_at(text: str, end: int) -> str:
    """Drop the continuation backslash after the word ending at `end`: the command ends here."""
    _, le = _line_bounds(text, end, end)
    m = re.fullmatch(r"([ \t]*\\)(\r?)", text[end:le])
    return text[:end] + (m.group(2) + text[le:] if m else text[end:])


def remove_words(text: str, r: Reading, i: int, j: int) -> str:
    """Delete words i..j (inclusive) of the launch command, last first."""
    spans = [_own_span(r, k) for k in range(i, j + 1)]
    ended = False
    for span in reversed(spans):
        text, alone_end = _delete_word(text, span)
        ended = ended or alone_end
    if j == len(r.words) - 1 and ended and i > 0:
        text = _end_command_at(text, r.spans[i - 1][1])
    return text


def replace_word(text: str, r: Reading, i: int, new: str) -> str:
    """Word i becomes `new` (already quoted for the file's runner)."""
    s, e = _own_span(r, i)
    return text[:s] + new + text[e:]


def insert_after(text: str, r: Reading, i: int, new: str) -> str:
    """`new` (quoted words) right after word i, on its line."""
    e = r.spans[i][1]
    return text[:e] + " " + new + text[e:]


def append_words(text: str, r: Reading, new: str) -> str:
    """`new` at the end of the command: on a continuation line of its own, indented like the
    last one, when the command spans lines; on the same line otherwise."""
    first_s, last_e = r.spans[0][0], r.spans[-1][1]
    last_s = r.spans[-1][0]
    ls, _ = _line_bounds(text, last_s, last_s)
    if "\n" not in text[first_s:last_e]:
        return text[:last_e] + " " + new + text[last_e:]
    indent = re.match(r"[ \t]*", text[ls:]).group(0)  # type: ignore[union-attr]
    return text[:last_e] + " \\" + r.eol + (indent or "  ") + new + text[last_e:]


Quote = Callable[[str], str]
Reader = Callable[[str], Reading]


def quote_systemd(word: str) -> str:
    """A word as `ExecStart=` must spell it; refused when systemd would expand or unescape it
    (`$`, `%`, backslashes, quotes)."""
    if _SYSTEMD_SAFE.fullmatch(word):
        return word
    if re.fullmatch(r"[^$%\\'\"\n\r]*", word):
        return f"'{word}'"
    raise FactError(f"cannot write {word!r} into ExecStart= safely; edit it by hand")


def rename_flag(text: str, r: Reading, i: int, old: str, new: str) -> str:
    """`--old=value` becomes `--new=value`, the value's bytes (a variable, quotes) kept."""
    s, _ = _own_span(r, i)
    if text[s : s + len(old) + 1] != old + "=":
        raise FactError(f"{old} is not written literally; edit it by hand")
    return text[:s] + new + text[s + len(old) :]


def quote_shell(word: str) -> str:
    """A word as bash must spell it."""
    return shlex.quote(word)
