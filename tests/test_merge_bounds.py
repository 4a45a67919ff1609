"""`report merge` refuses a report whose JSON would cost far more memory than its size (issue
22 item 8).

A 63 MiB file of tiny JSON values (`[[],[],...]`) became 3.2 GB of Python objects: the byte
bound alone does not bound memory. The file's values are counted (bytes, no parse) before it
is parsed; past the bound it is one line, and memory stays under a stated ceiling.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from dflash_doctor.fleet.load import MAX_REPORT_BYTES, MAX_REPORT_VALUES, LoadError, load_report

# The file itself (8 MiB), its text, and the count: nothing like the ~180 MB that parsing
# 2.8 million empty lists takes.
CEILING_BYTES = 48 * 1024 * 1024


def test_many_tiny_values_refused_before_parsing(tmp_path: Path) -> None:
    n = 2_800_000  # 8 MiB: well under the byte bound, over the value bound
    path = tmp_path / "flat.json"
    path.write_bytes(b"[" + b"[]," * n + b"[]]")
    assert path.stat().st_size < MAX_REPORT_BYTES and n > MAX_REPORT_VALUES
    tracemalloc.start()
    try:
        with pytest.raises(LoadError) as e:
            load_report(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "\n" not in str(e.value) and str(e.value).startswith(f"{path}: ")
    assert "values" in str(e.value)
    assert peak < CEILING_BYTES, f"peak {peak} bytes"
