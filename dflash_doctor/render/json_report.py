"""The machine-readable report (schema version 1, documented in docs/report-json.md)."""

from __future__ import annotations

from dflash_doctor.report import Report


def render_json(report: Report) -> str:
    return report.model_dump_json(indent=2) + "\n"
