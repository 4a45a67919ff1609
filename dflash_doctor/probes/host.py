"""Probe one host: gather its drafter facts, ship the probe there, read its result."""

from __future__ import annotations

import json
import posixpath
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from dflash_doctor.checks.views import behaviour, page_size, version_facts, window_state
from dflash_doctor.errors import FactError
from dflash_doctor.facts.models import HostFacts
from dflash_doctor.facts.probe_result import ProbeResult
from dflash_doctor.gather import gather
from dflash_doctor.host_exec import HostExec
from dflash_doctor.hosts import HostSpec
from dflash_doctor.probes.runner import (
    DEFAULT_AGREEMENT_TOKENS,
    DEFAULT_BUDGET_MIB,
    probe_spec,
    run_probe,
)
from dflash_doctor.transport.base import Transport

if TYPE_CHECKING:  # paramiko is imported only where SSH is used
    from dflash_doctor.transport.ssh_options import SSHOptions


@dataclass(frozen=True)
class ProbeOptions:
    contexts: list[int] | None = None
    window: int | None = None
    budget_mib: int = DEFAULT_BUDGET_MIB
    device: str = "auto"
    dtype: str = "float32"
    weights: str = "random"
    python: str | None = None
    agreement_tokens: int = DEFAULT_AGREEMENT_TOKENS


def probe_with(
    transport: Transport,
    spec: HostSpec,
    facts: HostFacts,
    options: ProbeOptions,
    on_progress: Callable[[str], None] | None = None,
) -> ProbeResult:
    drafter = facts.drafter.value
    if drafter is None:
        raise FactError(f"cannot probe: {facts.drafter.error}")
    raw = transport.read_file(drafter.path, max_bytes=8 << 20)
    try:
        config = json.loads(raw)
    except ValueError:
        raise FactError(f"{spec.name}:{drafter.path}: malformed JSON") from None
    launch = facts.launch.value
    launcher: list[str] | None = None
    if transport.live_refused and not transport.remote and options.python is None:
        # No live host, its files on this machine (a recorded tree): the probe runs with
        # this Python.
        python = sys.executable
    else:
        # The host's interpreter runs as the server's owner, or not at all (host_exec).
        python = options.python or (launch.python if launch and launch.python else None) or ""
        chosen = python or None
        # A recorded tree's process is not on this machine: no owner to take.
        pid = None if transport.live_refused else facts.server_pid()
        host = HostExec(transport, spec)
        launcher = host.prefix(chosen, pid=pid) if chosen else host.system_python(pid=pid)
    # The served spans follow the host's SGLang as the span model reads it (its own code,
    # else the version table; unknown: both readings are probed) and the draft window it
    # runs with (the log's init line over the launch flags).
    b = behaviour(facts)
    vf = version_facts(facts)
    run_spec = probe_spec(
        drafter,
        config,
        honours_layer_types=b.honours_layer_types if b is not None else None,
        draft_window=window_state(facts).window,
        version=vf.label if vf is not None else None,
        contexts=options.contexts,
        window=options.window,
        tp_size=launch.tp_size if launch else 1,
        page_size=page_size(facts),
        kv_cache_dtype=launch.kv_cache_dtype if launch else None,
        budget_mib=options.budget_mib,
        device=options.device,
        dtype=options.dtype,
        weights=options.weights,
        weights_dir=transport.command_path(posixpath.dirname(drafter.path)),
        agreement_tokens=options.agreement_tokens,
    )
    return run_probe(transport, run_spec, python=python, on_progress=on_progress, launcher=launcher)


def probe_host(
    spec: HostSpec,
    options: ProbeOptions,
    *,
    ssh: SSHOptions | None = None,
    on_progress: Callable[[str], None] | None = None,
) -> ProbeResult:
    from dflash_doctor.transport.open import open_transport

    transport = open_transport(spec, ssh)
    try:
        facts = gather(spec, transport)
        return probe_with(transport, spec, facts, options, on_progress)
    finally:
        transport.close()
