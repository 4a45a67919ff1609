"""The check catalog. Importing this package registers every check."""

from dflash_doctor.checks import (
    accept_threshold,
    backend,
    block_size,
    context,
    crash_signatures,
    environment,
    hardware,
    launch_command,
    model_wiring,
    rejected_requests,
    renamed_options,
    runtime,
    runtime_args,
    silent_collapse,
    slow_paths,
    startup_refusals,
    target_model,
    topology,
    version_drift,
    window,
)
from dflash_doctor.checks.base import REGISTRY, Check

__all__ = [
    "CATALOG",
    "Check",
    "accept_threshold",
    "backend",
    "block_size",
    "context",
    "crash_signatures",
    "environment",
    "hardware",
    "launch_command",
    "model_wiring",
    "rejected_requests",
    "renamed_options",
    "runtime",
    "runtime_args",
    "silent_collapse",
    "slow_paths",
    "startup_refusals",
    "target_model",
    "topology",
    "version_drift",
    "window",
]

CATALOG: dict[str, Check] = dict(sorted(REGISTRY.items()))
