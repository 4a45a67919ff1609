"""Probe one host: gather its drafter facts, ship the probe there, read its result."""

from __future__ import annotations

import json
import posixpath
import sys

from dflash_doctor.errors import FactError, HostUnreachable
from dflash_doctor.gather import Gatherer
from dflash_doctor.hosts import HostSpec
from dflash_doctor.pipeline import open_transport
from dflash_doctor.probes.models import ProbeResult
from dflash_doctor.probes.runner import probe_spec, run_probe
from dflash_doctor.transport.ssh import SSHOptions


def probe_host(
    spec: HostSpec,
    *,
    ssh: SSHOptions | None = None,
    contexts: list[int] | None = None,
    window: int | None = None,
    budget_mib: int = 4096,
    device: str = "auto",
    dtype: str = "float32",
    weights: str = "random",
    python: str | None = None,
) -> ProbeResult:
    transport = open_transport(spec, ssh)
    try:
        facts = Gatherer(spec, transport).gather()
        drafter = facts.drafter.value
        if drafter is None:
            raise FactError(f"cannot probe: {facts.drafter.error}")
        raw = transport.read_file(spec.path(drafter.path), max_bytes=8 << 20)
        config = json.loads(raw)
        launch = facts.launch.value
        # A recorded host's files lie on this machine: its probe runs with this Python.
        chosen = python or (
            sys.executable
            if spec.recorded and not transport.remote
            else (launch.python if launch and launch.python else "python3")
        )
        run_spec = probe_spec(
            drafter,
            config,
            contexts=contexts,
            window=window,
            launch=launch,
            budget_mib=budget_mib,
            device=device,
            dtype=dtype,
            weights=weights,
            weights_dir=spec.path(posixpath.dirname(drafter.path)),
        )
        return run_probe(transport, run_spec, python=chosen)
    except HostUnreachable:
        raise
    finally:
        transport.close()
