"""Every check's documentation page is whole, and every SGLang line it cites is read back.

A check's docstring is its page (`dflash-doctor explain ID`, SARIF rule help): the sections
What it finds, Why it hurts, Example, How to fix, Fix safety and Versions, in that order.
A citation of SGLang's code is written `path.py VERSION:LINES` (`srt/server_args.py
0.5.11:524-525, 0.5.14:1484-1491`: later versions of the same file follow after a comma),
the path relative to the wheel's `sglang/` package or any tail of it that names one file.
With the published wheels unpacked under /work/wheels/src/<version>/sglang, every citation of
every page (retired ids included) is read back: the file exists in that release, and the
cited lines exist and are not blank; where one file is cited for several releases, each
release's lines show the same code as the first's (they share an identifier that is rare
in the file), which catches a line number carried over from another release.
"""

from __future__ import annotations

import re
from collections import Counter
from functools import cache
from pathlib import Path

import pytest

from dflash_doctor.checks import CATALOG
from dflash_doctor.checks.retired import RETIRED

WHEELS = Path("/work/wheels/src")
SECTIONS = ("What it finds", "Why it hurts", "Example", "How to fix", "Fix safety", "Versions")

VERSION = r"0\.\d+\.\d+(?:\.post\d+)?"
LINES = r"\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*"
# `path.py 0.5.11:51-89, 0.5.23:215-228`: one file, one or more releases.
CHAIN = re.compile(
    rf"(?P<path>[A-Za-z_][\w/]*\.py)\s+(?P<cites>{VERSION}:{LINES}(?:,\s+{VERSION}:{LINES})*)"
)
ONE = re.compile(rf"({VERSION}):({LINES})")
# Anything that looks like a line citation: each must be part of a CHAIN.
LOOSE = re.compile(rf"{VERSION}:\d|\.py:\d")

PAGES = {check_id: check.doc for check_id, check in CATALOG.items()} | RETIRED


def flat(doc: str) -> str:
    """The page as one line without code marks, as the citations are matched."""
    return " ".join(doc.split()).replace("`", "")


def citations(doc: str) -> list[tuple[str, str, str]]:
    """(path, version, lines) of every citation on a page."""
    return [
        (m.group("path"), version, lines)
        for m in CHAIN.finditer(flat(doc))
        for version, lines in ONE.findall(m.group("cites"))
    ]


# An identifier in code (5+ characters, so `self`, `args` and the like do not count) that
# the file uses at most RARE times: shared by two releases' cited lines, it is the same code.
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{4,}")
RARE = 10


def sections(doc: str) -> list[tuple[str, str]]:
    parts = re.split(r"\*\*([A-Z][a-z ]+)\.\*\*", doc)
    return list(zip(parts[1::2], (p.strip() for p in parts[2::2]), strict=True))


@pytest.mark.parametrize("check_id", list(CATALOG))
def test_every_page_has_its_sections_in_order(check_id: str) -> None:
    found = sections(CATALOG[check_id].doc)
    assert [name for name, _ in found] == list(SECTIONS), check_id
    empty = [name for name, text in found if not text]
    assert not empty, f"{check_id}: empty {empty}"


@pytest.mark.parametrize("check_id", list(CATALOG))
def test_versions_cite_the_wheels(check_id: str) -> None:
    versions = dict(sections(CATALOG[check_id].doc))["Versions"]
    assert citations(versions), f"{check_id}: Versions cites no `path.py VERSION:LINE`"


@pytest.mark.parametrize("page", list(PAGES))
def test_every_citation_is_written_one_way(page: str) -> None:
    text = flat(PAGES[page])
    spans = [m.span() for m in CHAIN.finditer(text)]
    loose = [
        text[max(0, m.start() - 50) : m.end() + 10]
        for m in LOOSE.finditer(text)
        if not any(start <= m.start() < end for start, end in spans)
    ]
    assert not loose, f"{page}: write citations as `path.py VERSION:LINES`: {loose}"


@cache
def wheel_files(version: str) -> dict[str, list[Path]]:
    """Every .py file of a release, by each tail of its path under sglang/."""
    root = WHEELS / version / "sglang"
    by_tail: dict[str, list[Path]] = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root).parts
        for i in range(len(parts)):
            by_tail.setdefault("/".join(parts[i:]), []).append(path)
    return by_tail


def wheel_file(path: str, version: str) -> Path:
    """The one file of a release that a citation's path names."""
    assert (WHEELS / version).is_dir(), f"{path} {version}: no such release unpacked"
    found = wheel_files(version).get(path, [])
    assert len(found) == 1, f"{path} {version}: {len(found)} files match (name more of the path)"
    return found[0]


def cited_lines(path: str, version: str, lines: str) -> list[str]:
    """The cited lines of a release's file; a failed assertion says what is wrong."""
    text = wheel_file(path, version).read_text(encoding="utf-8").splitlines()
    out = []
    for part in lines.split(","):
        first, _, last = part.partition("-")
        a, b = int(first), int(last or first)
        assert 1 <= a <= b <= len(text), f"{path} {version}:{part}: the file has {len(text)} lines"
        out += text[a - 1 : b]
    return out


@pytest.mark.skipif(not WHEELS.is_dir(), reason="published SGLang wheels not unpacked here")
@pytest.mark.parametrize("page", list(PAGES))
def test_every_citation_reads_back_from_the_wheels(page: str) -> None:
    for path, version, lines in citations(PAGES[page]):
        got = cited_lines(path, version, lines)
        assert any(line.strip() for line in got), f"{page}: {path} {version}:{lines} is blank"


@pytest.mark.skipif(not WHEELS.is_dir(), reason="published SGLang wheels not unpacked here")
@pytest.mark.parametrize("page", list(PAGES))
def test_one_file_cited_for_several_releases_shows_the_same_code(page: str) -> None:
    for chain in CHAIN.finditer(flat(PAGES[page])):
        path = chain.group("path")
        (first, first_lines), *later = ONE.findall(chain.group("cites"))
        seen = set(IDENTIFIER.findall("\n".join(cited_lines(path, first, first_lines))))
        for version, lines in later:
            uses = Counter(IDENTIFIER.findall(wheel_file(path, version).read_text("utf-8")))
            here = set(IDENTIFIER.findall("\n".join(cited_lines(path, version, lines))))
            assert any(uses[name] <= RARE for name in here & seen), (
                f"{page}: {path} {version}:{lines} shows other code than {first}:{first_lines}"
            )
