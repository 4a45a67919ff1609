"""How the tool reaches a host. Only this package does I/O to hosts."""

from dflash_doctor.transport.base import CommandResult, Transport
from dflash_doctor.transport.local import LocalTransport

__all__ = ["CommandResult", "LocalTransport", "Transport"]
