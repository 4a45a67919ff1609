"""`fix` on a `docker run` container that serves vLLM (the stand-in, fixtures/fake_vllm)
against a real dockerd: the `--speculative-config` key edited in the container's argv, the
container recreated from its own inspect JSON, `/health` awaited on its port, the host
re-gathered and re-checked; a recreated container that fails start-up is rolled back to the
old one."""

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
from tests.containers.test_docker_fix import fixer, inspect

VERSION = "0.30.0"


@pytest.fixture(scope="module")
def vllm_image() -> Iterator[str]:
    why = docker_host.docker_unavailable()
    if why is not None:
        pytest.skip(f"no Docker engine: {why}")
    tag = f"dflash-doctor-test-vllm-fix:{os.getpid()}"
    docker_host.build_vllm_image(tag, VERSION)
    yield tag
    docker_host.remove_image(tag)


def _container(image: str, *env: str) -> Iterator[tuple[str, int]]:
    """The stand-in vLLM drafting 16 tokens with a block_size-16 drafter (DFD301: vLLM
    counts the anchor apart, so 15 serves the drafter as trained)."""
    name, port = f"dfd-vllm-fix-{os.getpid()}-{free_port()}", free_port()
    docker_host.start_vllm(name, image, port, VERSION, 16, *env)
    try:
        docker_host.wait_healthy(name, port)
        yield name, port
    finally:
        docker_host.remove(name, f"{name}-dflash-old")


@pytest.fixture
def vllm_container(vllm_image: str) -> Iterator[tuple[str, int]]:
    yield from _container(vllm_image)


@pytest.fixture
def failing_vllm_container(vllm_image: str) -> Iterator[tuple[str, int]]:
    """Dies at start-up (vLLM's KV-cache memory refusal) once it drafts 15 tokens."""
    yield from _container(vllm_image, "FAKE_VLLM_NO_KV_MEMORY_WITH_TOKENS=15")


def _speculative(cmd: list[str]) -> dict[str, Any]:
    return json.loads(cmd[cmd.index("--speculative-config") + 1])  # type: ignore[no-any-return]


def test_docker_run_vllm_container_is_recreated_with_the_key_and_verified(
    vllm_container: tuple[str, int], tmp_path: Path
) -> None:
    name, port = vllm_container
    fix = fixer(tmp_path / "state")
    before = inspect(name)
    p = fix(f"docker://{name}")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "docker run --detach" in p.stdout and '"num_speculative_tokens": 15' in p.stdout
    assert "hf_containersecret" not in p.stdout and "HF_TOKEN=***" in p.stdout
    assert inspect(name)["Id"] == before["Id"]  # a dry run changes nothing

    p = fix(f"docker://{name}", "--apply", "--yes")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "verified" in p.stdout and f"healthy: http://127.0.0.1:{port}/health" in p.stdout
    after = inspect(name)
    assert after["Id"] != before["Id"] and docker_host.healthy(port)
    old, new = before["Config"]["Cmd"], after["Config"]["Cmd"]
    # Only the one key changed, in the argv word itself (no shell quoting: an argv).
    assert _speculative(new) == {**_speculative(old), "num_speculative_tokens": 15}
    i = old.index("--speculative-config") + 1
    assert new[:i] == old[:i] and new[i + 1 :] == old[i + 1 :]
    for key in ("Env", "Labels", "Image", "Entrypoint"):
        assert after["Config"][key] == before["Config"][key]
    assert after["HostConfig"]["Binds"] == before["HostConfig"]["Binds"]
    (backup,) = (tmp_path / "state/docker").glob(f"{name}.*.inspect.json")
    assert json.loads(backup.read_text())["Id"] == before["Id"]
    gone = subprocess.run(["docker", "inspect", f"{name}-dflash-old"], capture_output=True)
    assert gone.returncode != 0  # the old container removed once the new one was verified

    p = fix(f"docker://{name}", "--apply", "--yes")
    assert p.returncode == 0 and "nothing to change" in p.stdout, p.stdout + p.stderr


def test_docker_run_vllm_container_that_fails_start_up_is_rolled_back(
    failing_vllm_container: tuple[str, int], tmp_path: Path
) -> None:
    name, port = failing_vllm_container
    before = inspect(name)
    p = fixer(tmp_path / "state")(f"docker://{name}", "--apply", "--yes")
    assert p.returncode == 4, p.stdout + p.stderr
    assert "rolled back" in p.stdout
    assert "No available memory for the cache blocks" in p.stdout  # its last log lines
    after = inspect(name)
    assert after["Id"] == before["Id"]  # the very same container, running again
    assert after["State"]["Running"] and docker_host.healthy(port)
    assert _speculative(after["Config"]["Cmd"])["num_speculative_tokens"] == 16
