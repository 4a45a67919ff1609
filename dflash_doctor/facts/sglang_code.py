"""Decide SGLang behaviour from the host's installed source text (read, never imported).

Serving teams run patched builds, so a version string says little about what the code
does. `srt/models/dflash.py` from 0.5.14 builds each draft layer from `config.layer_types`:
it calls `get_dflash_layer_types(config)` and passes `sliding_window_size=` to
`RadixAttention` (models/dflash.py 0.5.14:31-66 and :151, 0.5.23:45-46, :166-190, :330).
0.5.11-0.5.13 never mention `layer_types` and build every layer as
`attn_type=AttentionType.ENCODER_ONLY` (0.5.11:112-118, 0.5.13:116-122).
"""

from __future__ import annotations

import re
from typing import Any

from dflash_doctor.errors import FactError
from dflash_doctor.facts.capture_hooks import MODELS_PACKAGE, parse_module
from dflash_doctor.facts.models import SGLangCode

# One bound for every SGLang source file read from a host as text: models/dflash.py is
# 13-60 KiB in the wheels, model files < 200 KiB; anything far larger is not that file.
MAX_SOURCE_BYTES = 4 * 1024 * 1024

_LAYER_TYPES_RE = re.compile(r"^[ \t]*(?=[^#\s])[^\n]*\blayer_types\b", re.MULTILINE)
_WINDOW_ARG_RE = re.compile(r"^[ \t]*(?=[^#\s])[^\n]*\bsliding_window_size\s*=", re.MULTILINE)
_ENTRY_RE = re.compile(r"^EntryClass\s*=", re.MULTILINE)


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def parse_dflash_model_source(data: bytes, path: str) -> SGLangCode:
    """Whether this `srt/models/dflash.py` builds draft layers from `layer_types`."""
    if len(data) > MAX_SOURCE_BYTES:
        raise FactError(f"{len(data)} bytes, larger than {MAX_SOURCE_BYTES}")
    text = data.decode("utf-8", "replace")
    if "class DFlash" not in text and "DFlash" not in text:
        raise FactError("not SGLang's DFlash model file (no DFlash class)")
    types = _LAYER_TYPES_RE.search(text)
    window = _WINDOW_ARG_RE.search(text)
    entry = _entry_classes(text)
    if types and window:
        line = _line_of(text, types.start())
        snippet = text[types.start() : text.find("\n", types.start())].strip()[:120]
        return SGLangCode(path=path, honours_layer_types=True, evidence=snippet, line=line, **entry)
    return SGLangCode(
        path=path,
        honours_layer_types=False,
        evidence="no code reads layer_types and passes a sliding_window_size",
        **entry,
    )


def _entry_classes(text: str) -> dict[str, Any]:
    """The class names `EntryClass` registers (what SGLang's model registry keys the drafter
    architecture by: srt/models/registry.py 0.5.23:118-148) and its line; empty when none."""
    found = _ENTRY_RE.search(text)
    if found is None:
        return {}
    names = parse_module(text, f"{MODELS_PACKAGE}.dflash").entry
    return {"entry_classes": names, "entry_line": _line_of(text, found.start())}
