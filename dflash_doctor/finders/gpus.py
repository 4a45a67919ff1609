"""The host's GPUs: nvidia-smi's answer wherever the transport's `reach` says it is (run on
the host, on a container's engine host, a recorded tree's `_captured/` file); refused
offline."""

from __future__ import annotations

from dflash_doctor.errors import OutOfReach, TransportError
from dflash_doctor.facts.gpus import NVIDIA_SMI_ARGV, parse_nvidia_smi
from dflash_doctor.facts.models import Fact, Gpu
from dflash_doctor.finders.base import attempt
from dflash_doctor.transport.base import Transport

# A recorded nvidia-smi answer is one small CSV.
MAX_CAPTURE_BYTES = 1 << 20


def find_gpus(t: Transport, host: str) -> Fact[list[Gpu]]:
    """The GPUs fact, its source named as the transport's reach names it."""
    return attempt(host, t.reach.gpu_source, lambda: parse_nvidia_smi(gpu_table(t)))


def gpu_table(t: Transport) -> bytes:
    """nvidia-smi's CSV answer to facts.gpus.NVIDIA_SMI_ARGV, where `t.reach` says it is."""
    reach = t.reach
    if reach.gpus == "none":
        raise OutOfReach(reach.gpus_refused)
    if reach.gpus == "file":
        return t.read_file(reach.gpu_source, max_bytes=MAX_CAPTURE_BYTES)
    if reach.gpus == "machine":
        if t.machine is None:
            raise OutOfReach(f"{t.host}: no machine to list GPUs of")
        return gpu_table(t.machine)
    res = t.run(NVIDIA_SMI_ARGV, timeout=20)
    if not res.ok:
        first = res.stderr.decode("utf-8", "replace").strip().splitlines()[:1]
        raise TransportError(
            f"{t.host}: nvidia-smi failed: {first[0] if first else res.returncode}"
        )
    return res.stdout
