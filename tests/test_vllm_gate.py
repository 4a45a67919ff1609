"""The gate and inventories over launches that run vLLM (issue 29): a repository's vLLM
launch file with `--vllm-version`, and an inventory host whose `launch:` is a `vllm serve`
command, are judged by the vLLM checks at that release, never by SGLang's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from dflash_doctor.checks import CATALOG
from tests.cli_helper import doctor
from tests.conftest import REPO

CASES = REPO / "fixtures" / "checks"
DFLASH2 = CASES / "DFD307" / "fires"
SHARED = CASES / "_shared"
VLLM_CHECKS = {cid for cid, c in CATALOG.items() if c.engine == "vllm"}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A deployment repository: a vLLM launch forcing the V1 runner on a DFlash 2 drafter."""
    shutil.copytree(DFLASH2, tmp_path / "deploy")
    shutil.copytree(SHARED / "qwen3-8b", tmp_path / "deploy/target")
    return tmp_path


def gate(cwd: Path, *args: str) -> tuple[int, dict[str, Any]]:
    p = doctor("gate", *args, "--format", "json", cwd=cwd, columns=200, env={"HOME": str(cwd)})
    return p.returncode, json.loads(p.stdout)


def results(host: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["check_id"]: r for r in host["results"]}


@pytest.mark.parametrize(
    ("version", "severity", "says"),
    [("0.28.0", "warning", "as DFlash 1"), ("0.29.0", "error", "refuses"), (None, "error", "")],
)
def test_a_vllm_launch_file_is_gated_at_the_declared_release(
    repo: Path, version: str | None, severity: str, says: str
) -> None:
    pinned = ["--vllm-version", version] if version else []
    code, report = gate(
        repo, "deploy/launch.sh", "--drafter", "deploy/drafter", "--target", "deploy/target",
        *pinned,
    )  # fmt: skip
    (host,) = report["hosts"]
    assert host["facts"]["engine"]["value"] == "vllm"
    assert host["facts"]["vllm_version"]["value"] == version
    got = results(host)
    (finding,) = got["DFD307"]["findings"]
    assert finding["severity"] == severity and says in finding["message"]
    assert code == (1 if severity == "error" else 0)
    for cid, r in got.items():
        if cid not in VLLM_CHECKS:
            assert r["status"] == "skipped" and "vLLM server" in r["reason"], cid


def test_an_inventory_launch_command_that_runs_vllm_is_judged_as_vllm(tmp_path: Path) -> None:
    command = (
        "VLLM_USE_V2_MODEL_RUNNER=0 vllm serve Qwen/Qwen3-8B --speculative-config "
        """'{"method": "dflash", "model": "z-lab/Qwen3-8B-DFlash-b16", """
        """"num_speculative_tokens": 15}' --max-model-len 131072"""
    )
    (tmp_path / "inventory.yaml").write_text(
        "hosts:\n  gpu-a:\n    vllm_version: 0.32.0\n"
        f"    launch: {json.dumps(command)}\n"
        f"    drafter_path: {SHARED / 'qwen3-8b-dflash-b16'}\n"
        f"    target_path: {SHARED / 'qwen3-8b'}\n"
    )
    code, report = gate(tmp_path, "-I", "inventory.yaml")
    (host,) = report["hosts"]
    assert host["facts"]["vllm_launch"]["value"]["environ"] == {"VLLM_USE_V2_MODEL_RUNNER": "0"}
    got = results(host)
    (finding,) = got["DFD305"]["findings"]
    assert finding["severity"] == "error" and "engine dies" in finding["message"]
    assert code == 1


def test_a_declared_vllm_version_must_read_as_one(repo: Path) -> None:
    p = doctor("gate", "deploy/launch.sh", "--vllm-version", "latest", cwd=repo)
    assert p.returncode == 2
    assert "--vllm-version 'latest': not a version" in p.stdout + p.stderr


COMPOSE = """\
services:
  web:
    image: nginx
  vllm:
    image: vllm/vllm-openai:v0.30.0
    entrypoint: ["vllm", "serve"]
    environment:
      - VLLM_USE_V2_MODEL_RUNNER=0
      - HF_TOKEN=hf_fixture_secret_0000
    command:
      - Qwen/Qwen3-8B
      - --speculative-config
      - '{"method": "dflash", "model": "z-lab/Qwen3-8B-DFlash2", "num_speculative_tokens": 15}'
      - --max-model-len
      - "32768"
      - --context-length
      - "4096"
"""


def test_a_compose_service_that_runs_vllm_is_gated(repo: Path) -> None:
    (repo / "deploy/docker-compose.yml").write_text(COMPOSE)
    code, report = gate(
        repo, "deploy/docker-compose.yml", "--drafter", "deploy/drafter", "--target",
        "deploy/target", "--vllm-version", "0.30.0",
    )  # fmt: skip
    (host,) = report["hosts"]
    launch = host["facts"]["vllm_launch"]["value"]
    assert launch["kind"] == "compose"
    assert launch["environ"] == {"VLLM_USE_V2_MODEL_RUNNER": "0"}  # never HF_TOKEN
    got = results(host)
    assert "refuses" in got["DFD307"]["findings"][0]["message"]
    (finding,) = got["DFD309"]["findings"]
    assert "--context-length" in finding["message"]
    assert finding["evidence"][0]["line"] == 16
    assert code == 1
    assert "hf_fixture_secret" not in json.dumps(report)
    # The other service runs no vLLM: nothing of it is read as vLLM's.
    _, web = gate(repo, "deploy/docker-compose.yml", "--compose-service", "web")
    assert web["hosts"][0]["facts"]["vllm_launch"]["value"] is None


def test_the_vllm_release_a_repository_pins_is_the_one_gated(repo: Path) -> None:
    (repo / "requirements.txt").write_text("sglang==0.5.23\nvllm==0.28.0\n")
    code, report = gate(
        repo, "deploy/launch.sh", "--drafter", "deploy/drafter", "--target", "deploy/target"
    )
    (host,) = report["hosts"]
    assert host["facts"]["vllm_version"]["value"] == "0.28.0"
    assert "vLLM 0.28.0 from requirements.txt:2 (--vllm-version overrides it)" in " ".join(
        report["notes"]
    )
    assert "as DFlash 1" in results(host)["DFD307"]["findings"][0]["message"]
    assert code == 0  # 0.28.0 serves it (as DFlash 1): a warning
    # A compose file's own image tag wins over the repository's pin.
    (repo / "deploy/docker-compose.yml").write_text(
        COMPOSE.replace("vllm-openai:v0.30.0", "vllm-openai:v0.29.0")
    )
    _, report = gate(
        repo, "deploy/docker-compose.yml", "--drafter", "deploy/drafter", "--target",
        "deploy/target",
    )  # fmt: skip
    assert report["hosts"][0]["facts"]["vllm_version"]["value"] == "0.29.0"
