"""The host's GPUs: nvidia-smi's answer wherever the transport asks it (the host, a recorded
tree's `_captured/`, a container's engine host); refused offline."""

from __future__ import annotations

from dflash_doctor.facts.gpus import parse_nvidia_smi
from dflash_doctor.facts.models import Fact, Gpu
from dflash_doctor.finders.base import attempt
from dflash_doctor.transport.base import Transport


def find_gpus(t: Transport, host: str) -> Fact[list[Gpu]]:
    return attempt(host, t.gpu_source, lambda: parse_nvidia_smi(t.gpu_table()))
