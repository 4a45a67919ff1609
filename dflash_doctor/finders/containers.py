"""Which Docker container a machine's process runs in, and which containers run SGLang:
asked of a machine whose own process table shows its containers' processes
(`Transport.reach.containers`: local, SSH), through `read_file` and the engine's `docker`
CLI run there."""

from __future__ import annotations

import re
from dataclasses import dataclass

from dflash_doctor.errors import DoctorError
from dflash_doctor.redact import redact_argv
from dflash_doctor.transport.base import Transport
from dflash_doctor.transport.docker import CONTAINER_NAME, docker_argv, parse_inspect

# The cgroup path of a process in a container names the container's 64-hex id:
# cgroupfs `/docker/ID`, systemd `/system.slice/docker-ID.scope`.
CGROUP_CONTAINER = re.compile(r"(?:/docker/|/docker-)([0-9a-f]{64})(?:\.scope)?(?:/|$)")


def container_of_cgroup(text: str) -> str | None:
    """The container id a `/proc/PID/cgroup` names, or None (the process is on the host)."""
    for line in text.splitlines()[:256]:
        m = CGROUP_CONTAINER.search(line)
        if m:
            return m.group(1)
    return None


@dataclass(frozen=True)
class FoundContainer:
    name: str
    id: str
    image: str
    argv: list[str]


def list_containers(outer: Transport) -> list[str]:
    """Names of the running containers (`docker ps`), empty when Docker does not answer."""
    try:
        res = outer.run(docker_argv("ps", "--no-trunc", "--format", "{{.Names}}"), timeout=30)
    except DoctorError:
        return []
    if not res.ok:
        return []
    names = res.stdout.decode("utf-8", "replace").split()
    return [n for n in names if CONTAINER_NAME.fullmatch(n)][:1024]


def find_sglang_containers(outer: Transport) -> list[FoundContainer]:
    """Running containers whose command runs an SGLang server (`docker ps` + inspect)."""
    from dflash_doctor.facts.launch import sglang_args_start

    found = []
    for name in list_containers(outer):
        try:
            res = outer.run(docker_argv("inspect", "--type", "container", "--", name), timeout=30)
            info = parse_inspect(res.stdout, name) if res.ok else None
        except DoctorError:
            continue
        if info is None or not info.running:
            continue
        try:
            sglang_args_start(info.argv)
        except DoctorError:
            if not any("sglang" in a and "launch_server" in a for a in info.argv):
                continue
        found.append(FoundContainer(info.name, info.id, info.image, redact_argv(info.argv)))
    return found


def container_of_process(outer: Transport, pid: int) -> str | None:
    """The id of the container a host process runs in (its cgroup names it), or None."""
    try:
        data = outer.read_file(f"/proc/{pid}/cgroup", max_bytes=64 * 1024)
    except DoctorError:
        return None
    return container_of_cgroup(data.decode("utf-8", "replace"))


def container_name(outer: Transport, container_id: str) -> str:
    """The name of a container (for a `docker://` target), else its short id."""
    try:
        res = outer.run(
            docker_argv(
                "inspect", "--type", "container", "--format", "{{.Name}}", "--", container_id
            ),
            timeout=30,
        )
    except DoctorError:
        return container_id[:12]
    name = res.stdout.decode("utf-8", "replace").strip().lstrip("/")
    return name if res.ok and CONTAINER_NAME.fullmatch(name) else container_id[:12]


def machine_server_container(t: Transport, pid: int) -> str | None:
    """The container (its name, else short id) that process `pid` of machine `t` runs in;
    None when it runs on the machine itself, or `t` is no machine (a container, a recorded
    tree: their /proc shows only their own processes)."""
    if not t.reach.containers:
        return None
    cid = container_of_process(t, pid)
    # A machine that is itself a container (without a cgroup namespace) shows its own id
    # for every process, init included: those processes are this machine's.
    if cid is None or cid == container_of_process(t, 1):
        return None
    return container_name(t, cid)
