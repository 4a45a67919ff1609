"""`fix` on Docker hosts against a real dockerd: a `docker run` container recreated from its own
inspect JSON, and a compose-managed one through its compose file; each verified, and each
failed relaunch rolled back so that the host keeps its server."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fixtures.containers import docker_host
from fixtures.sshd import free_port
from tests.cli_helper import doctor
from tests.containers.conftest import ADMIN_KEY

REPO = Path(__file__).resolve().parents[2]


def fixer(state: Path):  # type: ignore[no-untyped-def]
    def fix(*args: str) -> subprocess.CompletedProcess[str]:
        return doctor(
            *("fix", *args, "--health-timeout", "120"),
            columns=250,
            timeout=600,
            path="/usr/bin:/bin:/usr/sbin:/sbin",
            env={"DFLASH_DOCTOR_STATE_DIR": str(state)},
        )

    return fix


def inspect(name: str) -> dict:  # type: ignore[type-arg]
    out = subprocess.run(["docker", "inspect", name], capture_output=True, check=True, timeout=60)
    return json.loads(out.stdout)[0]  # type: ignore[no-any-return]


def window(port: int) -> object:
    return docker_host.server_info(port)["speculative_draft_window_size"]


def test_docker_run_container_is_recreated_verified_and_rolled_back(
    sglang_container: dict[str, Any], tmp_path: Path
) -> None:
    name, port = str(sglang_container["name"]), int(sglang_container["port"])
    fix = fixer(tmp_path / "state")
    before = inspect(name)
    p = fix(f"docker://{name}")
    assert p.returncode == 0, p.stdout + p.stderr
    # The exact `docker run`, its command changed, its secret never shown.
    assert "docker run --detach" in p.stdout and "--network=host" in p.stdout
    assert "--speculative-draft-window-size 2048" in p.stdout
    assert "hf_containersecret" not in p.stdout and "HF_TOKEN=***" in p.stdout
    assert ADMIN_KEY not in p.stdout and "--admin-api-key '***'" in p.stdout
    assert inspect(name)["Id"] == before["Id"]  # a dry run changes nothing

    p = fix(f"docker://{name}", "--apply", "--yes")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "verified" in p.stdout
    assert window(port) == 2048
    after = inspect(name)
    assert after["Id"] != before["Id"]
    # Every other setting kept: mounts, network, environment, labels, image.
    for key in ("Binds", "NetworkMode"):
        assert after["HostConfig"][key] == before["HostConfig"][key]
    for key in ("Env", "Labels", "Image", "Entrypoint"):
        assert after["Config"][key] == before["Config"][key]
    assert after["Config"]["Cmd"][-2:] == ["--speculative-draft-window-size", "2048"]
    assert after["Config"]["Cmd"][:-2] == before["Config"]["Cmd"]  # the real secret kept
    assert ADMIN_KEY not in p.stdout
    (backup,) = (tmp_path / "state/docker").glob(f"{name}.*.inspect.json")
    assert json.loads(backup.read_text())["Id"] == before["Id"]
    assert oct(backup.stat().st_mode & 0o777) == "0o600"  # it holds the container's secrets
    assert (
        subprocess.run(["docker", "inspect", f"{name}-dflash-old"], capture_output=True).returncode
        != 0
    )

    p = fix(f"docker://{name}", "--apply", "--yes")
    assert p.returncode == 0 and "nothing to change" in p.stdout

    p = fix(f"docker://{name}", "--rollback", "--yes")
    assert p.returncode == 0, p.stdout + p.stderr
    assert window(port) is None
    assert inspect(name)["Config"]["Cmd"] == before["Config"]["Cmd"]


def test_docker_run_relaunch_that_fails_keeps_the_old_container(
    docker_image: str, tmp_path: Path
) -> None:
    """The new container cannot start with a window (the stand-in fails its startup, as an
    out-of-memory server would): the old one, kept aside, runs again."""
    name, port = f"dfd-oom-{os.getpid()}-{free_port()}", free_port()
    subprocess.run(
        [
            "docker",
            "run",
            "--detach",
            "--name",
            name,
            *docker_host.run_options(),
            "--env",
            "FAKE_SGLANG_OOM_WITH_WINDOW=1",
            docker_image,
            *docker_host.server_command(port),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    try:
        docker_host.wait_healthy(name, port)
        before = inspect(name)["Id"]
        p = fixer(tmp_path / "state")(f"docker://{name}", "--apply", "--yes")
        assert p.returncode == 4, p.stdout + p.stderr
        assert "rolled back" in p.stdout
        assert "CUDA out of memory (stand-in failure)" in p.stdout  # its last log lines
        assert inspect(name)["Id"] == before  # the very same container, running again
        assert docker_host.healthy(port) and window(port) is None
    finally:
        docker_host.remove(name, f"{name}-dflash-old")


@pytest.fixture
def compose_service(docker_image: str, tmp_path: Path) -> Iterator[dict[str, object]]:
    tool = docker_host.compose_tool()
    if tool is None:
        pytest.skip("neither `docker compose` nor `docker-compose` is installed")
    project, port = f"dfdc{os.getpid()}{free_port()}", free_port()
    directory = tmp_path / "app"
    directory.mkdir()
    compose = directory / "compose.yaml"
    compose.write_text(docker_host.compose_file(port, docker_image))
    up = [*tool, "--project-name", project, "--file", str(compose)]
    subprocess.run(
        [*up, "up", "--detach"], check=True, capture_output=True, cwd=directory, timeout=300
    )
    out = subprocess.run(
        [
            "docker",
            "ps",
            "--filter",
            f"label=com.docker.compose.project={project}",
            "--format",
            "{{.Names}}",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    name = out.stdout.split()[0]
    try:
        docker_host.wait_healthy(name, port)
        yield {"name": name, "port": port, "file": compose}
    finally:
        subprocess.run([*up, "down"], capture_output=True, cwd=directory, timeout=300)


def test_compose_container_is_fixed_through_its_compose_file(
    compose_service: dict[str, Any], tmp_path: Path
) -> None:
    name, port, compose = compose_service["name"], compose_service["port"], compose_service["file"]
    fix = fixer(tmp_path / "state")
    original = compose.read_bytes()
    p = fix(f"docker://{name}")
    assert p.returncode == 0, p.stdout + p.stderr
    added = [line for line in p.stdout.splitlines() if line.startswith("+ ")]
    assert f"+++ b{compose}" in p.stdout
    assert "--speculative-draft-window-size" in added[0] and "2048" in added[1], p.stdout
    assert "up --detach -- sglang" in p.stdout
    assert compose.read_bytes() == original

    p = fix(f"docker://{name}", "--apply", "--yes")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "verified" in p.stdout and window(port) == 2048
    (backup,) = compose.parent.glob("compose.yaml.dflash-doctor-*.bak")
    assert backup.read_bytes() == original

    p = fix(f"docker://{name}", "--rollback", "--yes")
    assert p.returncode == 0, p.stdout + p.stderr
    assert compose.read_bytes() == original and window(port) is None
