"""A systemd unit file read as systemd reads it: directives with their continuations.

systemd.syntax(7): a line ending in a backslash continues on the next line, the backslash
becoming a space; comment lines (first non-blank `#` or `;`) inside a continuation are
skipped, so the directive goes on after them; a blank line ends it. Line ends are `\\n` or
`\\r\\n`. Each directive keeps, for every character of its value, where it stands in the
file's text, so an edit made on the value lands on the right bytes of the file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_LINE = re.compile(r"[^\n]*(?:\n|$)")
COMMENTS = "#;"
CONTINUED = -1  # the offset of the space a continuation backslash became


@dataclass(frozen=True)
class Directive:
    """One `Key=value` of a unit, `value` as systemd reads it."""

    section: str
    key: str
    value: str
    offsets: tuple[int, ...]  # the text index of each character of `value`
    first: int  # 1-based physical lines it spans
    last: int


def _physical(text: str) -> list[tuple[int, str]]:
    """(offset, line without its end) of each physical line."""
    out = []
    for m in _LINE.finditer(text):
        if m.start() == len(text) and m.group(0) == "":
            break
        line = m.group(0).removesuffix("\n").removesuffix("\r")
        out.append((m.start(), line))
    return out


def _continues(line: str) -> bool:
    run = len(line) - len(line.rstrip("\\"))
    return run % 2 == 1


def _logical(text: str) -> list[tuple[int, int, list[tuple[int, str]]]]:
    """(first line, last line, pieces) of each logical line; comment lines inside a
    continuation are dropped, as systemd does."""
    out: list[tuple[int, int, list[tuple[int, str]]]] = []
    pieces: list[tuple[int, str]] = []
    first = 0
    for number, (offset, line) in enumerate(_physical(text), start=1):
        stripped = line.lstrip(" \t")
        if stripped[:1] in tuple(COMMENTS) and stripped:
            continue  # a comment, inside a continuation or not
        if not pieces:
            first = number
        if _continues(line):
            pieces.append((offset, line[:-1] + " "))
            continue
        pieces.append((offset, line))
        out.append((first, number, pieces))
        pieces = []
    if pieces:
        out.append((first, first + len(pieces) - 1, pieces))
    return out


def directives(text: str) -> list[Directive]:
    """Every `Key=value` of the unit, in order, with its section."""
    out: list[Directive] = []
    section = ""
    for first, last, pieces in _logical(text):
        chars: list[str] = []
        offsets: list[int] = []
        for offset, piece in pieces:
            chars.extend(piece)
            offsets.extend(range(offset, offset + len(piece)))
        joined = "".join(chars)
        stripped = joined.strip()
        if stripped.startswith("[") and stripped.endswith("]"):
            section = stripped[1:-1]
            continue
        if "=" not in joined:
            continue
        eq = joined.index("=")
        start = eq + 1
        while start < len(joined) and joined[start] in " \t":
            start += 1
        end = len(joined.rstrip(" \t"))
        end = max(end, start)
        key = joined[:eq].strip()
        value = joined[start:end]
        out.append(Directive(section, key, value, tuple(offsets[start:end]), first, last))
    return out


def exec_start(text: str) -> tuple[Directive, int] | None:
    """The last non-empty `ExecStart=` and how many prefix characters (`-@:+!`) its command
    carries (systemd.service(5), "Command lines")."""
    found = [d for d in directives(text) if d.key == "ExecStart" and d.value.strip()]
    if not found:
        return None
    d = found[-1]
    return d, len(d.value) - len(d.value.lstrip("-@:+!"))
