"""The citation guard, on every machine: each SGLang line the package cites is known.

tests/data/cited_lines.json (scripts/gen_citation_lines.py) holds a fingerprint of every
`path.py VERSION:LINES` citation in dflash_doctor/, read from the wheels. Without the wheels
(CI), a citation the file does not hold fails: an invented one, or one whose lines changed
without the file being regenerated. The generator refuses a citation that does not read
back (no such file or line, a blank range, a later release's lines showing other code than
the first's), so only citations that passed that read-back reach the file. With the wheels,
the file must be exactly what they give, so it cannot be edited by hand into agreement.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import citations as c

REGENERATE = "python3 scripts/gen_citation_lines.py"


def test_every_citation_in_the_package_is_in_the_data() -> None:
    missing = c.unknown(c.package_citations(), c.load_data())
    assert not missing, f"cited lines not read from the wheels; run {REGENERATE}: {missing}"


def test_the_data_holds_only_citations_the_package_makes() -> None:
    made = {c.key(x) for x in c.package_citations()}
    stale = sorted(set(c.load_data()) - made)
    assert not stale, f"no longer cited; run {REGENERATE}: {stale}"


def test_an_invented_citation_fails_the_guard(tmp_path: Path) -> None:
    """A module citing a line nobody read, or a real citation with its line moved, is
    reported by the guard, with or without the wheels."""
    data = c.load_data()
    real = next(iter(data))
    path, _, cite = real.rpartition(" ")
    version, _, lines = cite.partition(":")
    moved = f"{path} {version}:{int(lines.split(',')[0].split('-')[0]) + 1}"
    package = tmp_path / "dflash_doctor"
    package.mkdir()
    (package / "mod.py").write_text(
        f'"""Reads `{real}`."""\n'
        "# SGLang refuses it (srt/server_args.py 0.5.23:123456,\n"
        f"# {version}:99) and also {moved}.\n"
    )
    found = c.package_citations(package)
    assert c.key(("srt/server_args.py", "0.5.23", "123456")) in c.unknown(found, data)
    assert c.unknown(found, data) == sorted(
        {"srt/server_args.py 0.5.23:123456", f"srt/server_args.py {version}:99", moved}
    )


def test_comment_citations_are_found_across_lines(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(
        "# see `arg_groups/choices.py`\n#   0.5.20:107-115, 0.5.23:103-111\nx = 1\n"
    )
    assert c.package_citations(tmp_path) == {
        ("arg_groups/choices.py", "0.5.20", "107-115"),
        ("arg_groups/choices.py", "0.5.23", "103-111"),
    }


@pytest.mark.skipif(not c.WHEELS.is_dir(), reason="published SGLang wheels not unpacked here")
def test_the_data_is_what_the_wheels_give() -> None:
    body, errors = c.generate(c.package_sources())
    assert not errors, errors
    assert body == c.load_data(), f"the data differs from the wheels; run {REGENERATE}"
