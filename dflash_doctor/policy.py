"""Waivers and baselines: which findings gate, decided after the checks, before the report.

Waivers live in `.dflash-doctor.yaml` (or `[tool.dflash-doctor]` in pyproject.toml):

```yaml
waivers:
  - check: DFD131              # required
    hosts: [gpu-canary]        # optional: host names; labels: [staging] also works
    reason: canary with short prompts; the memory is not needed
    expires: 2027-01-31        # optional; from that day on the waiver stops waiving
    severity: info             # optional: re-grade instead of ignoring
```

A baseline is an earlier JSON report (`--output`): findings it already had do not gate.
Today's date is given by the caller: checks and policy never read the clock themselves.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import tomllib
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from dflash_doctor.checks.base import Finding, Severity
from dflash_doctor.errors import UsageError, validation_line
from dflash_doctor.report import HostReport

WAIVER_FILE = ".dflash-doctor.yaml"


class Waiver(BaseModel):
    model_config = ConfigDict(extra="forbid")

    check: str
    reason: str = Field(min_length=1)
    hosts: list[str] = Field(default_factory=list)
    labels: list[str] = Field(default_factory=list)
    expires: dt.date | None = None
    severity: Severity | None = None

    def matches(self, host: str, labels: list[str], finding: Finding) -> bool:
        if finding.check_id != self.check.upper():
            return False
        if not self.hosts and not self.labels:
            return True
        return host in self.hosts or bool(set(labels) & set(self.labels))


class WaiverFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    waivers: list[Waiver] = Field(default_factory=list)


def load_waivers(path: str | None, search_dir: str = ".") -> tuple[list[Waiver], str | None]:
    """The waivers of `path`, else of ./.dflash-doctor.yaml, else of ./pyproject.toml."""
    candidates = (
        [path]
        if path
        else [os.path.join(search_dir, WAIVER_FILE), os.path.join(search_dir, "pyproject.toml")]
    )
    for candidate in candidates:
        if not os.path.exists(candidate):
            if path:
                raise UsageError(f"{candidate}: no such waiver file")
            continue
        raw = _read(candidate)
        if raw is None:
            continue
        try:
            return WaiverFile.model_validate(raw).waivers, candidate
        except ValidationError as e:
            raise UsageError(f"{candidate}: {validation_line(e)}") from None
    return [], None


def _read(path: str) -> dict[str, Any] | None:
    try:
        with open(path, "rb") as f:
            data = f.read(4 << 20)
    except OSError as e:
        raise UsageError(f"{path}: cannot read: {(e.strerror or str(e)).lower()}") from None
    if path.endswith(".toml"):
        try:
            tool = tomllib.loads(data.decode("utf-8")).get("tool", {})
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise UsageError(f"{path}: invalid TOML: {e}") from None
        section = tool.get("dflash-doctor")
        return section if isinstance(section, dict) else None
    try:
        raw = yaml.safe_load(data.decode("utf-8")) or {}
    except (yaml.YAMLError, UnicodeDecodeError, ValueError, RecursionError) as e:
        # ValueError: a date such as 2026-13-45 fails in the YAML timestamp constructor.
        why = f" ({str(e).splitlines()[0][:120]})" if isinstance(e, ValueError) else ""
        raise UsageError(f"{path}: invalid YAML{why}") from None
    if not isinstance(raw, dict):
        raise UsageError(f"{path}: must be a mapping with a 'waivers' list")
    return raw


def apply_waivers(
    hosts: list[HostReport], labels: dict[str, list[str]], waivers: list[Waiver], today: dt.date
) -> list[str]:
    """Suppress or re-grade waived findings; return notes about expired waivers."""
    notes: list[str] = []
    for host in hosts:
        for result in host.results:
            for finding in result.findings:
                for w in waivers:
                    if not w.matches(host.host, labels.get(host.host, []), finding):
                        continue
                    if w.expires is not None and w.expires <= today:
                        note = (
                            f"{host.host}: waiver of {w.check} expired on {w.expires} and no "
                            f"longer applies ({w.reason})"
                        )
                        if note not in notes:
                            notes.append(note)
                        continue
                    if w.severity is not None:
                        finding.severity = w.severity
                        finding.waiver = f"re-graded to {w.severity.value}: {w.reason}"
                    else:
                        finding.suppressed = f"waived: {w.reason}"
                    break
    return notes


def fingerprint(host: str, finding: Finding) -> str:
    """Stable identity of a finding across runs: host, check and title."""
    return f"{host}\x1f{finding.check_id}\x1f{finding.title}"


def load_baseline(path: str) -> set[str]:
    try:
        with open(path, encoding="utf-8") as f:
            report = json.load(f)
    except OSError as e:
        raise UsageError(
            f"{path}: cannot read baseline: {(e.strerror or str(e)).lower()}"
        ) from None
    except (ValueError, UnicodeDecodeError):
        raise UsageError(f"{path}: baseline is not a JSON report") from None
    seen: set[str] = set()
    try:
        for host in report["hosts"]:
            for result in host["results"]:
                for f in result["findings"]:
                    seen.add(f"{host['host']}\x1f{f['check_id']}\x1f{f['title']}")
    except (KeyError, TypeError):
        raise UsageError(f"{path}: baseline is not a dflash-doctor JSON report") from None
    return seen


def apply_baseline(hosts: list[HostReport], known: set[str]) -> None:
    for host in hosts:
        for finding in host.findings:
            if finding.suppressed is None and fingerprint(host.host, finding) in known:
                finding.suppressed = "in baseline"
