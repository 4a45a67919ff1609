"""The report formats `check`, `gate` and `report merge` write, by name: one table, so the
three commands offer the same formats and render each the same way."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dflash_doctor.checks.base import Check
    from dflash_doctor.report import Report

# "text" is the terminal report (render/terminal.py), drawn by the CLI's console.
REPORT_FORMATS = ("text", "concise", "github", "json", "sarif", "junit")


def render_format(
    report: Report, fmt: str, root: str = ".", extra_rules: Iterable[Check] = ()
) -> str | None:
    """The report in format `fmt`, or None for "text". `root`: what SARIF, concise and
    GitHub paths are relative to; `extra_rules`: checks outside the catalog (DFD170)."""
    # Only the chosen format's renderer is imported: JSON loads neither SARIF's rule table
    # nor JUnit's XML writer (issue 28: start-up is most of a small check's cost).
    if fmt in ("concise", "github"):
        from dflash_doctor.render.concise import render_concise, render_github

        return (render_concise if fmt == "concise" else render_github)(report, root)
    if fmt == "json":
        from dflash_doctor.render.json_report import render_json

        return render_json(report)
    if fmt == "sarif":
        from dflash_doctor.render.sarif import render_sarif

        return render_sarif(report, root, extra_rules)
    if fmt == "junit":
        from dflash_doctor.render.junit import render_junit

        return render_junit(report)
    return None
