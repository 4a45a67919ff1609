"""Docker hosts against a real dockerd: the stand-in SGLang in a container, its models at paths
that exist only in the container (fixtures/containers/docker_host.py)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from dflash_doctor.container_targets import parse_container_target
from dflash_doctor.errors import (
    FactError,
    FileMissing,
    HostUnreachable,
    Refused,
    TransportError,
    UsageError,
)
from dflash_doctor.finders.containers import (
    container_of_cgroup,
    container_of_process,
    find_sglang_containers,
)
from dflash_doctor.finders.log import runtime_log
from dflash_doctor.finders.pids import process_ids
from dflash_doctor.finders.process import outside_containers
from dflash_doctor.transport.base import CommandResult, HostReach
from dflash_doctor.transport.docker import (
    DockerTransport,
    _Exec,
    check_container_name,
    parse_inspect,
)
from dflash_doctor.transport.local import LocalTransport
from dflash_doctor.transport.rooted import RootedFiles
from fixtures.containers import docker_host
from tests.cli_helper import doctor as run_doctor
from tests.containers.conftest import ADMIN_KEY

REPO = Path(__file__).resolve().parents[2]


def doctor(*args: str) -> subprocess.CompletedProcess[str]:
    return run_doctor(*args, columns=200, timeout=300, path="/usr/bin:/bin:/usr/sbin:/sbin")


def test_check_reads_the_server_where_the_container_sees_it(sglang_container) -> None:  # type: ignore[no-untyped-def]
    p = doctor("check", f"docker://{sglang_container['name']}", "--format", "json")
    assert p.returncode == 1, p.stdout + p.stderr
    for secret in ("hf_containersecret", ADMIN_KEY):
        assert secret not in p.stdout + p.stderr
    (host,) = json.loads(p.stdout)["hosts"]
    assert host["error"] is None
    facts = host["facts"]
    # The server is the container's pid 1, its models at container-only paths.
    assert facts["launch"]["source"] == "/proc/1/cmdline"
    assert facts["drafter"]["source"] == f"{docker_host.DRAFTER}/config.json"
    assert facts["target"]["source"] == f"{docker_host.TARGET}/config.json"
    assert not Path(docker_host.DRAFTER).exists()  # not this machine's files
    # The log is the one Docker keeps (the server's stdout is a pipe).
    assert facts["log"]["source"] == "docker logs"
    assert facts["log"]["value"]["draft_window_size"] is None
    assert "draft_window_size=None" in facts["log"]["value"]["dflash_init"]["text"]
    results = {r["check_id"]: r["status"] for r in host["results"]}
    assert results["DFD103"] == "failed"


def test_exec_and_rooted_reads_agree(sglang_container) -> None:  # type: ignore[no-untyped-def]
    """The two ways into the container (root here through /proc/PID/root, or `docker exec`
    as its user) give the same answers and the same typed errors."""
    with DockerTransport("c", LocalTransport(), str(sglang_container["name"])) as t:
        assert isinstance(t.files, RootedFiles)
        exec_files = _Exec(t)
        cfg = f"{docker_host.DRAFTER}/config.json"
        for files in (t.files, exec_files):
            assert files.read_file(cfg, max_bytes=1 << 20) == t.read_file(cfg, max_bytes=1 << 20)
            assert files.file_size(cfg) == len(t.read_file(cfg, max_bytes=1 << 20))
            assert files.file_mode(cfg) == 0o644
            assert "Kimi-K2.6-DFlash" in files.list_dir("/models")
            assert files.readlink("/bin") == "usr/bin"
            assert b"".join(files.stream_file(cfg)) == t.read_file(cfg, max_bytes=1 << 20)
            with pytest.raises(FileMissing):
                files.read_file("/models/none.json", max_bytes=100)
            with pytest.raises(TransportError, match="larger than 10 bytes"):
                files.read_file(cfg, max_bytes=10)
            with pytest.raises(TransportError, match="not a regular file"):
                files.read_file("/models", max_bytes=100)
        assert t.real_path("/bin/sh").startswith("/usr/")
        with pytest.raises(Refused):
            t.write_file("/tmp/x", b"")
        # The server is found in the container's own process table.
        assert 1 in process_ids(t)


def test_links_planted_in_the_container_stay_in_it(sglang_container, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A link to an absolute path (or `..` above /) in the container means the container's
    file, never this machine's, though the doctor reads as root through /proc/PID/root."""
    secret = tmp_path / "host-only-secret"
    secret.write_text("host secret\n")
    name = str(sglang_container["name"])
    subprocess.run(
        [
            "docker",
            "exec",
            name,
            "sh",
            "-c",
            'ln -s "$1" /tmp/evil && ln -s ../../../.. /tmp/up',
            "sh",
            str(secret),
        ],
        check=True,
        timeout=60,
    )
    with DockerTransport("c", LocalTransport(), name) as t:
        for files in (t.files, _Exec(t)):
            with pytest.raises(FileMissing):
                files.read_file("/tmp/evil", max_bytes=100)
            with pytest.raises(FileMissing):
                files.read_file(f"/tmp/up{secret}", max_bytes=100)
            # ... while the container's own file through the same climb is read.
            cfg = f"/tmp/up{docker_host.DRAFTER}/config.json"
            assert files.read_file(cfg, max_bytes=1 << 20).startswith(b"{")


def test_discovery_finds_the_sglang_container(sglang_container) -> None:  # type: ignore[no-untyped-def]
    local = LocalTransport()
    found = {c.name: c for c in find_sglang_containers(local)}
    mine = found[str(sglang_container["name"])]
    assert "sglang.launch_server" in mine.argv
    with DockerTransport("c", local, str(sglang_container["name"])) as t:
        assert container_of_process(local, t.info.pid) == t.info.id
        assert "HF_TOKEN" in t.launch_env() and t.launch_env()["HF_TOKEN"] == "***"
        assert t.launch_argv()[:3] == [
            f"{docker_host.VENV}/bin/python3",
            "-m",
            "sglang.launch_server",
        ]
        log = b"".join(runtime_log(t, tail_lines=1000))
        assert b"draft_window_size=None, compact_cache=False" in log
        assert len(b"".join(runtime_log(t, tail_lines=1)).splitlines()) == 1
        assert b"draft_window_size=None" in b"".join(runtime_log(t, tail_lines=9, since="1h"))
        assert b"".join(runtime_log(t, tail_lines=9, since="2099-01-01T00:00:00Z")) == b""
        with pytest.raises(TransportError, match="not a duration"):
            runtime_log(t, tail_lines=9, since="--follow")


def test_a_server_found_on_the_machine_but_in_a_container_is_named_for_docker(
    sglang_container: dict[str, object],
) -> None:
    """`check local` sees a container's processes in the host's /proc, but their paths are
    the container's: such a server is named as docker://NAME, never read from here."""
    name = str(sglang_container["name"])
    local = LocalTransport()
    with DockerTransport("c", local, name) as t:
        host_pid = t.info.pid
    mine = (os.getpid(), b"python\0-m\0sglang.launch_server\0")
    assert outside_containers(local, [(host_pid, b""), mine]) == [mine]
    with pytest.raises(FactError, match=f"runs in a Docker container: check docker://{name}"):
        outside_containers(local, [(host_pid, b"")])
    # And through the CLI: `check local --pid` of a container's process reads nothing of the
    # machine's files in its name.
    p = doctor("check", "local", "--pid", str(host_pid), "--format", "json")
    (host,) = json.loads(p.stdout)["hosts"]
    assert f"check docker://{name}" in (host["facts"]["launch"]["error"] or ""), host["facts"]
    assert host["facts"]["drafter"]["value"] is None


def test_a_missing_or_stopped_container_is_one_line(docker_image: str) -> None:
    with pytest.raises(HostUnreachable, match="no-such-container-dfd"):
        DockerTransport("c", LocalTransport(), "no-such-container-dfd")
    p = doctor("check", "docker://no-such-container-dfd")
    assert p.returncode == 3, p.stdout + p.stderr
    assert "Traceback" not in p.stderr


# -- pure parts (no engine needed) -------------------------------------------------------


@pytest.mark.parametrize("name", ["-rm", "--privileged", "", "a b", "a/b", "x;y", "é"])
def test_container_names_that_could_be_options_are_refused(name: str) -> None:
    with pytest.raises(TransportError):
        check_container_name(name)
    if "/" not in name:  # docker://a/b is container b on SSH host a
        with pytest.raises(UsageError):
            parse_container_target(f"docker://{name}")


def test_targets() -> None:
    assert parse_container_target("docker://sglang") == {
        "name": "docker://sglang",
        "container": "sglang",
    }
    assert parse_container_target("docker://ubuntu@gpu1:2222/sglang-0") == {
        "name": "docker://ubuntu@gpu1:2222/sglang-0",
        "container": "sglang-0",
        "address": "ubuntu@gpu1:2222",
    }
    with pytest.raises(UsageError):
        parse_container_target("docker://-oProxyCommand=x/sglang")


def test_cgroup_names_the_container() -> None:
    cid = "a" * 64
    assert container_of_cgroup(f"0::/system.slice/docker-{cid}.scope\n") == cid
    assert container_of_cgroup(f"9:pids:/docker/{cid}\n") == cid
    assert container_of_cgroup("0::/user.slice/user-1000.slice/session-2.scope\n") is None


def test_inspect_parsing_is_bounded_and_typed() -> None:
    with pytest.raises(TransportError, match="not JSON"):
        parse_inspect(b"{", "c")
    with pytest.raises(TransportError, match="one container"):
        parse_inspect(b"[]", "c")
    with pytest.raises(TransportError, match="Cmd"):
        parse_inspect(b'[{"Config": {"Cmd": [1]}}]', "c")
    info = parse_inspect(
        b'[{"Id": "x", "Name": "/n", "State": {"Running": true, "Pid": 7},'
        b' "Config": {"Entrypoint": ["python3"], "Cmd": ["-m", "sglang.launch_server"]}}]',
        "n",
    )
    assert info.argv == ["python3", "-m", "sglang.launch_server"] and info.pid == 7


def test_a_container_on_an_ssh_hosts_engine(sglang_container: dict[str, object], sshd) -> None:  # type: ignore[no-untyped-def]
    """docker://user@host:port/NAME: the engine's CLI runs on the SSH host; files are read
    by `docker exec` as the container's user (never through /proc/PID/root over SFTP, where
    the host's kernel would resolve the container's absolute links against the host)."""
    name = str(sglang_container["name"])
    p = doctor(
        "check",
        f"docker://{sshd.address}/{name}",
        "--identity",
        str(sshd.client_key),
        "--known-hosts",
        str(sshd.known_hosts),
        "--ssh-config",
        "/dev/null",
        "--format",
        "json",
    )
    assert p.returncode == 1, p.stdout + p.stderr
    for secret in ("hf_containersecret", ADMIN_KEY):
        assert secret not in p.stdout + p.stderr
    (host,) = json.loads(p.stdout)["hosts"]
    assert host["error"] is None, host
    facts = host["facts"]
    assert facts["drafter"]["source"] == f"{docker_host.DRAFTER}/config.json"
    assert facts["log"]["source"] == "docker logs"
    assert facts["sglang_version"]["value"] == "0.5.13"
    assert {r["check_id"]: r["status"] for r in host["results"]}["DFD103"] == "failed"
    ssh_words = ["--identity", str(sshd.client_key), "--known-hosts", str(sshd.known_hosts)]
    ssh_words += ["--ssh-config", "/dev/null"]
    p = doctor("fix", f"docker://{sshd.address}/{name}", *ssh_words)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "docker run --detach" in p.stdout and ADMIN_KEY not in p.stdout
    # Recreating goes through this machine's Engine API only: on an SSH host's engine the
    # command is printed and nothing changes.
    before = subprocess.run(
        ["docker", "inspect", "--format", "{{.Id}}", name], capture_output=True, text=True
    ).stdout
    p = doctor("fix", f"docker://{sshd.address}/{name}", *ssh_words, "--apply", "--yes")
    assert p.returncode == 4 and "not applied" in p.stdout, p.stdout + p.stderr
    after = subprocess.run(
        ["docker", "inspect", "--format", "{{.Id}}", name], capture_output=True, text=True
    ).stdout
    assert after == before


class _Machine:
    """A machine's /proc/PID/cgroup files, as a local transport reads them."""

    reach = HostReach(containers=True)

    def __init__(self, cgroups: dict[int, str]) -> None:
        self.cgroups = cgroups

    def read_file(self, path: str, *, max_bytes: int) -> bytes:
        pid = int(path.split("/")[2])
        if pid not in self.cgroups:
            raise FileMissing(f"m:{path}: no such file or directory")
        return self.cgroups[pid].encode()

    def run(self, argv: list[str], *, timeout: float = 30.0) -> CommandResult:
        return CommandResult(1, b"", b"no engine here")


def test_a_machine_that_is_itself_a_container_keeps_its_processes() -> None:
    from typing import cast

    from dflash_doctor.finders.containers import machine_server_container
    from dflash_doctor.transport.base import Transport

    mine, other = "a" * 64, "b" * 64
    m = cast(
        Transport,
        _Machine(
            {
                1: f"9:pids:/docker/{mine}\n",
                10: f"9:pids:/docker/{mine}\n",
                20: f"9:pids:/docker/{other}\n",
                30: "9:pids:/\n",
            }
        ),
    )
    assert machine_server_container(m, 10) is None  # this machine's own (it is container a)
    assert machine_server_container(m, 20) == other[:12]  # another container: named by id
    assert machine_server_container(m, 30) is None
    assert machine_server_container(m, 99) is None  # gone: nothing to say


class _Engine(LocalTransport):
    """This machine, keeping the argv of every command the Docker transport runs here
    (`run_stream` runs through `run` on this machine)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[list[str]] = []

    def run(self, argv: list[str], **kw: Any) -> CommandResult:
        self.calls.append(argv)
        return super().run(argv, **kw)


def test_a_check_of_a_container_is_one_docker_exec(sglang_container) -> None:  # type: ignore[no-untyped-def]
    """The gathering's commands (pgrep, id, the interpreter checks, SGLang's own parse, the
    HTTP client) and reads come from one exec of the bundle, not one `docker exec` each
    (issue 28), with the facts the execs gave: the server, its models, its version."""
    from dflash_doctor.gather import gather
    from dflash_doctor.hosts import HostSpec

    engine = _Engine()
    name = str(sglang_container["name"])
    with DockerTransport("c", engine, name) as t:
        facts = gather(HostSpec.of("c", container=name), t)
    execs = [c for c in engine.calls if c[1] == "exec"]
    assert len(execs) == 1, [c[8:10] for c in execs]
    # The container's name is the one word after `exec`; everything else is the fixed guard,
    # the fixed unpacker and one packed (base64) word.
    assert execs[0][2] == name and "dflash-bundle" in execs[0]
    assert facts.launch.source == "/proc/1/cmdline"
    assert facts.drafter.source == f"{docker_host.DRAFTER}/config.json"
    assert facts.sglang_version.value == "0.5.13"
    assert facts.runtime is not None and facts.runtime.value is not None
    assert facts.launch.value is not None and facts.launch.value.parser == "sglang"
