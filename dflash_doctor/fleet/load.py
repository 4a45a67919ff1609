"""Read saved reports (`check`/`gate --format json`, or an earlier merge) from files.

A report file comes from a host, a copy, a pipe that was cut: it may be truncated, not
JSON, huge, of another schema or nested deeper than any report. Each such file is one line
naming it (`LoadError`), and the other files go on. Bounds: MAX_REPORT_BYTES read at most,
MAX_REPORT_VALUES values (counted before parsing), MAX_DEPTH levels of nesting (a real report
has about 12; Python's own decoder would raise RecursionError near 1,000, and pydantic would
serialise a nested `runtime.args` that deep).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from dflash_doctor.errors import one_line
from dflash_doctor.regular_file import Unread, Words, read_regular
from dflash_doctor.report import SCHEMA_VERSION, Report

# 16 hosts x 40 KB is a typical inventory report; one with bench sweeps and probes stays
# far below this. A larger file is not a report this tool wrote.
MAX_REPORT_BYTES = 64 * 1024 * 1024
_REFUSED = Words(
    open="cannot open: {reason}",
    kind="not a regular file",
    size=f"larger than {MAX_REPORT_BYTES // (1024 * 1024)} MiB: not a report",
    read="cannot read: {reason}",
)
MAX_DEPTH = 64
# JSON values a report may hold (counted as `,`, `[` and `{` bytes, before any parse): each
# costs ~60-100 bytes as a Python object, so this bounds a merge's memory (~200 MB) where
# the byte bound alone lets 63 MiB of `[],` become 3 GB. A 16-host report holds ~30,000.
MAX_REPORT_VALUES = 2_000_000


class LoadError(Exception):
    """One line: the file and why it is not a report."""


def _read(path: Path) -> bytes:
    # Refused by its size before a byte is read, and read no further than the bound.
    try:
        return read_regular(path, MAX_REPORT_BYTES)
    except Unread as e:
        raise LoadError(f"{path}: {_REFUSED.say(e, MAX_REPORT_BYTES)}") from None


def _depth_within(obj: Any, limit: int) -> bool:
    """Iterative (a recursive walk is what a hostile file would exhaust)."""
    stack: list[tuple[Any, int]] = [(obj, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return False
        children = item.values() if isinstance(item, dict) else item
        # only containers are pushed: scalars, most of a report, cost one isinstance each
        stack.extend((v, depth + 1) for v in children if isinstance(v, dict | list))
    return True


def _why(error: ValidationError) -> str:
    errors = error.errors()
    first = errors[0]
    where = ".".join(str(x) for x in first["loc"]) or "top level"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {first['msg']}{more}"


def load_report(path: Path) -> Report:
    data = _read(path)
    values = data.count(b",") + data.count(b"[") + data.count(b"{")
    if values > MAX_REPORT_VALUES:
        raise LoadError(f"{path}: more than {MAX_REPORT_VALUES} JSON values: not a report")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise LoadError(f"{path}: not UTF-8 (byte {e.start}): not a JSON report") from None
    try:
        obj = json.loads(text)
    except RecursionError:
        raise LoadError(f"{path}: nested deeper than any report: not a report") from None
    except ValueError as e:  # JSONDecodeError, and integers past Python's digit limit
        raise LoadError(one_line(f"{path}: not JSON ({e}): truncated or not a report")) from None
    if not isinstance(obj, dict):
        raise LoadError(f"{path}: a JSON {type(obj).__name__}, not a report object")
    if not _depth_within(obj, MAX_DEPTH):
        raise LoadError(f"{path}: nested deeper than {MAX_DEPTH} levels: not a report")
    version = obj.get("schema_version")
    if "hosts" not in obj or version is None:
        raise LoadError(f"{path}: no schema_version and hosts: not a dflash-doctor report")
    if version != SCHEMA_VERSION:
        raise LoadError(
            one_line(
                f"{path}: report schema_version {str(version)[:20]}; "
                f"this dflash-doctor reads version {SCHEMA_VERSION}"
            )
        )
    try:
        return Report.model_validate(obj)
    except ValidationError as e:
        raise LoadError(one_line(f"{path}: not a dflash-doctor report: {_why(e)}")) from None
