"""One bounded read of a regular file on this machine: a waiver policy or a baseline, the
SSH known_hosts file, a report to merge, a repository's pin files.

Each names a path a user or a repository controls, so the same three hazards meet each: a
FIFO or a device blocks the read for ever or never ends (the file is opened without blocking
and judged by fstat on what was opened, before any read), a huge file is read whole (refused
by its size before a byte is read), and a file that grows meanwhile is read no further than
the bound. Each caller words the refusal its own way, from `Unread.stage`.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from typing import Literal

Stage = Literal["open", "kind", "size", "read"]


class Unread(Exception):
    """Why `read_regular` read nothing. `stage`: "open" (the open failed), "kind" (not a
    regular file: a FIFO, device, socket or directory), "size" (larger than the bound) or
    "read" (the read failed); `reason`: the system's words for a failed open or read."""

    def __init__(self, stage: Stage, reason: str = "") -> None:
        super().__init__(f"{stage}: {reason}" if reason else stage)
        self.stage: Stage = stage
        self.reason = reason


@dataclass(frozen=True)
class Words:
    """How one caller says each refusal of `read_regular`: `{reason}` is the system's words
    for a failed open or read (lower-cased where `lower`), `{limit}` the bound; a failed
    read is said as a failed open unless `read` is given."""

    open: str
    kind: str
    size: str
    read: str = ""
    lower: bool = False

    def say(self, e: Unread, limit: int) -> str:
        """The caller's words for `e`."""
        text = {"open": self.open, "kind": self.kind, "size": self.size, "read": self.read}
        reason = e.reason.lower() if self.lower else e.reason
        return (text[e.stage] or self.open).format(reason=reason, limit=limit)


def read_regular(path: str | os.PathLike[str], limit: int, *, follow: bool = True) -> bytes:
    """The bytes of `path`, a regular file of at most `limit` bytes; else Unread.

    `follow=False` refuses a symlink at the last component (O_NOFOLLOW: "open" fails), for a
    walk that must not leave its tree. Only what the file holds is read (a read of the whole
    bound would allocate the bound first); a file that grew since fstat is read on to the
    bound and refused past it."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise Unread("open", e.strerror or str(e)) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Unread("kind")
        if st.st_size > limit:
            raise Unread("size")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(st.st_size + 1)
            if len(data) > st.st_size:  # it grew: on to the bound, one byte past to see it
                data += f.read(limit + 1 - len(data))
    except OSError as e:
        raise Unread("read", e.strerror or str(e)) from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise Unread("size")
    return data
