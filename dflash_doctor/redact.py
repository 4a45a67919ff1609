"""Keep secrets out of every report: command lines, environment strings and log lines."""

from __future__ import annotations

import re

REDACTED = "***"

# "token" only as a whole word part (HF_TOKEN, --token, access_token), never tokens/tokenizer:
# SGLang has many harmless *_tokens settings.
_SECRET_WORDS = (
    r"(?:api[-_]?key|secret|passw(?:or)?d|credential|private[-_]?key"
    r"|(?<![A-Za-z])token(?![A-Za-z_])|(?<![A-Za-z])auth(?![A-Za-z]))"
)
# Names that look secret by the rule above but hold public values.
_NOT_SECRET = {"mask_token"}
_SECRET_FLAG = re.compile(rf"^--?[A-Za-z0-9_-]*{_SECRET_WORDS}[A-Za-z0-9_-]*$", re.IGNORECASE)
_SECRET_ASSIGN = re.compile(
    rf"^(--?[A-Za-z0-9_-]*{_SECRET_WORDS}[A-Za-z0-9_-]*=|[A-Za-z0-9_]*{_SECRET_WORDS}[A-Za-z0-9_]*=)(.+)$",
    re.IGNORECASE,
)
# Inside free text (log lines, server_args dumps): key='value', key="value", key=value, KEY: value.
_TEXT_SECRET = re.compile(
    rf"""(\b[A-Za-z0-9_]*{_SECRET_WORDS}[A-Za-z0-9_]*['"]?\s*[=:]\s*)('[^']*'|"[^"]*"|[^\s,)}}]+)""",
    re.IGNORECASE,
)
_BEARER = re.compile(r"(\bBearer\s+)[A-Za-z0-9._~+/=-]+", re.IGNORECASE)
# Well-known token shapes, wherever they appear.
_TOKEN_SHAPES = re.compile(
    r"\b(?:hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,})"
)


def redact_argv(argv: list[str]) -> list[str]:
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        m = _SECRET_ASSIGN.match(arg)
        if m:
            out.append(m.group(1) + REDACTED)
            continue
        if _SECRET_FLAG.match(arg):
            hide_next = True
        out.append(_TOKEN_SHAPES.sub(REDACTED, arg))
    return out


def _keep_none(m: re.Match[str]) -> str:
    value = m.group(2)
    name = m.group(1).rstrip("=: '\"").lower()
    if value in ("None", "null", "''", '""') or name in _NOT_SECRET:
        return m.group(0)
    return m.group(1) + REDACTED


def redact_text(text: str) -> str:
    text = _TEXT_SECRET.sub(_keep_none, text)
    text = _BEARER.sub(lambda m: m.group(1) + REDACTED, text)
    return _TOKEN_SHAPES.sub(REDACTED, text)
