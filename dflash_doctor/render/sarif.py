"""SARIF 2.1.0, as GitHub code scanning takes it: one run, rules from the check docs."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any

from dflash_doctor import __version__
from dflash_doctor.checks import CATALOG
from dflash_doctor.checks.base import Check, Evidence, Finding, Severity
from dflash_doctor.report import Report, fingerprint

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
# Where a finding is shown: the launch flag first, then the config key, then any file.
LOCATION_ORDER = ("flag", "config", "log")


def _uri(path: str, root: str) -> str:
    """Repo-relative, forward slashes: what code scanning resolves against the checkout."""
    absolute = os.path.abspath(path)
    root_abs = os.path.abspath(root)
    if os.path.commonpath([absolute, root_abs]) == root_abs:
        path = os.path.relpath(absolute, root_abs)
    return path.replace(os.sep, "/").lstrip("/")


def finding_place(finding: Finding, fallback: str | None) -> tuple[str | None, int | None]:
    """Where a finding is shown (SARIF, concise, GitHub annotations): the evidence of its
    flag, config key or log line, else `fallback` (the launch file) with no line."""
    evidence: Evidence | None = None
    for kind in LOCATION_ORDER:
        evidence = next((e for e in finding.evidence if e.kind == kind and e.file), None)
        if evidence is not None:
            break
    if evidence is None:
        return fallback, None
    return evidence.file, evidence.line or None


def _location(finding: Finding, root: str, fallback: str | None) -> dict[str, Any]:
    """Where code scanning shows a finding: flag, config key or log line, else the launch file."""
    file, line = finding_place(finding, fallback)
    location: dict[str, Any] = {
        "physicalLocation": {"artifactLocation": {"uri": _uri(file or "unknown", root)}}
    }
    if line:
        location["physicalLocation"]["region"] = {"startLine": line}
    return location


def render_sarif(report: Report, root: str = ".", extra_rules: Iterable[Check] = ()) -> str:
    """`extra_rules`: checks outside the per-host catalog (the fleet merge's DFD170)."""
    rules, index = _rules(report, extra_rules)
    results = []
    for host in report.hosts:
        fallback = host.facts.launch.source if host.facts is not None else None
        for finding in host.findings:
            result = _result(host.host, finding, index[finding.check_id], root, fallback)
            results.append(result)
    doc = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "dflash-doctor",
                        "version": __version__,
                        "informationUri": "https://github.com/dflash-doctor/dflash-doctor",
                        "rules": rules,
                    }
                },
                "results": results,
                "properties": {"exitCode": report.exit_code, "notes": report.notes},
            }
        ],
    }
    return json.dumps(doc, indent=2) + "\n"


def _rules(
    report: Report, extra_rules: Iterable[Check]
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """One rule per check (the catalog's, then `extra_rules`), and each id's index."""
    rules: list[dict[str, Any]] = []
    index: dict[str, int] = {}
    for i, check in enumerate([*CATALOG.values(), *extra_rules]):
        index[check.id] = i
        rules.append(
            {
                "id": check.id,
                "name": check.name,
                "shortDescription": {"text": check.summary},
                "fullDescription": {"text": check.doc},
                "help": {"text": check.doc, "markdown": check.doc},
                "defaultConfiguration": {"level": LEVEL[check.severity]},
                "properties": {"tags": ["dflash", "sglang"]},
            }
        )
    # A merged report may hold ids of another dflash-doctor version: a bare rule each.
    for host in report.hosts:
        for finding in host.findings:
            if finding.check_id not in index:
                index[finding.check_id] = len(rules)
                rules.append(
                    {
                        "id": finding.check_id,
                        "shortDescription": {"text": f"{finding.check_id} (not in this catalog)"},
                        "defaultConfiguration": {"level": LEVEL[finding.severity]},
                    }
                )
    return rules, index


def _result(
    host: str, finding: Finding, rule_index: int, root: str, fallback: str | None
) -> dict[str, Any]:
    """One finding as a SARIF result, with its fingerprint and suppression."""
    text = f"{host}: {finding.title}. {finding.message}"
    if finding.fixes:
        text += " Fix: " + "; ".join(f.describe() for f in finding.fixes) + "."
    result: dict[str, Any] = {
        "ruleId": finding.check_id,
        "ruleIndex": rule_index,
        "level": LEVEL[finding.severity],
        "message": {"text": text},
        "locations": [_location(finding, root, fallback)],
        "partialFingerprints": {"dflashDoctor/v1": fingerprint(host, finding)},
        "properties": {"host": host, "impact": finding.impact},
    }
    if finding.suppressed is not None:
        result["suppressions"] = [{"kind": "external", "justification": finding.suppressed}]
    return result
