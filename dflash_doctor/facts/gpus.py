"""Parse `nvidia-smi --query-gpu=index,name,memory.total,memory.used,driver_version
--format=csv,noheader,nounits` output."""

from __future__ import annotations

import csv
import io

from dflash_doctor.errors import FactError
from dflash_doctor.facts.models import Gpu

NVIDIA_SMI_ARGV = [
    "nvidia-smi",
    "--query-gpu=index,name,memory.total,memory.used,driver_version",
    "--format=csv,noheader,nounits",
]


def _opt_int(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isdigit() else None


def parse_nvidia_smi(data: bytes) -> list[Gpu]:
    text = data.decode("utf-8", "replace")
    gpus = []
    for row in csv.reader(io.StringIO(text)):
        if not row or not "".join(row).strip():
            continue
        if len(row) < 2 or not row[0].strip().isdigit():
            raise FactError(f"unexpected nvidia-smi row: {','.join(row)[:80]!r}")
        gpus.append(
            Gpu(
                index=int(row[0]),
                name=row[1].strip(),
                memory_total_mib=_opt_int(row[2]) if len(row) > 2 else None,
                memory_used_mib=_opt_int(row[3]) if len(row) > 3 else None,
                driver_version=row[4].strip() if len(row) > 4 else None,
            )
        )
    if not gpus:
        raise FactError("nvidia-smi listed no GPUs")
    return gpus
