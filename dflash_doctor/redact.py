"""Keep secrets out of every report: command lines, environment strings and log lines.

Only what is displayed is redacted; files are always edited from their unredacted text.
Every pattern here is linear in the length of its input: quantifiers are bounded and names
start only where a word starts, so a hostile 60 KB line costs microseconds, not seconds.
"""

from __future__ import annotations

import re

REDACTED = "***"

# Secret names, by shape, as data: each a regex part matched inside a name (case ignored).
# "token" only as a whole word part (HF_TOKEN, --token, access_token), never tokens/tokenizer:
# SGLang has many harmless *_tokens settings. "pass" only whole (`--db-pass`, DB_PASS), never
# `--enable-forward-pass-metrics`; "session" only as the name's first word (`--session`),
# never `--enable-streaming-session` (SGLang 0.5.23's option names, data/sglang_options.json).
_SECRET_NAME_PARTS = (
    r"api[-_]?key",
    r"secret",
    r"passw(?:or)?d",
    r"pass(?:phrase|wd)?(?![A-Za-z0-9_-])",
    r"credential",
    r"private[-_]?key",
    r"authori[sz]ation",
    r"cookie",
    r"hmac",
    r"signing[-_]?key",
    r"signature",
    r"(?:access|encryption|master|session)[-_]?key",
    r"jwt",
    r"token(?![A-Za-z_])",
    r"auth(?![A-Za-z])",
    r"session(?![A-Za-z0-9_-])",
)
# Parts that must start a word: `pass` in `bypass` or `compass` is no secret.
_WORD_START = {r"pass(?:phrase|wd)?(?![A-Za-z0-9_-])", r"token(?![A-Za-z_])", r"auth(?![A-Za-z])"}
_SECRET_WORDS = (
    "(?:"
    + "|".join(
        (
            r"(?<![A-Za-z0-9_-])"
            if p.startswith("session")
            else r"(?<![A-Za-z])"
            if p in _WORD_START
            else ""
        )
        + p
        for p in _SECRET_NAME_PARTS
    )
    + ")"
)
_SECRET_NAME = re.compile(_SECRET_WORDS, re.IGNORECASE)
# The same rule for the shipped gather bundle, which decides on the host which environment
# values may leave it (on_host/bundle_script.py).
SECRET_WORDS = _SECRET_WORDS
# Names that look secret by the rule above but hold public values.
_NOT_SECRET = {"mask_token"}
_MAX_NAME = 128
_MAX_VALUE = 4096
# A value that is only a variable reference (`$SGLANG_API_KEY`, `"${SGLANG_API_KEY}"`, as a
# launch script or unit writes it) names where the secret is, it is not one: it is shown as
# written. Anything more (`${KEY:-sk-default}`, `$KEY$MORE`, `sk-$KEY`) stays hidden.
_REF = r"\$(?:\{[A-Za-z_][A-Za-z0-9_]{0,64}\}|[A-Za-z_][A-Za-z0-9_]{0,64})"
_REFERENCE = re.compile(rf"""(?:{_REF}|"{_REF}")""")
_REF_VALUE = rf"""(?:"{_REF}"|{_REF}(?=[\s,)}}'"\\]|$))"""
_FLAG = re.compile(rf"--?[A-Za-z0-9_-]{{1,{_MAX_NAME}}}")
_ASSIGN = re.compile(rf"(-{{0,2}}[A-Za-z0-9_-]{{1,{_MAX_NAME}}}=)(.+)", re.DOTALL)
# Inside free text (log lines, server_args dumps, JSON): key='value', key="value",
# key=value, KEY: value, "key": "value". The name starts where a word starts.
# A name holding a secret word: bounded on both sides of the word, so linear.
_NAME = rf"[A-Za-z0-9_.-]{{0,64}}?{_SECRET_WORDS}[A-Za-z0-9_.-]{{0,64}}"
_TEXT_SECRET = re.compile(
    rf"""(?<![A-Za-z0-9_.-])({_NAME}['"]?[ \t]{{0,8}}[=:][ \t]{{0,8}})"""
    rf"""({_REF_VALUE}|'[^'\n]{{0,{_MAX_VALUE}}}'|"[^"\n]{{0,{_MAX_VALUE}}}"|[^\s,)}}'"]{{1,{_MAX_VALUE}}})""",
    re.IGNORECASE,
)
# A secret flag and its value, separated by blanks (`--api-key sk-1`, in scripts and logs).
_FLAG_VALUE = re.compile(
    rf"""(?<![A-Za-z0-9_-])(--?{_NAME}[ \t]{{1,8}})"""
    # A value may start with one dash (`--db-pass -x9`); `--next-flag` is no value.
    rf"""(?!--|-[\s]|-$)({_REF_VALUE}|'[^'\n]{{0,{_MAX_VALUE}}}'|"[^"\n]{{0,{_MAX_VALUE}}}"|[^\s'"\\]{{1,{_MAX_VALUE}}})""",
    re.IGNORECASE,
)
_SCHEMES = ("Bearer", "Basic", "Token", "Digest")
_SCHEME_VALUE = re.compile(
    rf"(\b(?:Bearer|Basic|Token|Digest)[ \t]{{1,8}})[A-Za-z0-9._~+/=-]{{1,{_MAX_VALUE}}}",
    re.IGNORECASE,
)
# user:password@ in URLs (scheme://user:pass@host): the password goes.
_URL_PASSWORD = re.compile(
    rf"([A-Za-z][A-Za-z0-9+.-]{{0,31}}://[^\s/@:]{{0,{_MAX_NAME}}}:)[^\s/@]{{1,{_MAX_VALUE}}}@"
)
# Well-known token shapes, wherever they appear (data: one regex per shape).
_TOKEN_SHAPE_PARTS = (
    r"hf_[A-Za-z0-9]{20,256}",
    r"sk-[A-Za-z0-9_-]{16,256}",
    r"gh[pousr]_[A-Za-z0-9]{20,256}",
    r"AIza[0-9A-Za-z_-]{30,64}",  # Google API keys (39 characters)
    r"(?:AKIA|ASIA)[0-9A-Z]{16}",  # AWS access key ids
    r"xox[abposr]-[A-Za-z0-9-]{10,256}",  # Slack
    r"eyJ[A-Za-z0-9_-]{8,4096}\.eyJ[A-Za-z0-9_-]{8,4096}\.[A-Za-z0-9_-]{0,4096}",  # JWTs
)
_TOKEN_SHAPES = re.compile(r"(?<![A-Za-z0-9])(?:" + "|".join(_TOKEN_SHAPE_PARTS) + ")")
# URL query parameters that carry a credential (`?key=AIza...`, `&X-Amz-Signature=...`).
_QUERY_NAMES = (
    "key",
    "apikey",
    "api_key",
    "sig",
    "signature",
    "token",
    "access_token",
    "x-amz-signature",
    "x-amz-credential",
    "x-amz-security-token",
    "password",
)
_QUERY_SECRET = re.compile(
    r"([?&;](?:"
    + "|".join(re.escape(n) for n in _QUERY_NAMES)
    + rf")=)[^&#\s'\"]{{1,{_MAX_VALUE}}}",
    re.IGNORECASE,
)
# A line that ends with a secret flag and no value: its value is on the next line
# (a shell continuation `--api-key \`, a YAML list item `- --api-key`).
_DANGLING_FLAG = re.compile(
    rf"(?<![A-Za-z0-9_-])(--?[A-Za-z0-9_-]{{1,{_MAX_NAME}}})[ \t]*\\?[ \t]*$"
)
_FIRST_WORD = re.compile(rf"^([ \t+\-]{{0,64}}(?:-[ \t]{{1,8}})?)([^\s\\]{{1,{_MAX_VALUE}}})")


def is_reference(value: str) -> bool:
    """Whether a value is only a variable reference (`$KEY`, `"${KEY}"`): not a secret."""
    return _REFERENCE.fullmatch(value) is not None


def is_secret_name(name: str) -> bool:
    name = name.strip("-'\" \t=:").lower()
    return name not in _NOT_SECRET and bool(_SECRET_NAME.search(name[:_MAX_NAME]))


def _shapes(text: str) -> str:
    text = _QUERY_SECRET.sub(lambda m: m.group(1) + REDACTED, _TOKEN_SHAPES.sub(REDACTED, text))
    return _URL_PASSWORD.sub(lambda m: m.group(1) + REDACTED + "@", text)


def redact_argv(argv: list[str]) -> list[str]:
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(arg if is_reference(arg) else REDACTED)
            hide_next = False
            continue
        m = _ASSIGN.fullmatch(arg)
        if m and is_secret_name(m.group(1)) and not is_reference(m.group(2)):
            out.append(m.group(1) + REDACTED)
            continue
        if _FLAG.fullmatch(arg) and is_secret_name(arg):
            hide_next = True
        out.append(_shapes(arg))
    return out


def _keep_none(m: re.Match[str]) -> str:
    value = m.group(2)
    if not is_secret_name(m.group(1)) or value in ("None", "null", "''", '""', *_SCHEMES):
        return m.group(0)
    if is_reference(value):
        return m.group(0)
    return m.group(1) + REDACTED


def redact_text(text: str) -> str:
    text = _SCHEME_VALUE.sub(lambda m: m.group(1) + REDACTED, text)
    text = _TEXT_SECRET.sub(_keep_none, text)
    text = _FLAG_VALUE.sub(_keep_none, text)
    return _shapes(text)


# In a one-line error message a `NAME: ` is mostly a host or a path the message starts with
# (`auth-gpu-1: timed out`, `/run/secrets/token: no such file`): the colon form counts only
# for a bare identifier (`api_key: x`, `"token": "x"`), never one after `/` or with `-` `.`.
_MESSAGE_ASSIGN = re.compile(
    rf"""(?<![A-Za-z0-9_.-])({_NAME}['"]?[ \t]{{0,8}}=[ \t]{{0,8}})"""
    rf"""({_REF_VALUE}|'[^'\n]{{0,{_MAX_VALUE}}}'|"[^"\n]{{0,{_MAX_VALUE}}}"|[^\s,)}}'"]{{1,{_MAX_VALUE}}})""",
    re.IGNORECASE,
)
_MESSAGE_COLON = re.compile(
    rf"""(?<![A-Za-z0-9_./-])(['"]?[A-Za-z0-9_]{{0,64}}?{_SECRET_WORDS}[A-Za-z0-9_]{{0,64}}['"]?"""
    rf"""[ \t]{{0,8}}:[ \t]{{0,8}})"""
    rf"""({_REF_VALUE}|'[^'\n]{{0,{_MAX_VALUE}}}'|"[^"\n]{{0,{_MAX_VALUE}}}"|[^\s,)}}'"]{{1,{_MAX_VALUE}}})""",
    re.IGNORECASE,
)


def redact_message(text: str) -> str:
    """`redact_text` for a one-line error message that may quote a file or a host's answer:
    the same names and shapes, but `NAME: value` only for a bare identifier, so a message's
    leading host or path (`auth-gpu-1: ...`) stays readable."""
    text = _SCHEME_VALUE.sub(lambda m: m.group(1) + REDACTED, text)
    text = _MESSAGE_ASSIGN.sub(_keep_none, text)
    text = _MESSAGE_COLON.sub(_keep_none, text)
    text = _FLAG_VALUE.sub(_keep_none, text)
    return _shapes(text)


def _hide_first(m: re.Match[str]) -> str:
    return m.group(0) if is_reference(m.group(2)) else m.group(1) + REDACTED


def redact_lines(lines: list[str]) -> list[str]:
    """Redact text lines where a secret flag's value may sit on the next line (diffs too:
    a value removed on a `-` line and its replacement on the `+` line right after it)."""
    out = []
    hide_next = False
    for i, line in enumerate(lines):
        carry = False
        if hide_next:
            following = lines[i + 1] if i + 1 < len(lines) else ""
            carry = line.startswith("-") and not line.startswith("---")
            carry = carry and following.startswith("+") and not following.startswith("+++")
            carry = carry and not following[1:].lstrip(" \t").startswith("-")  # a flag
            line = _FIRST_WORD.sub(_hide_first, line, count=1)
        red = redact_text(line)
        m = _DANGLING_FLAG.search(red)
        hide_next = carry or (m is not None and is_secret_name(m.group(1)))
        out.append(red)
    return out


def redact_block(text: str) -> str:
    """`redact_lines` over a whole text, keeping its line ends."""
    lines = text.splitlines(keepends=True)
    bodies = redact_lines([ln.rstrip("\r\n") for ln in lines])
    return "".join(b + ln[len(ln.rstrip("\r\n")) :] for b, ln in zip(bodies, lines, strict=True))


def _reference_word(prev: str, arg: str, assign: re.Match[str] | None) -> tuple[str, str] | None:
    """A secret's variable reference kept (`--api-key "$KEY"`, `--api-key="$KEY"`) as a
    shell word that expands it, and the variable's name; None for any other word."""
    import shlex

    head, value = "", arg
    if assign is not None and is_secret_name(assign.group(1)):
        head, value = shlex.quote(assign.group(1)), assign.group(2)
    elif not (_FLAG.fullmatch(prev) and is_secret_name(prev)):
        return None
    if not is_reference(value):
        return None
    name = value.strip('"').lstrip("$").strip("{}")
    return f'{head}"${{{name}}}"', name


def shell_with_placeholders(argv: list[str]) -> tuple[str, list[str]]:
    """A redacted argv as a shell line whose hidden secrets are `"$VARIABLE"`s to fill in.

    `--api-key '***'` would start a server with the key `***`; the placeholder makes the
    user supply the real value. Returns the line and the variables it uses.
    """
    import shlex

    words: list[str] = []
    names: list[str] = []
    for i, arg in enumerate(argv):
        prev = argv[i - 1] if i else ""
        if arg == REDACTED and _FLAG.fullmatch(prev) and is_secret_name(prev):
            var = "SGLANG_" + re.sub(r"[^A-Za-z0-9]", "_", prev.lstrip("-")).upper()
            names.append(var)
            words.append(f'"${var}"')
            continue
        m = _ASSIGN.fullmatch(arg)
        if m and m.group(2) == REDACTED and is_secret_name(m.group(1)):
            var = "SGLANG_" + re.sub(r"[^A-Za-z0-9]", "_", m.group(1).strip("-=")).upper()
            names.append(var)
            words.append(f'{shlex.quote(m.group(1))}"${var}"')
            continue
        ref = _reference_word(prev, arg, m)
        if ref is not None:  # the file's own variable, kept as a reference to expand
            names.append(ref[1])
            words.append(ref[0])
            continue
        words.append(shlex.quote(arg))
    return " ".join(words), names
