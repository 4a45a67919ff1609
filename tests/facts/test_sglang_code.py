"""Behaviour read from SGLang's installed source text, checked against every wheel."""

from __future__ import annotations

from pathlib import Path

import pytest

from dflash_doctor.errors import FactError
from dflash_doctor.facts.sglang_code import MAX_SOURCE_BYTES, parse_dflash_model_source
from dflash_doctor.sglang_versions import LAYER_TYPES_SINCE, parse_version

WHEELS = Path("/work/wheels/src")


@pytest.mark.skipif(not WHEELS.is_dir(), reason="SGLang wheels not unpacked here")
def test_every_wheel_agrees_with_the_version_table() -> None:
    """srt/models/dflash.py: 0.5.13:116-122 ignores layer_types, 0.5.14:44-66 honours them."""
    seen = 0
    for root in sorted(WHEELS.iterdir()):
        src = root / "sglang/srt/models/dflash.py"
        version = parse_version(root.name)
        if not src.is_file() or version is None:
            continue
        code = parse_dflash_model_source(src.read_bytes(), str(src))
        assert code.honours_layer_types == (version >= LAYER_TYPES_SINCE), root.name
        seen += 1
    assert seen >= 13


def test_demo_hosts_carry_their_versions_source() -> None:
    demo = Path(__file__).resolve().parents[2] / "dflash_doctor/demo_hosts"
    site = "opt/sglang/venv/lib/python3.11/site-packages/sglang/srt/models/dflash.py"
    seed = parse_dflash_model_source((demo / "seed" / site).read_bytes(), "seed")
    v0523 = parse_dflash_model_source((demo / "v0523" / site).read_bytes(), "v0523")
    assert not seed.honours_layer_types and v0523.honours_layer_types
    assert v0523.line is not None and "get_dflash_layer_types" in v0523.evidence


def test_commented_out_code_does_not_count() -> None:
    text = b"class DFlashAttention:\n    # layer_types = get(config)\n    # sliding_window_size=3\n"
    assert not parse_dflash_model_source(text, "x").honours_layer_types


def test_hostile_inputs_are_one_line_errors() -> None:
    with pytest.raises(FactError, match="not SGLang's DFlash"):
        parse_dflash_model_source(b"\xff\xfe binary", "x")
    with pytest.raises(FactError, match="larger than"):
        parse_dflash_model_source(b"DFlash" + b"x" * (MAX_SOURCE_BYTES + 1), "x")
