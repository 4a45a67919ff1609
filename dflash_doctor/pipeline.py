"""gather facts -> run checks -> host report, for each host; the one place they are joined."""

from __future__ import annotations

from dflash_doctor.errors import HostUnreachable, TransportError
from dflash_doctor.gather import gather
from dflash_doctor.hosts import HostSpec
from dflash_doctor.report import HostReport, fact_errors
from dflash_doctor.runner import run_checks
from dflash_doctor.transport.base import Transport
from dflash_doctor.transport.local import LocalTransport


def open_transport(spec: HostSpec) -> Transport:
    if spec.address is None:
        return LocalTransport(spec.name)
    raise HostUnreachable(f"{spec.name}: SSH transport is not available in this build")


def check_host(spec: HostSpec, select: list[str] | None = None) -> HostReport:
    try:
        transport = open_transport(spec)
    except TransportError as e:
        return HostReport(host=spec.name, reachable=False, error=str(e))
    try:
        facts = gather(spec, transport)
    except HostUnreachable as e:
        return HostReport(host=spec.name, reachable=False, error=str(e))
    finally:
        transport.close()
    return HostReport(
        host=spec.name,
        facts=facts,
        fact_errors=fact_errors(facts),
        results=run_checks(facts, select),
    )
