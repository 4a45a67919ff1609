"""README's check table lists exactly the catalog, and every check's explain page is whole."""

from __future__ import annotations

import re

from dflash_doctor.checks import CATALOG
from tests.conftest import REPO


def test_readme_check_table_is_the_catalog() -> None:
    text = (REPO / "README.md").read_text()
    listed = re.findall(r"^\| (DFD\d+) \|", text, re.MULTILINE)
    assert len(listed) == len(set(listed)), "a check id is listed twice"
    assert sorted(listed) == sorted(CATALOG)


def test_every_check_documents_what_it_compares_and_its_versions() -> None:
    for check_id, check in CATALOG.items():
        doc = check.doc
        for section in ("What", "Why", "Fix", "Versions"):
            assert re.search(rf"\*\*{section}\b", doc), f"{check_id} has no {section} section"
