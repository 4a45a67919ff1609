"""The check catalog as a table (`dflash-doctor checks`): rich's table, nothing heavier."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from rich.console import Console
from rich.table import Table
from rich.text import Text

from dflash_doctor.defaults import Severity

STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}


class CatalogRow(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def severity(self) -> Severity: ...
    @property
    def name(self) -> str: ...
    @property
    def summary(self) -> str: ...


def render_catalog(checks: Iterable[CatalogRow], console: Console) -> None:
    table = Table("id", "severity", "name", "what it finds", box=None)
    for c in checks:
        table.add_row(c.id, Text(c.severity.value, style=STYLE[c.severity]), c.name, c.summary)
    console.print(table)
