"""A real Docker engine (dockerd) for the container tests; skipped, with the reason, without one."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from fixtures.containers import docker_host
from fixtures.sshd import free_port

ADMIN_KEY = "sk-admin-dockersecret"


@pytest.fixture(scope="session")
def docker_image() -> Iterator[str]:
    why = docker_host.docker_unavailable()
    if why is not None:
        pytest.skip(f"no Docker engine: {why}")
    tag = f"dflash-doctor-test:{os.getpid()}"
    docker_host.build_image(tag, "0.5.13")
    yield tag
    docker_host.remove_image(tag)


@pytest.fixture
def sglang_container(docker_image: str) -> Iterator[dict[str, object]]:
    """The stand-in SGLang 0.5.13 serving the seed scenario inside a container."""
    name = f"dfd-sglang-{os.getpid()}-{free_port()}"
    port = free_port()
    # A secret in the command: never shown, and the recreated container must get it back.
    docker_host.start(name, docker_image, port, "--admin-api-key", ADMIN_KEY)
    try:
        docker_host.wait_healthy(name, port)
        yield {"name": name, "port": port, "image": docker_image}
    finally:
        docker_host.remove(name, f"{name}-dflash-old")
