"""A progress bar for many hosts, on stderr when it is a terminal."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dflash_doctor.report import HostReport


@contextmanager
def host_progress(total: int) -> Iterator[Callable[[HostReport], None]]:
    if total < 2 or not sys.stderr.isatty():
        yield lambda _report: None
        return
    # rich's progress bar (and its refresh thread) only for many hosts on a terminal.
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    with Progress(
        TextColumn("checking hosts"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}"),
        console=Console(stderr=True),
        transient=True,
    ) as progress:
        task = progress.add_task("", total=total)

        def done(report: HostReport) -> None:
            state = "ok" if report.reachable else "unreachable"
            progress.update(task, advance=1, description=f"{report.host}: {state}")

        yield done
