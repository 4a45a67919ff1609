"""Read a shell launch script the way bash would run it, without running it.

One linear pass over the text splits it into simple commands (quotes, backslashes,
`;` `&&` `||` `|` `&`, redirections, comments, multi-line arrays) and expands parameters
as bash does at that point of the script: `$V`, `${V}`, `${V:-x}`, `${V-x}`, `${V:=x}`,
`${V:+x}`, `${1:-2}`, `${#V}`, `${ARR[@]}`, `"${ARR[@]}"`, `${ARR[n]}`. Assignments,
`export`/`declare`/`local`/`readonly`, `ARR=(...)`, `ARR+=(...)` and `unset` are applied in
order, and `. FILE` / `source FILE` read FILE through the caller's reader (the host's file
reader: never executed) and apply its assignments.

What cannot be known offline (command substitution, an unset variable without a default,
script arguments) becomes the placeholder `${NAME}` in the word, and NAME is reported as
lost; every other value is kept. A line ending in `\\` continues; `\\` followed by a space
escapes the space and ends nothing, as in bash. All work is bounded by the caps below.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from dflash_doctor.errors import FactError

MAX_WORD = 1 << 20
MAX_WORDS = 100_000
MAX_VARS = 10_000
MAX_SOURCED = 16
MAX_DEPTH = 4

LOST = "\x00"  # marks a lost expansion inside a word until the end (NUL never reaches here)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\+?)=(.*)$", re.S)
_NAME_RUN = re.compile(r"[A-Za-z0-9_]*")
_PLAIN = re.compile(r"[^ \t\r\n;&|\\'\"$`<>()]*")  # unquoted characters that mean nothing
_DQ_PLAIN = re.compile(r'[^"\\$`]*')  # a run of characters that mean nothing in double quotes
_PARAM = re.compile(
    r"^(?P<len>#)?(?P<name>[A-Za-z_][A-Za-z0-9_]*|\d+|[@*#?$!-])"
    r"(?:\[(?P<index>[^\]]*)\])?(?:(?P<op>:-|-|:=|=|:\+|\+|:\?|\?)(?P<word>.*))?$",
    re.S,
)
# Commands that mention sglang without running it.
NOT_A_LAUNCH = frozenset(
    [
        "echo",
        "printf",
        "pkill",
        "kill",
        "killall",
        "pgrep",
        "grep",
        "egrep",
        "fgrep",
        "logger",
        "cat",
        "tee",
        "test",
        "[",
        "[[",
        "true",
        "false",
        ":",
        "ps",
        "tail",
        "head",
        "sed",
        "awk",
        "curl",
        "wget",
        "which",
        "type",
        "command",
        "hash",
        "systemctl",
        "journalctl",
        "docker-compose-logs",
        "wait",
        "sleep",
    ]
)
_PREFIX_WORDS = frozenset(
    [
        "exec",
        "nohup",
        "setsid",
        "time",
        "then",
        "do",
        "else",
        "elif",
        "if",
        "while",
        "until",
        "!",
        "{",
        "(",
    ]
)

Reader = Callable[[str], bytes]


@dataclass
class Env:
    """The shell variables a launch script has set so far, and what could not be known."""

    scalars: dict[str, str] = field(default_factory=dict)
    arrays: dict[str, list[str]] = field(default_factory=dict)
    lost: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    sourced: int = 0

    def lose(self, name: str) -> str:
        """Record an expansion whose value cannot be known; the marked text stands in for it."""
        if name not in self.lost:
            self.lost.append(name)
        return f"{LOST}{name}{LOST}"

    def set(self, name: str, value: str) -> None:
        """Set a scalar variable (replacing an array of that name), bounded in number."""
        if len(self.scalars) + len(self.arrays) >= MAX_VARS:
            raise FactError(f"more than {MAX_VARS} shell variables")
        self.arrays.pop(name, None)
        self.scalars[name] = value


@dataclass
class Command:
    """One simple command: its words, the line each starts on, and array assignments."""

    words: list[str]
    lines: list[int]  # the line each word starts on
    first: int
    last: int
    arrays: list[tuple[str, bool, list[str]]] = field(default_factory=list)
    # [start, end) of the source text each word came from (for edits made word by word);
    # two words from one expansion share a start.
    spans: list[tuple[int, int]] = field(default_factory=list)


def shown(name: str) -> str:
    """How a lost expansion reads in the argv and in notes: `${NAME}`, or `$(cmd)` as written."""
    return name if name.startswith(("$(", "`")) else f"${{{name}}}"


def placeholders(word: str) -> str:
    """The word as shown to people: lost expansions as `${NAME}` (or `$(cmd)`)."""
    return re.sub(f"{LOST}([^{LOST}]*){LOST}", lambda m: shown(m.group(1)), word)


class _Words:
    """The words of one simple command as they are scanned, with the line each starts on."""

    def __init__(self, first: int, scanner: _Scanner | None = None) -> None:
        self.words: list[str] = []
        self.lines: list[int] = []
        self.spans: list[tuple[int, int]] = []
        self.scanner = scanner
        self.at = 0  # where the piece being scanned starts: a word opened there starts there
        self.cur_start = 0
        self.arrays: list[tuple[str, bool, list[str]]] = []
        # The word being built, as pieces joined when read: `+=` on an attribute copies the
        # whole string each time, which made a 500 KB quoted word cost a minute of CPU.
        self._parts: list[str] | None = None
        self._size = 0
        # Whether the open word is `NAME=`/`NAME+=` (bash splits no value there), decided on
        # the characters as they arrive; None while the word is still all name characters.
        self._assign: bool | None = None
        self._names = 0
        self._plus = False
        self.cur_line = first
        self.first = first  # where the command starts when it has no word yet

    def any(self) -> bool:
        """Whether the command has a word or an array assignment."""
        return bool(self.words or self.arrays)

    def command(self, last: int) -> Command:
        """The command scanned so far, ending on line `last`."""
        first = self.lines[0] if self.lines else self.first
        return Command(self.words, self.lines, first, last, self.arrays, self.spans)

    def end_word(self) -> None:
        """Close the word being built, bounded in length and number."""
        word = self.cur
        if word is not None:
            if len(self.words) >= MAX_WORDS:
                raise FactError("launch command too large")
            self.words.append(word)
            self.lines.append(self.cur_line)
            end = self.scanner.i if self.scanner is not None else self.cur_start
            self.spans.append((self.cur_start, end))
            self.drop_word()

    @property
    def cur(self) -> str | None:
        """The word being built (None when none is open)."""
        parts = self._parts
        if parts is None:
            return None
        if len(parts) != 1:
            parts[:] = ["".join(parts)]
        return parts[0]

    def drop_word(self) -> None:
        """Forget the word being built (a redirection's digit, an array assignment's name)."""
        self._parts = None

    def is_open(self) -> bool:
        """Whether a word is being built."""
        return self._parts is not None

    def is_assignment(self) -> bool:
        """Whether the open word is `NAME=...` or `NAME+=...` so far."""
        return self._parts is not None and self._assign is True

    def add(self, text: str, line: int) -> None:
        """Append text to the word being built, starting one on `line` if none is open."""
        if self._parts is None:
            self.cur_line = line
            self.cur_start = self.at
            self._parts, self._size = [], 0
            self._assign, self._names, self._plus = None, 0, False
        self._size += len(text)
        if self._size > MAX_WORD:
            raise FactError("launch command too large")
        if self._assign is None and text:
            self._decide_assignment(text)
        self._parts.append(text)

    def _decide_assignment(self, text: str) -> None:
        """Advance the `NAME=` decision over `text`, in time linear in `text`."""
        if self._plus:
            self._assign = text[0] == "="
            return
        run = _NAME_RUN.match(text)
        k = run.end() if run else 0
        if self._names == 0 and k and text[0].isdigit():
            self._assign = False
            return
        self._names += k
        if k == len(text):
            return
        c = text[k]
        if self._names == 0:
            self._assign = False
        elif c == "=":
            self._assign = True
        elif c == "+" and k + 1 == len(text):
            self._plus = True
        else:
            self._assign = c == "+" and text[k + 1] == "="

    def add_fields(self, value: str | list[str], quoted: bool, line: int) -> None:
        """An expansion's value: an array's items are words; unquoted text is split."""
        if isinstance(value, list):
            if not value:
                return
            self.add(value[0], line)
            for item in value[1:]:
                self.end_word()
                self.add(item, line)
            return
        if quoted or LOST in value or self.is_assignment():
            self.add(value, line)  # quoted, or an assignment's value: no word splitting in bash
            return
        parts = value.split()
        if not parts:
            return
        if value[:1].isspace():
            self.end_word()
        self.add(parts[0], line)
        for part in parts[1:]:
            self.end_word()
            self.add(part, line)
        if value[-1:].isspace():
            self.end_word()


class _Scanner:
    """Splits bash text into simple commands, expanding the variables in `env`."""

    def __init__(self, text: str, env: Env) -> None:
        self.t = text
        self.n = len(text)
        self.i = 0
        self.line = 1
        self.env = env

    # -- expansions ----------------------------------------------------------------------

    def _braced_end(self, start: int) -> int:
        """Index of the `}` closing the `${` whose content starts at `start`."""
        depth, j = 1, start
        while j < self.n:
            c = self.t[j]
            if c == "\\":
                j += 2
                continue
            if c == "$" and j + 1 < self.n and self.t[j + 1] == "{":
                depth += 1
                j += 2
                continue
            if c == "}":
                depth -= 1
                if depth == 0:
                    return j
            if c == "\n":
                break
            j += 1
        raise FactError(f"line {self.line}: cannot split the command: unterminated ${{")

    def _paren_end(self, start: int) -> int:
        """The index of the `)` that closes a `$(` whose body starts at `start`."""
        depth, j = 1, start
        while j < self.n:
            c = self.t[j]
            if c == "\\":
                j += 2
                continue
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
                if depth == 0:
                    return j
            elif c == "\n":
                self.line += 1
            j += 1
        raise FactError(f"line {self.line}: cannot split the command: unterminated $(")

    def _param(self, content: str) -> list[str] | str:
        """One `${...}`: a string, or a list of fields for `[@]`/`[*]` of an array."""
        m = _PARAM.match(content)
        if m is None:
            return self.env.lose(content[:40] or "?")
        name, index, op, word = m.group("name"), m.group("index"), m.group("op"), m.group("word")
        value: str | list[str] | None
        if name.isdigit() or name in "@*#?$!-":
            value = None if name not in "#" else "0"  # script arguments are not known offline
        elif name in self.env.arrays:
            items = self.env.arrays[name]
            if index in ("@", "*"):
                value = list(items)
            elif index is None or index.strip() == "0":
                value = items[0] if items else ""
            else:
                idx = index.strip()
                value = items[int(idx)] if idx.isdigit() and int(idx) < len(items) else None
        else:
            value = self.env.scalars.get(name)
            if value is not None and index in ("@", "*"):
                value = [value]
        if m.group("len"):
            if value is None:
                return self.env.lose(name)
            return str(len(value))
        if op is None:
            return value if value is not None else self.env.lose(name)
        empty = value is None or (op.startswith(":") and value in ("", []))
        if op in (":-", "-", ":=", "="):
            if not empty:
                return value if value is not None else ""
            default = self.expand_text(word or "")
            if op in (":=", "=") and _NAME.fullmatch(name):
                self.env.set(name, default)
            return default
        if op in (":+", "+"):
            return "" if empty else self.expand_text(word or "")
        return value if not empty and value is not None else self.env.lose(name)

    def expand_text(self, text: str) -> str:
        """Expand a `${V:-word}` word (quotes removed, no word splitting)."""
        sub = _Scanner(text, self.env)
        out: list[str] = []
        while sub.i < sub.n:
            c = sub.t[sub.i]
            if c == "$":
                v = sub._dollar()
                out.append(" ".join(v) if isinstance(v, list) else v)
            elif c == "'":
                end = sub.t.find("'", sub.i + 1)
                end = sub.n if end < 0 else end
                out.append(sub.t[sub.i + 1 : end])
                sub.i = end + 1
            elif c == '"':
                sub.i += 1
            elif c == "\\" and sub.i + 1 < sub.n:
                out.append(sub.t[sub.i + 1])
                sub.i += 2
            else:
                out.append(c)
                sub.i += 1
        return "".join(out)

    def _dollar(self) -> str | list[str]:
        """At a `$`: consume the expansion and return its value."""
        t, i = self.t, self.i
        nxt = t[i + 1] if i + 1 < self.n else ""
        if nxt == "{":
            end = self._braced_end(i + 2)
            self.i = end + 1
            return self._param(t[i + 2 : end])
        if nxt == "(":
            end = self._paren_end(i + 2)
            self.i = end + 1
            return self.env.lose("$(" + t[i + 2 : end][:30] + ")")
        m = _NAME.match(t, i + 1)
        if m is not None:
            self.i = m.end()
            return self._param(m.group(0))
        if nxt and (nxt.isdigit() or nxt in "@*#?$!-"):
            self.i = i + 2
            return self._param(nxt)
        self.i = i + 1
        return "$"

    # -- words and commands ----------------------------------------------------------------

    def commands(self) -> list[Command] | None:
        """The next simple command (as a one-item list), or None at the end of the text."""
        w = _Words(self.line, self)
        while self.i < self.n:
            command = self._step(w)
            if command is not None:
                return [command]
        w.end_word()
        return [w.command(self.line)] if w.any() else None

    def _step(self, w: _Words) -> Command | None:
        """Scan one piece of the text into `w`; the command when it ended there."""
        t, c = self.t, self.t[self.i]
        w.at = self.i
        if c == "\n":
            return self._end_line(w)
        if c in ";&|":
            return self._end_list(w)
        if c == "\\":
            self._backslash(w)
        elif c in " \t\r":
            w.end_word()
            self.i += 1
        elif c == "#" and not w.is_open():
            nl = t.find("\n", self.i)
            self.i = self.n if nl < 0 else nl
        elif c == "'":
            self._single_quoted(w)
        elif c == '"':
            self._double_quoted(w)
        elif c == "$":
            self._dollar_word(w)
        elif c == "`":
            self._backtick(w)
        elif c in "<>":
            self._redirect(w)
        elif c == "(" and self._array_assignment(w):
            pass
        elif c in "()":
            w.end_word()
            self.i += 1
        else:  # a plain character and the plain run after it (inside a word `#` is plain)
            end = _PLAIN.match(t, self.i + 1).end()  # type: ignore[union-attr]
            w.add(t[self.i : end], self.line)
            self.i = end
        return None

    def _end_line(self, w: _Words) -> Command | None:
        """A newline ends a command that has words; a blank line moves the start."""
        w.end_word()
        self.i += 1
        self.line += 1
        if w.any():
            return w.command(self.line - 1)
        w.first = self.line
        return None

    def _end_list(self, w: _Words) -> Command | None:
        """`;`, `&`, `|` and their doubles end a simple command."""
        w.end_word()
        while self.i < self.n and self.t[self.i] in ";&|":
            self.i += 1
        if w.any():
            return w.command(self.line)
        w.first = self.line
        return None

    def _backslash(self, w: _Words) -> None:
        """An escaped character is literal; backslash-newline continues the line."""
        t = self.t
        if self.i + 1 < self.n and t[self.i + 1] == "\n":
            self.line += 1  # a line continuation
        elif self.i + 1 < self.n:
            w.add(t[self.i + 1], self.line)
        self.i += 2

    def _single_quoted(self, w: _Words) -> None:
        """Single quotes: the text up to the next quote, literally."""
        t = self.t
        end = t.find("'", self.i + 1)
        if end < 0:
            raise FactError(
                f"line {self.line}: cannot split the command: unterminated single quote"
            )
        w.add(t[self.i + 1 : end], self.line)
        self.line += t.count("\n", self.i, end)
        self.i = end + 1

    def _double_quoted(self, w: _Words) -> None:
        """Double quotes: expansions without word splitting, a few escapes."""
        t = self.t
        w.add("", self.line)
        self.i += 1
        while True:
            if self.i >= self.n:
                raise FactError(
                    f"line {self.line}: cannot split the command: unterminated double quote"
                )
            d = t[self.i]
            if d == '"':
                self.i += 1
                return
            if d == "\\" and self.i + 1 < self.n and t[self.i + 1] in '$`"\\\n':
                if t[self.i + 1] != "\n":
                    w.add(t[self.i + 1], self.line)
                else:
                    self.line += 1
                self.i += 2
            elif d == "$":
                w.add_fields(self._dollar(), True, self.line)
            elif d == "`":
                self._backtick(w)
            else:
                # a lone backslash is itself; the run after it means nothing either
                end = _DQ_PLAIN.match(t, self.i + 1).end()  # type: ignore[union-attr]
                w.add(t[self.i : end], self.line)
                self.line += t.count("\n", self.i, end)
                self.i = end

    def _dollar_word(self, w: _Words) -> None:
        """An unquoted `$`: `$'...'` (ANSI-C quoting) or an expansion, split into fields."""
        t = self.t
        if t.startswith("$'", self.i):
            end = t.find("'", self.i + 2)
            if end < 0:
                raise FactError(f"line {self.line}: cannot split the command: unterminated $'")
            raw = t[self.i + 2 : end]
            w.add(raw.replace("\\n", "\n").replace("\\t", "\t").replace("\\'", "'"), self.line)
            self.i = end + 1
            return
        w.add_fields(self._dollar(), False, self.line)

    def _backtick(self, w: _Words) -> None:
        """A `command substitution`: its output cannot be known, so the value is lost."""
        t = self.t
        end = t.find("`", self.i + 1)
        end = self.n - 1 if end < 0 else end
        w.add(self.env.lose("`" + t[self.i + 1 : end][:30] + "`"), self.line)
        self.i = end + 1

    def _redirect(self, w: _Words) -> None:
        """A redirection and its target are not words of the command."""
        t = self.t
        if w.cur is not None and w.cur.isdigit():
            w.drop_word()  # `2>&1`: the digit is the redirection's, not a word
        w.end_word()
        while self.i < self.n and t[self.i] in "<>&":
            self.i += 1
        while self.i < self.n and t[self.i] in " \t":
            self.i += 1
        while self.i < self.n and t[self.i] not in " \t\n;&|":
            self.i += 1  # the target: dropped

    def _array_assignment(self, w: _Words) -> bool:
        """At `(` right after `NAME=` or `NAME+=`: read the array; False when it is not one."""
        word = w.cur if w.is_assignment() else None
        if word is None or not word.endswith("="):
            return False
        m = _ASSIGN.match(word)
        if not m or m.group(3) != "":
            return False
        w.arrays.append((m.group(1), m.group(2) == "+", self._array()))
        w.drop_word()
        return True

    def _array(self) -> list[str]:
        """The elements of `NAME=( ... )`, the scanner at `(`."""
        self.i += 1
        close = self.t.find(")", self.i)
        if close < 0:
            raise FactError(f"line {self.line}: cannot split the command: unterminated array")
        inner = _Scanner(self.t[self.i : close].replace("\n", " "), self.env)
        self.line += self.t.count("\n", self.i, close)
        self.i = close + 1
        items: list[str] = []
        while (cmds := inner.commands()) is not None:
            items.extend(cmds[0].words)
        return items


def _strip_prefix(words: list[str]) -> list[str]:
    """The words after leading assignments, prefix words and an `env` with its options."""
    i = 0
    while i < len(words) and (words[i] in _PREFIX_WORDS or _ASSIGN.match(words[i])):
        i += 1
    if i < len(words) and words[i] == "env":
        i += 1
        while i < len(words) and (words[i].startswith("-") or _ASSIGN.match(words[i])):
            i += 1
    return words[i:]


def _assign(env: Env, m: re.Match[str]) -> None:
    """`NAME=value` or `NAME+=value`."""
    name, append, value = m.group(1), m.group(2), m.group(3)
    env.set(name, (env.scalars.get(name, "") if append else "") + value)


def _apply(cmd: Command, env: Env, read: Reader | None, depth: int, here: str) -> bool:
    """Apply what the command changes in the shell; True if it is a plain command to judge."""
    for name, append, items in cmd.arrays:
        if len(items) > MAX_WORDS:
            raise FactError("shell array too large")
        base = env.arrays.get(name, []) if append else []
        env.scalars.pop(name, None)
        env.arrays[name] = base + items
    words = cmd.words
    if not words:
        return False
    head = words[0]
    if head in ("export", "declare", "typeset", "local", "readonly"):
        for w in words[1:]:
            m = _ASSIGN.match(w)
            if m:
                env.set(
                    m.group(1), (env.scalars.get(m.group(1), "") if m.group(2) else "") + m.group(3)
                )
        return False
    if head == "unset":
        for w in words[1:]:
            env.scalars.pop(w, None)
            env.arrays.pop(w, None)
        return False
    if head in (".", "source") and len(words) > 1:
        _source(words[1], env, read, depth, here)
        return False
    if all(_ASSIGN.match(w) for w in words):
        for w in words:
            m = _ASSIGN.match(w)
            assert m is not None
            env.set(
                m.group(1), (env.scalars.get(m.group(1), "") if m.group(2) else "") + m.group(3)
            )
        return False
    return True


def _source(path: str, env: Env, read: Reader | None, depth: int, here: str) -> None:
    """Run a sourced file into `env` as bash would, bounded in depth and count."""
    shown = placeholders(path)
    if LOST in path or read is None:
        env.notes.append(f"{shown} is sourced but was not read: variables it sets are unknown")
        return
    if depth >= MAX_DEPTH or env.sourced >= MAX_SOURCED:
        env.notes.append(f"{shown} not read: more than {MAX_SOURCED} sourced files or too deep")
        return
    env.sourced += 1
    # bash resolves a relative path against the working directory, unknown offline: try it
    # as written (from where the tool runs, or the host's root), then beside the sourcing file.
    candidates = [path]
    if not path.startswith("/"):
        candidates.append(posixpath.normpath(posixpath.join(posixpath.dirname(here), path)))
    text = None
    for full in dict.fromkeys(candidates):
        try:
            text = decode(read(full), full)
            break
        except FactError as e:
            error = e
    if text is None:
        env.notes.append(f"{shown} is sourced but could not be read ({error})")
        return
    run_script(text, env, read=read, depth=depth + 1, here=full, want_launch=False)


def decode(data: bytes, what: str, limit: int = 1 << 20) -> str:
    """Launch or sourced file bytes as text: bounded, no NUL bytes, UTF-8, one error line."""
    if len(data) > limit:
        raise FactError(f"{what} is {len(data)} bytes, larger than {limit}")
    if b"\0" in data:
        raise FactError(f"{what} holds binary data (NUL bytes)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FactError(f"{what} is not UTF-8 text (byte {e.start})") from None


def is_launch(words: list[str], is_sglang: Callable[[list[str]], bool]) -> bool:
    """Whether a command (after its prefixes) is an SGLang launch and not echo, pkill etc."""
    rest = _strip_prefix(words)
    if not rest or posixpath.basename(rest[0]) in NOT_A_LAUNCH:
        return False
    return is_sglang(rest)


def run_script(
    text: str,
    env: Env,
    *,
    read: Reader | None,
    depth: int = 0,
    here: str = "",
    want_launch: bool = True,
    is_sglang: Callable[[list[str]], bool] | None = None,
) -> Command | None:
    """Walk the script in order; the first command that runs SGLang (expanded), if wanted."""
    scanner = _Scanner(text, env)
    while (cmds := scanner.commands()) is not None:
        cmd = cmds[0]
        if not _apply(cmd, env, read, depth, here):
            continue
        if want_launch and is_sglang is not None and is_launch(cmd.words, is_sglang):
            return launch_words(cmd)
    return None


def launch_words(cmd: Command) -> Command:
    """The launch command without its leading assignments and prefix words (`exec`, `env`)."""
    prefix = len(cmd.words) - len(_strip_prefix(cmd.words))
    return Command(
        cmd.words[prefix:], cmd.lines[prefix:], cmd.first, cmd.last, [], cmd.spans[prefix:]
    )


def script_commands(
    text: str, env: Env, is_sglang: Callable[[list[str]], bool]
) -> tuple[list[Command], int | None]:
    """Every simple command of the script in order (sourced files not read) and the index
    of the first that runs SGLang: what an edit must keep, and what it edits."""
    scanner = _Scanner(text, env)
    out: list[Command] = []
    launch = None
    while (cmds := scanner.commands()) is not None:
        out.append(cmds[0])
        runs = _apply(cmds[0], env, None, 0, "")
        if runs and launch is None and is_launch(cmds[0].words, is_sglang):
            launch = len(out) - 1
    return out, launch


def read_env_file(text: str, env: Env) -> None:
    """A systemd `EnvironmentFile=` / dotenv file: `KEY=value` lines, shell quoting."""
    run_script(text, env, read=None, want_launch=False)
