"""SIGTERM is Ctrl-C for `fix --apply` and `--rollback`, and neither cuts a rollback short
(issue 22 item 7).

While an apply or rollback runs, SIGINT and SIGTERM both raise KeyboardInterrupt, which the
apply turns into "roll back, then report" (fix/apply.py). While that rollback (or any other
`shielded` part: restoring the file, restarting the old server) runs, a further signal is
held, not raised: the host gets its server back first, and the run then ends as interrupted.
SIGKILL cannot be caught: the journal (fix/journal.py) tells `--rollback` where it stopped.
Signal handlers can only be set in the main thread; elsewhere (a caller's worker thread)
both context managers do nothing.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

_state = {"shielded": 0, "held": 0}


def _handler(signum: int, frame: FrameType | None) -> None:
    if _state["shielded"]:
        _state["held"] += 1
        return
    raise KeyboardInterrupt(signal.Signals(signum).name)


def _main() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextmanager
def interruptible() -> Iterator[None]:
    """SIGINT and SIGTERM raise KeyboardInterrupt inside; the old handlers come back after."""
    if not _main():
        yield
        return
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in old:
        signal.signal(s, _handler)
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@contextmanager
def shielded() -> Iterator[None]:
    """A part that must finish: signals that arrive meanwhile are held (counted)."""
    _state["shielded"] += 1
    try:
        yield
    finally:
        _state["shielded"] -= 1


def held() -> int:
    """How many signals were held by `shielded` parts so far (and forget them)."""
    n, _state["held"] = _state["held"], 0
    return n
