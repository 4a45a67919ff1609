"""Every check's documentation page is whole, and every SGLang line it cites is read back.

A check's docstring is its page (`dflash-doctor explain ID`, SARIF rule help): the sections
What it finds, Why it hurts, Example, How to fix, Fix safety and Versions, in that order.
A citation of SGLang's code is written `path.py VERSION:LINES` (`srt/server_args.py
0.5.11:524-525, 0.5.14:1484-1491`: later versions of the same file follow after a comma),
the path relative to the wheel's `sglang/` package or any tail of it that names one file.
With the published wheels unpacked under /work/wheels/src/<version>/sglang, every citation of
every page (retired ids included) is read back (tests/citations.py): the file exists in that
release, and the cited lines exist and are not blank; where one file is cited for several
releases, each release's lines show the same code as the first's (they share an identifier
that is rare in the file), which catches a line number carried over from another release.
Without the
wheels, as in CI, tests/checks/test_citation_data.py checks every citation of the package
against tests/data/cited_lines.json, which scripts/gen_citation_lines.py reads from them.
"""

from __future__ import annotations

import re

import pytest

from dflash_doctor.checks import CATALOG
from dflash_doctor.checks.retired import RETIRED
from tests.citations import (
    CHAIN,
    LOOSE,
    WHEELS,
    chains,
    citations,
    cited_lines,
    flat,
    same_code,
)

__all__ = ["WHEELS", "citations", "cited_lines"]  # tests/test_fleet.py reads pages with them

SECTIONS = ("What it finds", "Why it hurts", "Example", "How to fix", "Fix safety", "Versions")
PAGES = {check_id: check.doc for check_id, check in CATALOG.items()} | RETIRED


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


# The project's own history ("until issue 9", "round two") means nothing to a reader of the
# page; it belongs in CHANGELOG.md. Upstream references (`sgl-project/sglang#123`) are fine.
HISTORY = re.compile(r"\b(issues?|round|PR) #?\d+\b|\b(round two|last round)\b", re.IGNORECASE)


@pytest.mark.parametrize("page", list(PAGES))
def test_no_page_tells_the_projects_history(page: str) -> None:
    said = [m.group(0) for m in HISTORY.finditer(flat(PAGES[page]))]
    assert not said, f"{page}: history belongs in CHANGELOG.md, not the explain page: {said}"


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


@pytest.mark.skipif(not WHEELS.is_dir(), reason="published SGLang wheels not unpacked here")
@pytest.mark.parametrize("page", list(PAGES))
def test_every_citation_reads_back_from_the_wheels(page: str) -> None:
    for path, version, lines in citations(PAGES[page]):
        got = cited_lines(path, version, lines)
        assert any(line.strip() for line in got), f"{page}: {path} {version}:{lines} is blank"


@pytest.mark.skipif(not WHEELS.is_dir(), reason="published SGLang wheels not unpacked here")
@pytest.mark.parametrize("page", list(PAGES))
def test_one_file_cited_for_several_releases_shows_the_same_code(page: str) -> None:
    wrong = [w for chain in chains(PAGES[page]) for w in same_code(chain)]
    assert not wrong, f"{page}: {wrong}"
