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
Findings are frozen: policy returns new host reports with new findings, never edits them.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import tomllib
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from dflash_doctor.checks.base import CheckResult, Finding, Severity
from dflash_doctor.errors import UsageError, validation_line
from dflash_doctor.regular_file import Unread, Words, read_regular
from dflash_doctor.report import HostReport, fingerprint

WAIVER_FILE = ".dflash-doctor.yaml"
# How a policy or baseline file that cannot be read is said (regular_file.py reads it).
_REFUSED = Words(
    open="cannot read: {reason}",
    kind="not a regular file (a FIFO, device or directory): refused",
    size="larger than {limit} bytes: refused",
    lower=True,
)
MAX_BASELINE_BYTES = 64 << 20  # a fleet's JSON report, with room


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
        raw = _read(candidate, None if path else search_dir)
        if raw is None:
            continue
        try:
            return WaiverFile.model_validate(raw).waivers, candidate
        except ValidationError as e:
            raise UsageError(f"{candidate}: {validation_line(e)}") from None
    return [], None


def _open_regular(path: str, tree: str | None, limit: int = 4 << 20) -> bytes:
    """The first 4 MiB of `path`, a regular file. A file found in `tree` (the repository a
    gate runs in) may not be a symlink that leaves it: a `.dflash-doctor.yaml` pointing at
    /etc/shadow or another checkout is refused, not read. A FIFO or device is refused
    without blocking (opened O_NONBLOCK, checked with fstat before any read)."""
    if tree is not None and os.path.islink(path):
        target = os.path.realpath(path)
        root = os.path.realpath(tree)
        if os.path.commonpath([root, target]) != root:
            raise UsageError(f"{path}: a symlink out of the repository (to {target}): refused")
    try:
        return read_regular(path, limit)
    except Unread as e:
        raise UsageError(f"{path}: {_REFUSED.say(e, limit)}") from None


def _read(path: str, tree: str | None = None) -> dict[str, Any] | None:
    data = _open_regular(path, tree)
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


def _waive(
    host: str, labels: list[str], finding: Finding, waivers: list[Waiver], today: dt.date
) -> tuple[Finding, list[str]]:
    """The finding as the first live waiver that matches leaves it, and the expiry notes."""
    notes: list[str] = []
    for w in waivers:
        if not w.matches(host, labels, finding):
            continue
        if w.expires is not None and w.expires <= today:
            notes.append(
                f"{host}: waiver of {w.check} expired on {w.expires} and no "
                f"longer applies ({w.reason})"
            )
            continue
        if w.severity is not None:
            return finding.model_copy(
                update={
                    "severity": w.severity,
                    "waiver": f"re-graded to {w.severity.value}: {w.reason}",
                }
            ), notes
        return finding.model_copy(update={"suppressed": f"waived: {w.reason}"}), notes
    return finding, notes


def _baselined(host: str, finding: Finding, known: set[str]) -> Finding:
    if finding.suppressed is None and fingerprint(host, finding) in known:
        return finding.model_copy(update={"suppressed": "in baseline"})
    return finding


def judge(
    hosts: list[HostReport],
    labels: dict[str, list[str]],
    waivers: list[Waiver],
    today: dt.date,
    known: set[str] | None = None,
) -> tuple[list[HostReport], list[str]]:
    """New host reports whose findings are waived, re-graded or baselined, and notes about
    expired waivers. The reports given are left as they were."""
    notes: list[str] = []
    judged: list[HostReport] = []
    for host in hosts:
        results: list[CheckResult] = []
        for result in host.results:
            findings: list[Finding] = []
            for finding in result.findings:
                finding, expired = _waive(
                    host.host, labels.get(host.host, []), finding, waivers, today
                )
                for note in expired:
                    if note not in notes:
                        notes.append(note)
                findings.append(_baselined(host.host, finding, known or set()))
            results.append(result.model_copy(update={"findings": findings}))
        judged.append(host.model_copy(update={"results": results}))
    return judged, notes


def apply_policy(
    hosts: list[HostReport],
    labels: dict[str, list[str]],
    *,
    today: dt.date,
    waiver_file: str | None = None,
    search_dir: str = ".",
    baseline_file: str | None = None,
) -> tuple[list[HostReport], list[str]]:
    """The waivers (of `waiver_file`, else found in `search_dir`) and the baseline applied
    to the host reports: new reports, and the notes the report starts with."""
    waivers, waiver_path = load_waivers(waiver_file, search_dir)
    known = load_baseline(baseline_file) if baseline_file is not None else None
    judged, notes = judge(hosts, labels, waivers, today, known)
    if waiver_path is not None:
        notes.insert(0, f"{len(waivers)} waiver(s) from {waiver_path}")
    return judged, notes


class _Seen(BaseModel):
    """A finding read back from a baseline report: only what its fingerprint rests on."""

    check_id: str
    title: str


def load_baseline(path: str) -> set[str]:
    """The fingerprints of every finding of an earlier JSON report."""
    data = _open_regular(path, None, MAX_BASELINE_BYTES)
    try:
        report = json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise UsageError(f"{path}: baseline is not a JSON report") from None
    seen: set[str] = set()
    try:
        for host in report["hosts"]:
            for result in host["results"]:
                for f in result["findings"]:
                    seen.add(fingerprint(host["host"], _Seen.model_validate(f)))
    except (KeyError, TypeError, ValidationError):
        raise UsageError(f"{path}: baseline is not a dflash-doctor JSON report") from None
    return seen
