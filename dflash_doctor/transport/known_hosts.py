"""known_hosts read as OpenSSH reads it, within bounds.

paramiko's `HostKeys` (5.1, `hostkeys.py` `_hostname_matches`) matches a host only by its
exact name or a hashed `|1|` entry: a pattern line (`*.gpu.example.com`, `10.0.0.?`,
`!bastion,*`) that OpenSSH honours (sshd(8) "SSH_KNOWN_HOSTS FILE FORMAT": `*` and `?`
wildcards, `!` negation; match.c `match_hostname`) never matches, so a host covered only
by one was refused as unknown (or, with --accept-new-host-key, recorded as new). Its `load`
also reads any file to the end: `--known-hosts /dev/zero` grew to 8 GB. Here a file must be
a regular file no larger than MAX_KNOWN_HOSTS_BYTES, opened without blocking (a FIFO).

Not honoured (as in paramiko): `@cert-authority` lines (no certificate support) and
`@revoked` lines are skipped.
"""

from __future__ import annotations

import hmac
import os
import re
from typing import Any

import paramiko

from dflash_doctor.errors import TransportError
from dflash_doctor.regular_file import Unread, Words, read_regular

MAX_KNOWN_HOSTS_BYTES = 16 << 20  # ~100,000 entries: far past any real file
_REFUSED = Words(
    open="cannot read known_hosts: {reason}",
    kind="known_hosts is not a regular file: refused",
    size="known_hosts is larger than {limit} bytes: refused",
)


def read_bounded(path: str, limit: int = MAX_KNOWN_HOSTS_BYTES) -> str:
    """The text of `path`, a regular file of at most `limit` bytes; else TransportError."""
    try:
        data = read_regular(path, limit)
    except Unread as e:
        raise TransportError(f"{path}: {_REFUSED.say(e, limit)}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise TransportError(f"{path}: known_hosts is not UTF-8 text") from None


def _wildcard(pattern: str) -> re.Pattern[str]:
    """An OpenSSH pattern (`*` any run, `?` one character; nothing else is special: the
    brackets of `[host]:port` are literal) as a case-blind regex."""
    body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile(body, re.IGNORECASE | re.DOTALL)


def _one(hostname: str, pattern: str) -> bool:
    if pattern.startswith("|1|"):
        try:
            hashed = paramiko.HostKeys.hash_host(hostname, pattern)
        except (ValueError, IndexError):  # a malformed salt: no match
            return False
        return hmac.compare_digest(hashed.encode(), pattern.encode())
    if "*" in pattern or "?" in pattern:
        return _wildcard(pattern).fullmatch(hostname) is not None
    return pattern.lower() == hostname.lower()


def host_matches(hostname: str, patterns: list[str]) -> bool:
    """Whether `hostname` (`name` or `[name]:port`) matches an entry's pattern list as
    OpenSSH's match_hostname decides: a negated pattern that matches rejects the entry
    whatever else matches; otherwise any matching pattern accepts it."""
    matched = False
    for raw in patterns:
        negated = raw.startswith("!")
        if _one(hostname, raw[1:] if negated else raw):
            if negated:
                return False
            matched = True
    return matched


class KnownHosts(paramiko.HostKeys):
    """paramiko's HostKeys with OpenSSH's patterns and a bounded, non-blocking load."""

    def load(self, filename: Any) -> None:
        """Add the entries of `filename` (paramiko's lines; markers skipped)."""
        entries: list[paramiko.hostkeys.HostKeyEntry] = self._entries  # type: ignore[attr-defined]
        for lineno, line in enumerate(read_bounded(os.fsdecode(filename)).splitlines(), 1):
            line = line.strip()
            if not line or line.startswith(("#", "@")):
                continue
            try:
                entry = paramiko.hostkeys.HostKeyEntry.from_line(line, lineno)
            except (paramiko.SSHException, paramiko.hostkeys.InvalidHostKey, ValueError):
                continue  # one bad line is skipped, as OpenSSH and paramiko do
            if entry is not None and entry.key is not None:
                # Appended, not deduplicated: paramiko's per-line `check` made a large file
                # quadratic; a repeated entry changes nothing a lookup returns first.
                entries.append(entry)

    def _hostname_matches(self, hostname: str, entry: paramiko.hostkeys.HostKeyEntry) -> bool:
        return host_matches(hostname, list(entry.hostnames))


class PatternClient(paramiko.SSHClient):
    """An SSHClient whose known hosts (user's and system's) are KnownHosts."""

    def __init__(self) -> None:
        super().__init__()
        self._host_keys = KnownHosts()
        self._system_host_keys = KnownHosts()
