"""The check catalog. Importing this package registers every check."""

from dflash_doctor.checks import (
    backend,
    block_size,
    launch_command,
    renamed_options,
    runtime,
    target_model,
    window,
)
from dflash_doctor.checks.base import REGISTRY, Check

__all__ = [
    "CATALOG",
    "Check",
    "backend",
    "block_size",
    "launch_command",
    "renamed_options",
    "runtime",
    "target_model",
    "window",
]

CATALOG: dict[str, Check] = dict(sorted(REGISTRY.items()))
