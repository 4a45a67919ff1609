"""The report formats `check`, `gate` and `report merge` write, by name: one table, so the
three commands offer the same formats and render each the same way."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from dflash_doctor.checks.base import Check
from dflash_doctor.render.concise import render_concise, render_github
from dflash_doctor.render.json_report import render_json
from dflash_doctor.render.junit import render_junit
from dflash_doctor.render.sarif import render_sarif
from dflash_doctor.report import Report

# "text" is the terminal report (render/terminal.py), drawn by the CLI's console.
REPORT_FORMATS = ("text", "concise", "github", "json", "sarif", "junit")


def render_format(
    report: Report, fmt: str, root: str = ".", extra_rules: Iterable[Check] = ()
) -> str | None:
    """The report in format `fmt`, or None for "text". `root`: what SARIF, concise and
    GitHub paths are relative to; `extra_rules`: checks outside the catalog (DFD170)."""
    renderers: dict[str, Callable[[], str]] = {
        "concise": lambda: render_concise(report, root),
        "github": lambda: render_github(report, root),
        "json": lambda: render_json(report),
        "sarif": lambda: render_sarif(report, root, extra_rules),
        "junit": lambda: render_junit(report),
    }
    return renderers[fmt]() if fmt in renderers else None
