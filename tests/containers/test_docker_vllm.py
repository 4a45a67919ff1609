"""A Docker container running `vllm serve` (the stand-in vLLM, fixtures/fake_vllm) against a
real dockerd: `check docker://NAME` judges it with the vLLM checks, from the container's
process, its `vllm-*.dist-info`, its HTTP API and the log Docker keeps."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from dflash_doctor.checks import CATALOG
from fixtures.containers import docker_host
from fixtures.sshd import free_port
from tests.cli_helper import doctor as run_doctor

VLLM_CHECKS = {cid for cid, c in CATALOG.items() if c.engine == "vllm"}


@pytest.fixture(scope="module")
def vllm_image() -> Iterator[str]:
    why = docker_host.docker_unavailable()
    if why is not None:
        pytest.skip(f"no Docker engine: {why}")
    tag = f"dflash-doctor-test-vllm:{os.getpid()}"
    docker_host.build_vllm_image(tag, "0.30.0")
    yield tag
    docker_host.remove_image(tag)


@pytest.fixture
def vllm_container(vllm_image: str) -> Iterator[str]:
    """The stand-in vLLM 0.30.0 drafting 16 tokens with a block_size-16 DFlash drafter."""
    name = f"dfd-vllm-{os.getpid()}-{free_port()}"
    port = free_port()
    docker_host.start_vllm(name, vllm_image, port, "0.30.0", 16)
    try:
        docker_host.wait_healthy(name, port)
        yield name
    finally:
        docker_host.remove(name)


def test_check_judges_a_container_that_runs_vllm(vllm_container: str) -> None:
    p = run_doctor(
        "check", f"docker://{vllm_container}", "--format", "json",
        columns=200, timeout=300, path="/usr/bin:/bin:/usr/sbin:/sbin",
    )  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr  # DFD301 is a warning: no error
    assert "hf_containersecret" not in p.stdout + p.stderr
    (host,) = json.loads(p.stdout)["hosts"]
    facts: dict[str, Any] = host["facts"]
    assert facts["engine"]["value"] == "vllm"
    assert facts["vllm_launch"]["source"] == "/proc/1"
    assert facts["vllm_version"] == {**facts["vllm_version"], "value": "0.30.0"}
    assert facts["log"]["value"] is not None  # the log Docker keeps
    results = {r["check_id"]: r for r in host["results"]}
    assert "17-token blocks" in results["DFD301"]["findings"][0]["message"]
    assert results["DFD308"]["status"] == "passed"
    for cid, r in results.items():
        if cid not in VLLM_CHECKS:
            assert r["status"] == "skipped" and "vLLM server" in r["reason"], cid
    assert "does not use DFLASH" not in p.stdout
