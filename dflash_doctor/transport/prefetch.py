"""One round trip per host: a transport that answers from a bundle fetched in one execution.

`PrefetchTransport` wraps a remote transport. On its first use it runs the shipped
`on_host/bundle_script.py` on the host in ONE remote command and keeps the bounded JSON
bundle it prints: file stats and contents, directory listings, link targets, command
outputs. Every read, listing, link and command that the bundle foresaw is answered from
it, with the same result (and the same one-line error) the transport itself would give;
anything else falls back to the wrapped transport, one real round trip, so what another
part of the gatherer reads later still works before the bundle learns to fetch it.

The bundle runs under a root-owned system `python3` chosen here (`SYSTEM_PYTHONS`), with
`-I -S` (no environment, no site-packages, no .pth files): never an interpreter, path or
import path that the host's users provide. A host without one falls back to plain reads.

A write (`fix --apply`) drops the whole bundle: what the host says after it must be read
anew. One gathering gets one bundle (`gather` wraps its transport once, before any read).
"""

from __future__ import annotations

import base64
import json
import stat
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, TypeVar

from dflash_doctor.errors import FileMissing, HostUnreachable, PermissionDenied, TransportError
from dflash_doctor.on_host import host_exec_rules as rules
from dflash_doctor.shipped import script_source
from dflash_doctor.transport.base import (
    CHUNK_BYTES,
    NO_SUCH_FILE,
    PERMISSION_DENIED,
    CommandResult,
    FileId,
    StderrLines,
    Transport,
)
from dflash_doctor.transport.wrapped import Delegating

T = TypeVar("T")
BUNDLE_SCRIPT = "on_host/bundle_script.py"
BUNDLE_VERSION = 1
# Root-owned system interpreters only, tried in this order; each must be owned by root
# and not writable by group or others, and so must its directory (and its symlink's).
# host_exec's own list (the log filter's interpreter), but only its absolute paths: this
# guard runs before any question is asked, so it looks nothing up on the host's PATH.
SYSTEM_PYTHONS = tuple(p for p in rules.SYSTEM_PYTHONS if p.startswith("/"))
NO_SYSTEM_PYTHON = 97


def guard_script(pythons: tuple[str, ...] = SYSTEM_PYTHONS) -> str:
    """POSIX sh: exec the first of `pythons` that root owns and only root can change.

    The file (after symlinks), its directory and the symlink's directory must be owned by
    uid 0 and not writable by group or others; it runs with `-I -S`, so neither the
    environment nor site-packages (.pth files) of the host can add code. $1 is the script,
    $2 its one argument.
    """
    return f"""
for p in {" ".join(pythons)}; do
  r=$(readlink -f -- "$p" 2>/dev/null) && [ -f "$r" ] && [ -x "$r" ] || continue
  bad=$(find "$r" "${{r%/*}}" "${{p%/*}}" -prune \\( ! -user 0 -o -perm -020 -o -perm -002 \\) \
    -print 2>&1) || continue
  [ -z "$bad" ] && exec "$r" -I -S -c "$1" "$2"
done
echo "no root-owned system python3 ({", ".join(pythons)})" >&2
exit {NO_SYSTEM_PYTHON}
"""


# What one bundle may carry: each file, each command, the filtered log, and in all.
LIMITS = {
    "file": 1024 * 1024,
    "config": 1024 * 1024,
    "command_output": 4 * 1024 * 1024,
    "stream_output": 32 * 1024 * 1024,
    "source": 4 * 1024 * 1024,
    "source_files": 16,
    "dir_entries": 4096,
    "processes": 256,
    "total": 48 * 1024 * 1024,
}
# base64 of zlib: the JSON on the wire is at most this much larger than the budget.
MAX_BUNDLE_BYTES = LIMITS["total"] * 2 + (1 << 20)


# Unpacks the script and its config (zlib, base64) and runs the script as __main__ with the
# config as its one argument: the command shrinks from ~100 KB to ~30 KB, which a real
# network's TCP slow start sends in fewer round trips (stdlib only, Python 3.8+).
UNPACK = (
    "import binascii,sys,zlib;"
    "s,c=zlib.decompress(binascii.a2b_base64(sys.argv[1])).decode().split('\\0',1);"
    "sys.argv[1:]=[c];exec(compile(s,'dflash-bundle','exec'))"
)


def bundle_argv(config: dict[str, Any]) -> list[str]:
    """The one remote command: a POSIX sh guard that picks the interpreter, then the script."""
    packed = script_source(BUNDLE_SCRIPT) + "\0" + json.dumps(config, separators=(",", ":"))
    return ["sh", "-c", guard_script(), "dflash-bundle", UNPACK, _compressed(packed)]


@lru_cache(maxsize=16)
def _compressed(text: str) -> str:
    # ~5 ms of CPU for ~100 KB: once per distinct config in a run (a fleet's hosts mostly
    # share theirs), not once per host.
    return base64.b64encode(zlib.compress(text.encode(), 6)).decode("ascii")


# What one packed answer may expand to (the bundle's own limits, LIMITS): a host's answer is
# never inflated past these, whatever its compressed size (a zlib bomb stops at the bound).
RUN_BYTES = LIMITS["command_output"]
STREAM_BYTES = LIMITS["stream_output"]
FILE_BYTES = max(LIMITS["file"], LIMITS["config"], LIMITS["source"])


class _Miss(Exception):
    """The bundle does not know: ask the host."""


class _Malformed(_Miss):
    """The bundle's answer to this one question is malformed: ask the host (issue 22: one
    bad field no longer loses the host)."""


def _unpack(text: object, limit: int, host: str, what: str) -> bytes:
    """base64 of zlib, inflated to at most `limit` bytes; anything else is one line."""
    try:
        d = zlib.decompressobj()
        data = d.decompress(base64.b64decode(str(text), validate=True), limit)
        if d.unconsumed_tail:
            raise TransportError(
                f"{host}: bundle answer for {what} expands past {limit} bytes: refused"
            )
        if not d.eof:  # truncated: malformed, not large
            raise _Malformed(f"{host}: bundle answer for {what} is truncated")
        return data
    except (ValueError, zlib.error, TypeError):  # binascii.Error is a ValueError
        # Malformed, not hostile-large: that one answer is asked of the host itself.
        raise _Malformed(f"{host}: bundle answer for {what} is not packed data") from None


@dataclass
class Answers:
    """A decoded bundle; empty when none could be fetched (then everything falls back)."""

    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    dirs: dict[str, Any] = field(default_factory=dict)
    links: dict[str, Any] = field(default_factory=dict)
    runs: dict[tuple[str, ...], dict[str, Any]] = field(default_factory=dict)
    streams: dict[tuple[str, ...], dict[str, Any]] = field(default_factory=dict)
    error: str | None = None
    seconds: float = 0.0

    @classmethod
    def parse(cls, raw: bytes, scripts: dict[str, str] | None = None) -> Answers:
        """Decode a bundle. `scripts`: the shipped scripts the config ran (name -> source);
        the host's answer only names one of them, it never names a file to read here.
        Each field, and each entry of a list, stands alone: a malformed one is left out
        (its questions go to the host), the others are kept."""
        try:
            doc = json.loads(raw)
        except (ValueError, RecursionError) as e:
            return cls(error=f"bundle: unreadable answer ({type(e).__name__})")
        if not isinstance(doc, dict) or doc.get("version") != BUNDLE_VERSION:
            return cls(error="bundle: unexpected answer")
        known = scripts or {}
        seconds = doc.get("seconds", 0.0)
        return cls(
            files=_mapping(doc.get("files")),
            dirs=_mapping(doc.get("dirs")),
            links=_mapping(doc.get("links")),
            runs=_keyed(doc.get("runs"), lambda r: tuple(str(a) for a in r["argv"])),
            streams=_keyed(
                doc.get("streams"),
                lambda s: ("-c", known[s["script"]], *(str(a) for a in s["args"])),
            ),
            seconds=float(seconds) if isinstance(seconds, int | float) else 0.0,
        )


def _mapping(field_: object) -> dict[str, Any]:
    """A bundle field that maps paths to answers; a malformed one is empty."""
    if not isinstance(field_, dict):
        return {}
    return {k: v for k, v in field_.items() if isinstance(k, str)}


def _keyed(
    rows: object, key: Callable[[dict[str, Any]], tuple[str, ...]]
) -> dict[tuple[str, ...], dict[str, Any]]:
    """A bundle list of answers by `key`; a malformed entry is left out."""
    out: dict[tuple[str, ...], dict[str, Any]] = {}
    for row in rows if isinstance(rows, list) else []:
        try:
            if isinstance(row, dict):
                out[key(row)] = row
        except (KeyError, TypeError, ValueError):
            continue
    return out


def fetch_answers(transport: Transport, config: dict[str, Any], timeout: float) -> Answers:
    """Run the bundle on the host (one remote execution) and decode what it printed."""
    out = bytearray()
    try:
        for chunk in transport.run_stream(bundle_argv(config), timeout=timeout):
            out += chunk
            if len(out) > MAX_BUNDLE_BYTES:
                return Answers(error="bundle: larger than its bound")
    except HostUnreachable:
        raise
    except TransportError as e:
        return Answers(error=str(e))
    filt = config.get("log_filter") or {}
    scripts = {str(filt["script"]): str(filt["source"])} if "script" in filt else {}
    return Answers.parse(bytes(out), scripts)


class PrefetchTransport(Delegating):
    """A Transport whose reads are answered from one bundle where it can, else by `inner`
    (Delegating hands it every host question the bundle does not answer)."""

    def __init__(self, inner: Transport, config: dict[str, Any], *, timeout: float = 600.0):
        super().__init__(inner)
        self.kind = inner.kind
        self.config = config
        self.timeout = timeout
        self.hits = 0
        self.misses: list[str] = []
        self._answers: Answers | None = None

    @property
    def answers(self) -> Answers:
        if self._answers is None:
            self._answers = fetch_answers(self.inner, self.config, self.timeout)
        return self._answers

    # -- how the transport would have failed ----------------------------------------------

    def _raise(self, path: str, kind: str) -> None:
        # The same typed error the transport itself would raise.
        typed: dict[str, tuple[type[TransportError], str]] = {
            "nofile": (FileMissing, NO_SUCH_FILE),
            "denied": (PermissionDenied, PERMISSION_DENIED),
        }
        error, reason = typed.get(kind, (TransportError, kind))
        raise error(f"{self.host}:{path}: {reason}")

    def _stat(self, path: str) -> dict[str, Any]:
        entry = self.answers.files.get(path)
        if entry is None:
            raise _Miss
        if not isinstance(entry, dict):
            raise _Malformed
        if "err" in entry:
            self.hits += 1
            self._raise(path, str(entry["err"]))
        return entry

    def _regular(self, path: str, entry: dict[str, Any]) -> None:
        if not stat.S_ISREG(int(entry["mode"])):
            self.hits += 1
            raise TransportError(f"{self.host}:{path}: not a regular file")

    def _missed(self, what: str) -> None:
        self.misses.append(what)

    def _answer(self, what: str, decode: Callable[[], T], ask: Callable[[], T]) -> T:
        """The bundle's answer (`decode`), else the host's own (`ask`): when the bundle did
        not foresee the question, and when its answer to it is malformed (a missing key, a
        mode that is no number, data that is not packed): only that question goes to the
        host, the rest of the bundle still answers."""
        try:
            return decode()
        except _Miss:
            pass
        except (KeyError, ValueError, TypeError, AttributeError, OverflowError):
            pass  # a malformed field of this answer
        self._missed(what)
        return ask()

    # -- the Transport interface ----------------------------------------------------------

    def run(
        self, argv: list[str], *, timeout: float = 30.0, on_stderr: StderrLines | None = None
    ) -> CommandResult:
        what = f"run {argv[0]}"

        def decode() -> CommandResult:
            # A caller that follows stderr while the command runs wants it run now.
            got = self.answers.runs.get(tuple(argv)) if on_stderr is None else None
            if got is None:
                raise _Miss
            out = CommandResult(
                int(got["rc"]),
                _unpack(got["out"], RUN_BYTES, self.host, what),
                _unpack(got["err"], RUN_BYTES, self.host, what),
            )
            self.hits += 1
            return out

        return self._answer(
            what, decode, lambda: self.inner.run(argv, timeout=timeout, on_stderr=on_stderr)
        )

    def run_stream(self, argv: list[str], *, timeout: float = 300.0) -> Iterator[bytes]:
        what = f"run_stream {argv[0]}"

        def decode() -> Iterator[bytes]:
            # A shipped stdlib script gives the same output under any interpreter and flags:
            # the bundle ran it under the checked system python3, whichever Python asks now.
            # The interpreter's own `-c` (the prefix's `sh -c` comes before it).
            keys = (tuple(argv[i:]) for i, word in enumerate(argv) if word == "-c")
            streams = self.answers.streams
            got = next((streams[k] for k in keys if k in streams), None)
            if got is None:
                raise _Miss
            rc = int(got["rc"])
            if rc != 0:
                err = _unpack(got["err"], RUN_BYTES, self.host, what)
                lines = err.decode("utf-8", "replace").strip().splitlines()
                self.hits += 1
                raise TransportError(f"{self.host}: {lines[-1] if lines else argv[0] + ' failed'}")
            data = _unpack(got["out"], STREAM_BYTES, self.host, what)
            self.hits += 1
            return iter([data])

        return self._answer(what, decode, lambda: self.inner.run_stream(argv, timeout=timeout))

    def file_size(self, path: str) -> int:
        def decode() -> int:
            entry = self._stat(path)
            self._regular(path, entry)
            size = int(entry["size"])
            self.hits += 1
            return size

        return self._answer(f"stat {path}", decode, lambda: self.inner.file_size(path))

    def file_mode(self, path: str) -> int:
        def decode() -> int:
            mode = stat.S_IMODE(int(self._stat(path)["mode"]) or 0o644)
            self.hits += 1
            return mode

        return self._answer(f"stat {path}", decode, lambda: self.inner.file_mode(path))

    def _data(self, path: str, max_bytes: int) -> bytes:
        entry = self._stat(path)
        self._regular(path, entry)
        if int(entry["size"]) > max_bytes:
            self.hits += 1
            raise TransportError(f"{self.host}:{path}: larger than {max_bytes} bytes")
        if "read_err" in entry:
            self.hits += 1
            self._raise(path, str(entry["read_err"]))
        if "data" not in entry:
            raise _Miss
        data = _unpack(entry["data"], min(max_bytes + 1, FILE_BYTES), self.host, path)
        self.hits += 1
        if len(data) > max_bytes:
            raise TransportError(f"{self.host}:{path}: larger than {max_bytes} bytes")
        return data

    def read_file(self, path: str, *, max_bytes: int) -> bytes:
        return self._answer(
            f"read {path}",
            lambda: self._data(path, max_bytes),
            lambda: self.inner.read_file(path, max_bytes=max_bytes),
        )

    def stream_file(self, path: str, *, chunk_bytes: int = CHUNK_BYTES) -> Iterator[bytes]:
        def decode() -> Iterator[bytes]:
            entry = self.answers.files.get(path)
            if entry is not None and not isinstance(entry, dict):
                raise _Malformed
            failed = entry and (entry.get("err") or entry.get("read_err"))
            if failed:
                self.hits += 1
                self._raise(path, str(failed))
            if entry is None or "data" not in entry or entry.get("redacted"):
                raise _Miss
            data = _unpack(entry["data"], FILE_BYTES, self.host, path)
            self.hits += 1
            return iter([data[i : i + chunk_bytes] for i in range(0, len(data), chunk_bytes)])

        return self._answer(
            f"stream {path}", decode, lambda: self.inner.stream_file(path, chunk_bytes=chunk_bytes)
        )

    def list_dir(self, path: str) -> list[str]:
        def decode() -> list[str]:
            got = self.answers.dirs.get(path)
            if got is None:
                raise _Miss
            if isinstance(got, dict):
                self.hits += 1
                self._raise(path, str(got.get("err")))
            if not isinstance(got, list):
                raise _Malformed
            self.hits += 1
            return [str(n) for n in got]

        return self._answer(f"list {path}", decode, lambda: self.inner.list_dir(path))

    def readlink(self, path: str) -> str:
        def decode() -> str:
            got = self.answers.links.get(path)
            if got is None:
                raise _Miss
            if isinstance(got, dict):
                self.hits += 1
                self._raise(path, str(got.get("err")))
            if not isinstance(got, str):
                raise _Malformed
            self.hits += 1
            return got

        return self._answer(f"readlink {path}", decode, lambda: self.inner.readlink(path))

    def write_file(
        self,
        path: str,
        data: bytes,
        *,
        mode: int = 0o644,
        expect: FileId | None = None,
        owner: tuple[int, int] | None = None,
    ) -> FileId | None:
        self._answers = Answers(error="dropped after a write")
        return self.inner.write_file(path, data, mode=mode, expect=expect, owner=owner)

    def create_file(
        self, path: str, data: bytes, *, mode: int = 0o600, owner: tuple[int, int] | None = None
    ) -> FileId:
        self._answers = Answers(error="dropped after a write")
        return self.inner.create_file(path, data, mode=mode, owner=owner)

    def remove_file(self, path: str) -> None:
        self._answers = Answers(error="dropped after a write")
        self.inner.remove_file(path)

    def prefetched(self, config: dict[str, Any]) -> Transport:
        return self

    def __getattr__(self, name: str) -> Any:
        # Anything beyond the Transport interface (an SSH client, its options) is inner's.
        return getattr(self.inner, name)
