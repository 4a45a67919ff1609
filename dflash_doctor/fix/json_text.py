"""Edit one key of a JSON object's text, keeping every other byte of it (its spacing, key
order, the other values as written). Pure.

`--speculative-config '{"method": "dflash", "num_speculative_tokens": 16}'` is such a text
inside a shell word: `fix` changes the one value, never re-serialises the object, so the
diff shows the one number that changed. Keys match as vLLM reads them: dashes as
underscores (vllm/engine/arg_utils.py 0.34.0:2159-2161). A key given twice is refused (which
one wins is json.loads' rule, not one to edit around).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from dflash_doctor.errors import FactError

_WS = " \t\n\r"


@dataclass(frozen=True)
class Member:
    """One `"key": value` of the top-level object: the key as vLLM reads it and the spans of
    the key's string and of the value in the text."""

    key: str
    key_span: tuple[int, int]
    value_span: tuple[int, int]


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WS:
        i += 1
    return i


def _expect(text: str, i: int, ch: str) -> int:
    if text[i : i + 1] != ch:
        raise FactError(f"--speculative-config: expected {ch!r} at character {i + 1}")
    return i + 1


def members(text: str) -> tuple[list[Member], int, int]:
    """The object's members in order, the index after its `{` and the index of its `}`."""
    decoder = json.JSONDecoder()
    i = _expect(text, _skip(text, 0), "{")
    opened = i
    out: list[Member] = []
    i = _skip(text, i)
    if text[i : i + 1] == "}":
        return out, opened, i
    try:
        while True:
            start = _expect(text, i, '"')
            key, i = json.decoder.scanstring(text, start)  # type: ignore[attr-defined]
            key_span = (start - 1, i)
            i = _skip(text, _expect(text, _skip(text, i), ":"))
            _, end = decoder.raw_decode(text, i)
            out.append(Member(str(key).replace("-", "_"), key_span, (i, end)))
            i = _skip(text, end)
            if text[i : i + 1] == "}":
                break
            i = _skip(text, _expect(text, i, ","))
    except (ValueError, RecursionError):
        raise FactError("--speculative-config is not a JSON object") from None
    if text[_skip(text, i + 1) :]:
        raise FactError("--speculative-config has text after its object")
    return out, opened, i


def _only(found: list[Member], key: str) -> Member | None:
    mine = [m for m in found if m.key == key]
    if len(mine) > 1:
        raise FactError(f"--speculative-config gives {key!r} twice; edit it by hand")
    return mine[0] if mine else None


def _separators(text: str) -> tuple[str, str]:
    """The item and key separators the text already uses: compact JSON stays compact,
    `", "` and `": "` otherwise."""
    compact = ("," in text and ", " not in text) or (":" in text and ": " not in text)
    return ("," if compact else ", "), (":" if compact else ": ")


def set_key(text: str, key: str, value: str) -> str:
    """`key` set to the JSON text `value`: its value replaced where it stands, else added
    after the last member."""
    json.loads(value)  # a value that is not JSON never reaches a file
    found, opened, _ = members(text)
    member = _only(found, key)
    if member is not None:
        s, e = member.value_span
        return text[:s] + value + text[e:]
    item, colon = _separators(text)
    new = f"{json.dumps(key)}{colon}{value}"
    if not found:
        return text[:opened] + new + text[opened:]
    end = found[-1].value_span[1]
    return text[:end] + item + new + text[end:]


def remove_key(text: str, key: str) -> str:
    """`key` and its value gone, with the separator that joined it to its neighbour."""
    found, _, _ = members(text)
    member = _only(found, key)
    if member is None:
        return text
    at = found.index(member)
    if at + 1 < len(found):
        return text[: member.key_span[0]] + text[found[at + 1].key_span[0] :]
    if at > 0:
        return text[: found[at - 1].value_span[1]] + text[member.value_span[1] :]
    return text[: member.key_span[0]] + text[member.value_span[1] :]


def rename_key(text: str, key: str, new_key: str) -> str:
    """`key` spelt `new_key`, its value as written; refused when `new_key` is given too."""
    found, _, _ = members(text)
    member = _only(found, key)
    if member is None:
        return text
    if _only(found, new_key) is not None:
        raise FactError(f"--speculative-config gives both {key!r} and {new_key!r}")
    s, e = member.key_span
    return text[:s] + json.dumps(new_key) + text[e:]
