"""The one place that decides what kind of host a HostSpec names and opens its transport.

Everything above the transport asks the transport (it answers, or raises Refused with its
reason); nothing there maps paths or branches on the kind of host. A new kind of host is one
opener in `OPENERS` and one rule in `host_kind`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from dflash_doctor.errors import UsageError
from dflash_doctor.hosts import HostSpec
from dflash_doctor.transport.base import HostKind, Transport
from dflash_doctor.transport.local import LocalTransport
from dflash_doctor.transport.offline import OfflineTransport
from dflash_doctor.transport.recorded import RecordedTransport

if TYPE_CHECKING:  # paramiko is imported only where SSH is used
    from dflash_doctor.transport.ssh_options import SSHOptions

Opener = Callable[[HostSpec, "SSHOptions | None"], Transport]


def host_kind(spec: HostSpec) -> HostKind:
    """What kind of host `spec` names: the only reading of `offline`, `root` and `address`."""
    if spec.offline:
        return "offline"
    if spec.connection.pod is not None:
        return "kubernetes"
    if spec.connection.container is not None:
        return "docker"
    if spec.recorded:
        return "recorded"
    return "ssh" if spec.connection.address is not None else "local"


def _local(spec: HostSpec, ssh: SSHOptions | None) -> Transport:
    return LocalTransport(spec.name)


def _ssh(spec: HostSpec, ssh: SSHOptions | None) -> Transport:
    # Imported here so that only the SSH path loads paramiko.
    from dataclasses import replace

    from dflash_doctor.transport.ssh import SSHTransport
    from dflash_doctor.transport.ssh_options import SSHOptions

    assert spec.connection.address is not None
    options = ssh or SSHOptions()
    options = replace(
        options,
        user=spec.connection.user or options.user,
        port=spec.connection.port or options.port,
        identity_files=((spec.connection.identity_file,) if spec.connection.identity_file else ())
        + options.identity_files,
        proxy_jump=spec.connection.proxy_jump or options.proxy_jump,
    )
    return SSHTransport(spec.name, spec.connection.address, options)


def _machine(spec: HostSpec, ssh: SSHOptions | None) -> Transport:
    """The machine itself (local or SSH): a recorded tree lies there, a container's engine
    or kubectl runs there."""
    return _ssh(spec, ssh) if spec.connection.address is not None else _local(spec, ssh)


def _recorded(spec: HostSpec, ssh: SSHOptions | None) -> Transport:
    return RecordedTransport(_machine(spec, ssh), spec.root)


def _container(spec: HostSpec, ssh: SSHOptions | None) -> Transport:
    from dflash_doctor.transport.containers import open_container

    return open_container(spec, _machine(spec, ssh))


def _offline(spec: HostSpec, ssh: SSHOptions | None) -> Transport:
    # Offline means no host: the launch and model files are this machine's (under a
    # recorded tree's root when one is given).
    inner = _local(spec, ssh)
    if spec.recorded:
        inner = RecordedTransport(inner, spec.root)
    return OfflineTransport(inner)


OPENERS: dict[HostKind, Opener] = {
    "local": _local,
    "ssh": _ssh,
    "recorded": _recorded,
    "offline": _offline,
    "docker": _container,
    "kubernetes": _container,
}


def open_transport(spec: HostSpec, ssh: SSHOptions | None = None) -> Transport:
    """The transport to `spec`'s host (a context manager: closed on exit)."""
    kind = host_kind(spec)
    opener = OPENERS.get(kind)
    if opener is None:
        raise UsageError(f"{spec.name}: no transport opens {kind} hosts")
    return opener(spec, ssh)


def open_here(name: str) -> Transport:
    """This machine's files as an offline host: `fix` writes an inventory file with it."""
    return OfflineTransport(LocalTransport(name))


# Why `fix` would not relaunch this host (without connecting to it), or None.
RELAUNCH_REFUSED: dict[HostKind, str] = {
    "recorded": "a recorded host tree is never relaunched",
    "offline": "offline: nothing runs, so nothing is relaunched",
}


def relaunch_refusal(spec: HostSpec) -> str | None:
    """Why `fix --apply` would not relaunch `spec`'s host, decided without connecting."""
    why = RELAUNCH_REFUSED.get(host_kind(spec))
    return f"{spec.name}: {why}" if why else None
