"""Host text made safe for a terminal: no escape sequences, no control characters.

Log lines, flag values and file names come from hosts that other people control; an ESC
sequence in one could rewrite the screen, retitle the terminal or hide a finding. Every
renderer passes host text through `clean`. Tab and newline stay; every other C0 and C1
control, DEL and the bidirectional overrides become U+FFFD.
"""

from __future__ import annotations

_BIDI = (0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069)
_TABLE = {
    c: "\ufffd"
    for c in (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0), *_BIDI)
    if c not in (0x09, 0x0A)
}


def clean(text: str) -> str:
    """`text` without terminal control characters (linear: one table lookup per char)."""
    return text.translate(_TABLE)
