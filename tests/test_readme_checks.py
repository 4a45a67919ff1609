"""README's check table is the catalog (the pages themselves: checks/test_check_docs.py)."""

from __future__ import annotations

import re

from dflash_doctor.checks import CATALOG
from dflash_doctor.checks.retired import RETIRED
from tests.conftest import REPO


def table() -> list[tuple[str, str]]:
    """(id, severity column) of each row of README's check table, in README's order."""
    text = (REPO / "README.md").read_text()
    return re.findall(r"^\| (DFD\d+) \| ([^|]+) \|", text, re.MULTILINE)


def test_readme_check_table_is_the_catalog() -> None:
    listed = [check_id for check_id, _ in table()]
    assert len(listed) == len(set(listed)), "a check id is listed twice"
    assert listed == sorted(CATALOG), "README's table lists other checks than the catalog"


def test_readme_check_table_is_generated_from_the_catalog() -> None:
    """A new check needs no README edit by hand: `scripts/gen_check_table.py --write`."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen", REPO / "scripts/gen_check_table.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    text = (REPO / "README.md").read_text()
    assert gen.with_table(text) == text, "run: python3 scripts/gen_check_table.py --write"


def test_readme_check_table_gives_each_checks_severity() -> None:
    """The column starts with the catalog severity; what follows names the exceptions."""
    wrong = [
        (check_id, column.strip(), CATALOG[check_id].severity.value)
        for check_id, column in table()
        if column.split()[0] != CATALOG[check_id].severity.value
    ]
    assert not wrong, f"README severity differs from the catalog: {wrong}"


def test_readme_names_every_retired_id() -> None:
    text = (REPO / "README.md").read_text()
    said = " ".join(text[text.index("Retired ids, never reused") :].split("\n\n")[0].split())
    assert set(re.findall(r"DFD\d+ \(", said)) == {f"{r} (" for r in RETIRED}, said
