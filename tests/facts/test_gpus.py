from __future__ import annotations

import pytest

from dflash_doctor.errors import FactError
from dflash_doctor.facts.gpus import parse_nvidia_smi


def test_parse() -> None:
    gpus = parse_nvidia_smi(
        b"0, NVIDIA H200, 143771, 1000, 570.1\n1, NVIDIA H200, 143771, [N/A], 570.1\n"
    )
    assert [g.index for g in gpus] == [0, 1]
    assert gpus[0].memory_total_mib == 143771 and gpus[1].memory_used_mib is None


@pytest.mark.parametrize("data", [b"", b"No devices were found\n", b"\xff\xfe\x00"])
def test_hostile(data: bytes) -> None:
    with pytest.raises(FactError):
        parse_nvidia_smi(data)
