"""What the user asks of an SSH connection, apart from paramiko: `check`, `fix`, `probe` and
`bench` build these for every host, and importing paramiko (a third of a `--demo` run's
start-up) is left to the SSH transport itself, for hosts reached over SSH."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from dflash_doctor.errors import TransportError
from dflash_doctor.hosts import Address, parse_address


@dataclass(frozen=True)
class SSHOptions:
    user: str | None = None
    port: int | None = None
    identity_files: tuple[str, ...] = ()
    proxy_jump: str | None = None
    known_hosts: str | None = None
    ssh_config: str | None = None
    accept_new_host_key: bool = False
    connect_timeout: float = 10.0
    command_timeout: float = 60.0
    interactive: bool = field(default_factory=lambda: sys.stdin.isatty())


def parse_target(text: str) -> Address:
    """`[user@]host[:port]` (hosts.parse_address, the one parser), as a transport error."""
    try:
        return parse_address(text)
    except ValueError as e:
        raise TransportError(str(e)) from None
