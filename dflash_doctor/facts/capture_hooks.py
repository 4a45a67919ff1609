"""Which target architectures each SGLang release can capture DFLASH hidden states from.

Data generated from the published wheels by `scripts/gen_dflash_capture.py` into
`dflash_doctor/data/dflash_capture.json` (to add a release: unpack its wheel beside the
others and rerun the script). Read once, on first use.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

DATA_FILE = "dflash_capture.json"


def release_key(version: str) -> tuple[int, ...]:
    """`0.5.13.post1` -> (0, 5, 13, 1): post releases sort after their base release."""
    return tuple(int(x) for x in re.findall(r"\d+", version.split("+", 1)[0])[:4])


@cache
def _data() -> dict[str, object]:
    text = resources.files("dflash_doctor.data").joinpath(DATA_FILE).read_text("utf-8")
    loaded: dict[str, object] = json.loads(text)
    return loaded


@dataclass(frozen=True)
class CaptureAnswer:
    release: str  # the release whose data answered
    exact: bool  # the host runs exactly that release
    known: bool  # the release registers the architecture at all
    captures: bool  # ... and it implements set_dflash_layers_to_capture
    next_capturing: str | None  # the first newer release that captures it, if any


def _in_runs(runs: list[list[str]], release: str) -> bool:
    key = release_key(release)
    return any(release_key(a) <= key <= release_key(b) for a, b in runs)


def capture_support(version: str, architecture: str) -> CaptureAnswer | None:
    """The answer for the newest release in the data at or below `version` (None: older)."""
    data = _data()
    releases = [str(r) for r in data["releases"]]  # type: ignore[attr-defined]
    key = release_key(version)
    below = [r for r in releases if release_key(r) <= key]
    if not below:
        return None
    release = below[-1]
    capture: dict[str, list[list[str]]] = data["capture"]  # type: ignore[assignment]
    known: dict[str, list[list[str]]] = data["known"]  # type: ignore[assignment]
    runs = capture.get(architecture, [])
    newer = [r for r in releases if release_key(r) > release_key(release) and _in_runs(runs, r)]
    return CaptureAnswer(
        release=release,
        exact=release_key(release) == key,
        known=_in_runs(known.get(architecture, []), release),
        captures=_in_runs(runs, release),
        next_capturing=newer[0] if newer else None,
    )
