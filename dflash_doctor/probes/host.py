"""Probe one host: gather its drafter facts, ship the probe there, read its result."""

from __future__ import annotations

import json
import posixpath
import sys
from dataclasses import dataclass

from dflash_doctor.errors import FactError
from dflash_doctor.facts.models import HostFacts
from dflash_doctor.gather import Gatherer
from dflash_doctor.hosts import HostSpec
from dflash_doctor.probes.models import ProbeResult
from dflash_doctor.probes.runner import DEFAULT_BUDGET_MIB, probe_spec, run_probe
from dflash_doctor.transport.base import Transport
from dflash_doctor.transport.ssh import SSHOptions


@dataclass(frozen=True)
class ProbeOptions:
    contexts: list[int] | None = None
    window: int | None = None
    budget_mib: int = DEFAULT_BUDGET_MIB
    device: str = "auto"
    dtype: str = "float32"
    weights: str = "random"
    python: str | None = None


def probe_with(
    transport: Transport, spec: HostSpec, facts: HostFacts, options: ProbeOptions
) -> ProbeResult:
    drafter = facts.drafter.value
    if drafter is None:
        raise FactError(f"cannot probe: {facts.drafter.error}")
    raw = transport.read_file(spec.path(drafter.path), max_bytes=8 << 20)
    try:
        config = json.loads(raw)
    except ValueError:
        raise FactError(f"{spec.name}:{drafter.path}: malformed JSON") from None
    launch = facts.launch.value
    # A recorded host's files lie on this machine: its probe runs with this Python.
    python = options.python or (
        sys.executable
        if spec.recorded and not transport.remote
        else (launch.python if launch and launch.python else "python3")
    )
    run_spec = probe_spec(
        drafter,
        config,
        contexts=options.contexts,
        window=options.window,
        launch=launch,
        budget_mib=options.budget_mib,
        device=options.device,
        dtype=options.dtype,
        weights=options.weights,
        weights_dir=spec.path(posixpath.dirname(drafter.path)),
    )
    return run_probe(transport, run_spec, python=python)


def probe_host(
    spec: HostSpec, options: ProbeOptions, *, ssh: SSHOptions | None = None
) -> ProbeResult:
    from dflash_doctor.pipeline import open_transport

    transport = open_transport(spec, ssh)
    try:
        return probe_with(transport, spec, Gatherer(spec, transport).gather(), options)
    finally:
        transport.close()
