"""The check catalog as a list (`dflash-doctor checks`): rich's table, nothing heavier."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from rich.console import Console
from rich.padding import Padding
from rich.text import Text

from dflash_doctor.defaults import Severity

STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}


class CatalogRow(Protocol):
    """What the catalog listing reads of a check (a check, or a row of the index)."""

    @property
    def id(self) -> str: ...
    @property
    def severity(self) -> Severity: ...
    @property
    def name(self) -> str: ...
    @property
    def summary(self) -> str: ...


def render_catalog(checks: Iterable[CatalogRow], console: Console) -> None:
    """The catalog as a table: id, severity, name, summary."""
    # One heading line and the whole summary below it, wrapped at words: a table squeezed
    # into 80 columns cut the summaries with an ellipsis.
    for c in checks:
        head = Text(f"{c.id} ", style="bold")
        head.append(c.severity.value, style=STYLE[c.severity])
        head.append(f"  {c.name}")
        console.print(head)
        console.print(Padding(Text(c.summary), (0, 0, 0, 4), expand=False))
