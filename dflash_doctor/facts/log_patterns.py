"""SGLang's log texts as data: dflash_doctor/data/log_patterns.json, keyed by version range.

The file is generated from the published wheels by scripts/gen_log_patterns.py: for every
pattern, each distinct format SGLang writes, the releases that write it (first..last),
its file:line in every release, and a regex derived from the format. Nothing here is
typed by hand; the catalog names patterns by id.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Literal

PatternKind = Literal["fact", "reject", "slow", "crash", "decode"]


_RELEASE_RE = re.compile(r"^\s*v?(\d+)\.(\d+)(?:\.(\d+))?(?:\.?post(\d+))?")


def version_key(version: str) -> tuple[int, int, int, int] | None:
    """0.5.15.post1 -> (0, 5, 15, 1); 0.5.15 -> (0, 5, 15, 0); None: not a version."""
    m = _RELEASE_RE.match(version)
    if m is None:
        return None
    return (int(m[1]), int(m[2]), int(m[3] or 0), int(m[4] or 0))


def _key(release: str) -> tuple[int, int, int, int]:
    key = version_key(release)
    assert key is not None, release
    return key


@dataclass(frozen=True)
class LogFormat:
    """One text as SGLang formats it, in releases first..last."""

    format: str
    style: str  # "%" (logging args), "f" (f-string), "plain"
    regex: re.Pattern[str]
    first: str
    last: str
    sites: dict[str, tuple[str, ...]]  # release -> ("srt/...py:LINE", ...)

    def cite(self) -> str:
        site = self.sites[self.last][0]
        return f"SGLang {self.first}..{self.last} {site} ({self.last})"


@dataclass(frozen=True)
class LogPattern:
    id: str
    kind: PatternKind
    needle: str
    first: str
    last: str
    formats: tuple[LogFormat, ...]
    meaning: str = ""
    workaround: str = ""
    literal: str = ""  # the needle up to its first placeholder: a cheap test first
    # Fields of a generic helper's f-string that every cited call fills alike, already put
    # into the formats (`field_name` -> `DFLASH block_size`).
    fill: tuple[tuple[str, str], ...] = ()

    def search(self, text: str) -> re.Match[str] | None:
        if self.literal not in text:
            return None
        for f in self.formats:
            m = f.regex.search(text)
            if m is not None:
                return m
        return None

    def in_release(self, version: str) -> bool | None:
        """Whether the given release writes this text (first..last, from the wheels);
        None when the version cannot be read."""
        key = version_key(version)
        if key is None:
            return None
        return _key(self.first) <= key <= _key(self.last)

    def releases(self) -> str:
        return self.first if self.first == self.last else f"{self.first}..{self.last}"

    def first_release_after(self) -> str | None:
        """The first release that no longer writes this text (None: still written)."""
        later = [r for r in releases() if _key(r) > _key(self.last)]
        return later[0] if later else None


@cache
def _data() -> dict[str, object]:
    text = resources.files("dflash_doctor").joinpath("data/log_patterns.json").read_text()
    data: dict[str, object] = json.loads(text)
    return data


def releases() -> list[str]:
    """Every release the data was generated from, oldest first."""
    found = _data()["releases"]
    assert isinstance(found, list)
    return [str(r) for r in found]


@cache
def patterns() -> dict[str, LogPattern]:
    raw = _data()["patterns"]
    assert isinstance(raw, list)
    return build_patterns(raw)


def build_patterns(raw: list[Any]) -> dict[str, LogPattern]:
    """The patterns of a generated data file's `patterns` list (SGLang's, or vLLM's in
    data/vllm_rules.json), by id."""
    out: dict[str, LogPattern] = {}
    for p in raw:
        formats = tuple(
            LogFormat(
                format=f["format"],
                style=f["style"],
                regex=re.compile(f["regex"]),
                first=f["first"],
                last=f["last"],
                sites={v: tuple(s) for v, s in f["sites"].items()},
            )
            for f in p["formats"]
        )
        out[p["id"]] = LogPattern(
            id=p["id"],
            kind=p["kind"],
            needle=p["needle"],
            first=p["first"],
            last=p["last"],
            formats=formats,
            meaning=p.get("meaning", ""),
            workaround=p.get("workaround", ""),
            literal=re.split(r"[{%]", p["needle"])[0],
            fill=tuple(p.get("fill", {}).items()),
        )
    return out


def pattern(pattern_id: str) -> LogPattern:
    return patterns()[pattern_id]


def of_kind(kind: PatternKind) -> list[LogPattern]:
    return [p for p in patterns().values() if p.kind == kind]
