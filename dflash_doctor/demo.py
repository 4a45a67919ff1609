"""The built-in demo host: the seed scenario, recorded, shipped inside the package."""

from __future__ import annotations

from pathlib import Path

from dflash_doctor.hosts import HostSpec, load_recorded_host

DEMO_DIR = Path(__file__).parent / "demo_hosts" / "seed"


def demo_host() -> HostSpec:
    return load_recorded_host(str(DEMO_DIR), name="demo-seed")
