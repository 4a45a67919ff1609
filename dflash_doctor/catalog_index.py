"""The catalog's table of contents, so that `dflash-doctor checks` starts fast.

Listing the checks by importing them loads pydantic and every fact model: about 10x
`python -c pass`. `catalog_index.json` (generated: `python -m dflash_doctor.catalog_index`)
keeps each check's id, severity, name and summary together with a digest of the check
sources it was made from. `catalog_entries()` uses it only while that digest still matches
the files in `checks/`; after any edit there it imports the catalog itself, so the listing
is never stale, only slower until the index is regenerated (tests/test_startup.py says so).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import NamedTuple

from dflash_doctor.defaults import Severity

PACKAGE_DIR = Path(__file__).parent
INDEX_PATH = PACKAGE_DIR / "catalog_index.json"
CHECKS_DIR = PACKAGE_DIR / "checks"


class CatalogEntry(NamedTuple):
    id: str
    severity: Severity
    name: str
    summary: str


def source_digest() -> str:
    """sha256 over the check package's sources (names and bytes, in name order)."""
    h = hashlib.sha256()
    for path in sorted(CHECKS_DIR.glob("*.py")):
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def imported_entries() -> list[CatalogEntry]:
    from dflash_doctor.checks import CATALOG

    return [CatalogEntry(c.id, c.severity, c.name, c.summary) for c in CATALOG.values()]


def indexed_entries() -> list[CatalogEntry] | None:
    """The index's entries, or None when it is missing, unreadable or stale."""
    try:
        doc = json.loads(INDEX_PATH.read_text(encoding="utf-8"))
        if doc.get("digest") != source_digest():
            return None
        return [
            CatalogEntry(e["id"], Severity(e["severity"]), e["name"], e["summary"])
            for e in doc["checks"]
        ]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def catalog_entries() -> list[CatalogEntry]:
    return indexed_entries() or imported_entries()


def index_document() -> dict[str, object]:
    return {
        "digest": source_digest(),
        "checks": [e._asdict() for e in imported_entries()],
    }


def main() -> int:
    INDEX_PATH.write_text(json.dumps(index_document(), indent=1) + "\n", encoding="utf-8")
    print(f"wrote {INDEX_PATH}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
