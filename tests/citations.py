"""SGLang line citations: how they are written, found in the package, and read from the wheels.

A citation of SGLang's code is written `path.py VERSION:LINES` (`srt/server_args.py
0.5.11:524-525, 0.5.14:1484-1491`: later versions of the same file follow after a comma),
the path relative to the wheel's `sglang/` package or any tail of it that names one file.
They sit in check pages (docstrings), module docstrings and comments all over the package.

The cited lines of every release are fingerprinted into tests/data/cited_lines.json by
scripts/gen_citation_lines.py (a sha256 of the cited lines, stripped, and the identifiers
in them that the file uses rarely), so the guard in tests/checks/test_citation_data.py runs
on machines without the wheels (CI): a citation the data does not hold fails everywhere.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "dflash_doctor"
WHEELS = Path("/work/wheels/src")
# vLLM's wheels (docs/vllm.md): a citation whose path starts with `vllm/` names the
# file from the package root, `vllm/config/speculative.py 0.34.0:455`.
VLLM_WHEELS = Path("/work/wheels/vllm/src")
VLLM_PREFIX = "vllm/"
DATA = REPO / "tests" / "data" / "cited_lines.json"

VERSION = r"0\.\d+\.\d+(?:\.post\d+)?"
LINES = r"\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*"
# `path.py 0.5.11:51-89, 0.5.23:215-228`: one file, one or more releases.
CHAIN = re.compile(
    rf"(?P<path>[A-Za-z_][\w/]*\.py)\s+(?P<cites>{VERSION}:{LINES}(?:,\s+{VERSION}:{LINES})*)"
)
ONE = re.compile(rf"({VERSION}):({LINES})")
# Anything that looks like a line citation: each must be part of a CHAIN.
LOOSE = re.compile(rf"{VERSION}:\d|\.py:\d")
# An identifier in code (5+ characters, so `self`, `args` and the like do not count) that
# the file uses at most RARE times: shared by two releases' cited lines, it is the same code.
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{4,}")
RARE = 10
# How many of a citation's rare identifiers the data file keeps: the rarest first.
KEPT = 6

Citation = tuple[str, str, str]  # (path, version, lines)


def flat(doc: str) -> str:
    """The text as one line without code marks, as the citations are matched."""
    return " ".join(doc.split()).replace("`", "")


def citations(doc: str) -> list[Citation]:
    """(path, version, lines) of every citation in a text."""
    return [
        (m.group("path"), version, lines)
        for m in CHAIN.finditer(flat(doc))
        for version, lines in ONE.findall(m.group("cites"))
    ]


def chains(doc: str) -> list[list[Citation]]:
    """The citations of a text grouped by chain: one file, its releases in order."""
    return [
        [(m.group("path"), v, lines) for v, lines in ONE.findall(m.group("cites"))]
        for m in CHAIN.finditer(flat(doc))
    ]


def source_text(path: Path) -> str:
    """A module's text with comment marks taken off, so a comment's citation reads as prose
    even where it wraps onto the next comment line."""
    return re.sub(r"(?m)^\s*#+", " ", path.read_text(encoding="utf-8"))


def package_sources(root: Path = PACKAGE) -> dict[str, str]:
    """Every module of the package (docstrings, comments, code), by path under the repo."""
    return {
        str(p.relative_to(root.parent)): source_text(p)
        for p in sorted(root.rglob("*.py"))
        if "demo_hosts" not in p.parts
    }


def package_citations(root: Path = PACKAGE) -> set[Citation]:
    """Every citation written anywhere in the package."""
    return {c for text in package_sources(root).values() for c in citations(text)}


def key(citation: Citation) -> str:
    path, version, lines = citation
    return f"{path} {version}:{lines}"


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
    if path.startswith(VLLM_PREFIX):
        vllm_file = VLLM_WHEELS / version / path
        assert vllm_file.is_file(), f"{path} {version}: no such file in vLLM {version}"
        return vllm_file
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


def fingerprint(citation: Citation) -> dict[str, object]:
    """What the data file keeps of one citation: the sha256 of its lines (each stripped,
    blank ones dropped) and the KEPT identifiers in them that the whole file uses least."""
    path, version, lines = citation
    got = [line.strip() for line in cited_lines(path, version, lines)]
    got = [line for line in got if line]
    assert got, f"{key(citation)} is blank"
    uses = Counter(IDENTIFIER.findall(wheel_file(path, version).read_text("utf-8")))
    names = {n for n in IDENTIFIER.findall("\n".join(got)) if uses[n] <= RARE}
    rare = sorted(sorted(names, key=lambda n: (uses[n], n))[:KEPT])
    # 64 bits of the hash: enough to see any change of the cited lines, half the bytes.
    digest = hashlib.sha256("\n".join(got).encode()).hexdigest()[:16]
    return {"sha256": digest, "rare": rare}


def same_code(chain: list[Citation]) -> list[str]:
    """Where one file is cited for several releases, each later release's lines must show
    the first's code: the same lines, or sharing an identifier the later file uses at most
    RARE times."""
    (path, first, first_lines), *later = chain
    seen = set(IDENTIFIER.findall("\n".join(cited_lines(path, first, first_lines))))
    wrong = []
    for _, version, lines in later:
        if fingerprint(chain[0])["sha256"] == fingerprint((path, version, lines))["sha256"]:
            continue
        uses = Counter(IDENTIFIER.findall(wheel_file(path, version).read_text("utf-8")))
        here = set(IDENTIFIER.findall("\n".join(cited_lines(path, version, lines))))
        if not any(uses[name] <= RARE for name in here & seen):
            wrong.append(f"{path} {version}:{lines} shows other code than {first}:{first_lines}")
    return wrong


def generate(sources: dict[str, str]) -> tuple[dict[str, dict[str, object]], list[str]]:
    """The data file's body for the citations in these texts, read from the wheels, and what
    is wrong with them (a file missing from a release, a path naming two files, a range past
    the end, a blank range, a later release's lines showing other code than the first's)."""
    body: dict[str, dict[str, object]] = {}
    errors: list[str] = []
    for c in sorted({c for text in sources.values() for c in citations(text)}, key=key):
        try:
            body[key(c)] = fingerprint(c)
        except (AssertionError, OSError, UnicodeDecodeError) as e:
            errors.append(f"{key(c)}: {e}")
    for module, text in sources.items():
        for chain in chains(text):
            if all(key(c) in body for c in chain):
                errors += [f"{module}: {w}" for w in same_code(chain)]
    return body, errors


def load_data(path: Path = DATA) -> dict[str, dict[str, object]]:
    """The committed fingerprints, by citation."""
    body: dict[str, dict[str, object]] = json.loads(path.read_text())["citations"]
    return body


def unknown(cites: Iterable[Citation], data: dict[str, dict[str, object]]) -> list[str]:
    """The citations the data does not hold (new, or changed since it was generated)."""
    return sorted({key(c) for c in cites} - set(data))
