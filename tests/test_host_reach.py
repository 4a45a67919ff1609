"""The transport is a narrow I/O seam (issue 27): it states what its host offers as data
(`HostReach`), and the finders decide from it, asking through `run`, `read_file` and
`list_dir` alone (finders/pids.py, finders/gpus.py, finders/log.py)."""

from __future__ import annotations

import pytest

from dflash_doctor.errors import OutOfReach, Refused, TransportError
from dflash_doctor.facts.gpus import NVIDIA_SMI_ARGV
from dflash_doctor.finders.containers import machine_server_container
from dflash_doctor.finders.gpus import find_gpus, gpu_table
from dflash_doctor.finders.log import runtime_log
from dflash_doctor.finders.pids import process_ids
from dflash_doctor.transport.base import HostReach, LogCommand, Transport
from tests.fakes import Answer, FakeHost, fails, ok

CSV = "0, NVIDIA H200, 143771, 1, 570.86.15\n"
PROC = {"/proc/12/cmdline": b"python\0-m\0sglang.launch_server\0", "/proc/self/x": b""}


def test_the_protocol_carries_no_discovery() -> None:
    members = set(vars(Transport)) | set(getattr(Transport, "__annotations__", {}))
    assert {"process_ids", "gpu_table", "runtime_log", "gpu_source"} & members == set()
    assert {"reach", "machine", "run", "read_file", "list_dir"} <= members


def test_a_host_that_runs_commands_is_asked_pgrep_then_proc() -> None:
    host = FakeHost(files=PROC, commands={("pgrep", "-f", "sglang"): ok("5\n7\n")})
    assert process_ids(host) == [5, 7]
    assert "list /proc" not in host.asked
    bare = FakeHost(files=PROC)  # no pgrep there (exit 127): /proc's own listing
    assert process_ids(bare) == [12]
    assert bare.asked == ["run pgrep -f sglang", "list /proc"]


def test_a_proc_only_table_never_runs_pgrep() -> None:
    # A recorded tree's own /proc: pgrep would list the processes of this machine.
    host = FakeHost(files=PROC, commands={("pgrep",): ok("99\n")})
    host.reach = HostReach(processes="proc")
    assert process_ids(host) == [12]
    assert not any(a.startswith("run") for a in host.asked)


def test_no_process_table_is_out_of_reach_with_the_hosts_reason() -> None:
    host = FakeHost(files=PROC, commands={("pgrep",): ok("99\n")})
    host.reach = HostReach(processes="none", processes_refused="fake: offline: no process")
    with pytest.raises(OutOfReach, match=r"^fake: offline: no process$"):
        process_ids(host)
    assert host.asked == []


def test_gpus_are_listed_where_the_reach_says() -> None:
    here = FakeHost(commands={tuple(NVIDIA_SMI_ARGV): ok(CSV)})
    assert gpu_table(here) == CSV.encode()
    # A container: the engine host's nvidia-smi, never one the container may carry.
    engine = FakeHost(host="engine", commands={tuple(NVIDIA_SMI_ARGV): ok(CSV)})
    box = FakeHost(host="box", commands={tuple(NVIDIA_SMI_ARGV): ok("1, other, 1, 1, 1\n")})
    box.reach, box.machine = HostReach(gpus="machine"), engine
    assert gpu_table(box) == CSV.encode() and box.asked == []
    # A recorded tree: the captured answer, read as a file.
    tree = FakeHost(files={"/_captured/smi.csv": CSV})
    tree.reach = HostReach(gpus="file", gpu_source="/_captured/smi.csv")
    fact = find_gpus(tree, "tree")
    assert fact.value is not None and fact.value[0].name == "NVIDIA H200"
    assert fact.source == "/_captured/smi.csv" and tree.asked == ["read /_captured/smi.csv"]


def test_gpu_failures_read_as_before() -> None:
    broken = FakeHost(commands={("nvidia-smi",): fails("NVIDIA-SMI has failed\nmore")})
    with pytest.raises(TransportError, match=r"^fake: nvidia-smi failed: NVIDIA-SMI has failed$"):
        gpu_table(broken)
    off = FakeHost()
    off.reach = HostReach(gpus="none", gpus_refused="fake: offline: no GPUs")
    fact = find_gpus(off, "fake")
    assert fact.error == "fake: offline: no GPUs" and fact.out_of_reach


def test_a_runtime_log_is_asked_on_the_machine_that_keeps_it() -> None:
    engine = FakeHost(host="engine", commands={("docker", "logs"): ok("a\nb\n")})
    box = FakeHost(host="box")

    logs = LogCommand(("docker", "logs"), "--tail=", (("[0-9]+h", "--since"),), "hours only")
    box.reach, box.machine = HostReach(log_command=logs), engine
    assert b"".join(runtime_log(box, tail_lines=5, since="1h")) == b"a\nb\n"
    assert engine.asked == ["run docker logs --tail=5"] and box.asked == []
    # The bounds are data: a `since` that matches no form never reaches the host.
    assert logs.argv(0, "2h") == ["docker", "logs", "--tail=1", "--since", "2h"]
    with pytest.raises(TransportError, match=r"^--since '--follow': hours only$"):
        runtime_log(box, tail_lines=5, since="--follow")
    assert engine.asked == ["run docker logs --tail=5"]


def test_a_log_that_is_a_file_is_refused_with_where_to_find_it() -> None:
    host = FakeHost()
    with pytest.raises(Refused, match=r"^fake: the server log is a file here"):
        runtime_log(host, tail_lines=5)
    host.log_refused = "fake: offline: no log"
    with pytest.raises(OutOfReach, match=r"^fake: offline: no log$"):
        runtime_log(host, tail_lines=5)


def test_only_a_machine_is_asked_which_container_runs_a_process() -> None:
    cgroups = {"/proc/7/cgroup": f"0::/system.slice/docker-{'c' * 64}.scope\n"}
    names: dict[tuple[str, ...], Answer] = {("docker", "inspect"): ok("/box\n")}
    machine = FakeHost(files={**cgroups, "/proc/1/cgroup": "0::/\n"}, commands=names)
    assert machine.reach.containers and machine_server_container(machine, 7) == "box"
    # A container's (or a recorded tree's) /proc shows only its own processes.
    box = FakeHost(files=cgroups, commands=names, kind="docker")
    assert machine_server_container(box, 7) is None and box.asked == []
