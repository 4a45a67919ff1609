"""Scripts the tool ships to hosts and runs there with `python -c`: read once, when needed."""

from __future__ import annotations

from functools import cache
from pathlib import Path

PACKAGE_DIR = Path(__file__).parent


@cache
def script_source(relative: str) -> str:
    """The text of a stdlib(-and-torch) script inside the package, e.g. facts/log_filter.py."""
    return (PACKAGE_DIR / relative).read_text(encoding="utf-8")
