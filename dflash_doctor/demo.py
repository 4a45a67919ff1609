"""The built-in demo hosts, recorded and shipped inside the package.

`seed` (what `--demo` checks) is the seed scenario on SGLang 0.5.13, where a sliding-window
drafter served without a draft window really attends over the whole context. `v0523` is the
same host on SGLang 0.5.23, whose srt/models/dflash.py honours `layer_types`: the same
launch is correct there and the doctor says so.
"""

from __future__ import annotations

from pathlib import Path

from dflash_doctor.errors import UsageError
from dflash_doctor.hosts import HostSpec, load_recorded_host

DEMO_ROOT = Path(__file__).parent / "demo_hosts"
DEMO_DIR = DEMO_ROOT / "seed"
DEMO_HOSTS = ("seed", "v0523")


def demo_host(name: str = "seed") -> HostSpec:
    if name not in DEMO_HOSTS:
        raise UsageError(f"unknown demo host {name!r} (choose from {', '.join(DEMO_HOSTS)})")
    return load_recorded_host(str(DEMO_ROOT / name), name=f"demo-{name}")
