"""A vLLM host through the command a user types: the recorded tree
fixtures/hosts/vllm034 (a `vllm serve` process, its environment, its drafter) is judged by
the vLLM checks, never by SGLang's, and never called a server that "does not use DFLASH"."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from dflash_doctor.checks import CATALOG
from dflash_doctor.cli import app
from dflash_doctor.facts.models import DrafterConfig, Fact, HostFacts
from dflash_doctor.facts.vllm_models import RUNNER_ENV, VllmLaunch, VllmSpeculative
from dflash_doctor.runner import run_checks
from tests.conftest import FIXTURE_HOSTS, REPO

HOST = FIXTURE_HOSTS / "vllm034"
SECRET = "sk-fixture-secret-000000000000"
VLLM_CHECKS = {cid for cid, c in CATALOG.items() if c.engine == "vllm"}


def check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *extra: str) -> tuple[str, Any]:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    result = CliRunner().invoke(app, ["check", "--host-dir", str(HOST), *extra, "--format", "json"])
    assert result.exit_code == 1, result.output
    (host,) = json.loads(result.stdout)["hosts"]
    return result.output, host


@pytest.mark.parametrize("extra", [(), ("--pid", "4242")])
def test_the_vllm_checks_judge_a_vllm_host(
    extra: tuple[str, ...], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    output, host = check(tmp_path, monkeypatch, *extra)
    results = {r["check_id"]: r for r in host["results"]}
    assert results["DFD300"]["status"] == "failed"
    assert results["DFD301"]["status"] == "failed"
    assert "vLLM 0.34.0 refuses" in results["DFD300"]["findings"][0]["message"]
    (finding,) = results["DFD301"]["findings"]
    assert "num_speculative_tokens=16" in finding["message"]
    for cid, r in results.items():
        if cid not in VLLM_CHECKS:
            assert r["status"] == "skipped" and r["unjudged"] is False, cid
            assert "vLLM server" in r["reason"], cid
    assert "does not use DFLASH" not in output
    assert SECRET not in output


def test_the_vllm_checks_do_not_apply_to_an_sglang_host() -> None:
    facts = HostFacts(host="h", engine=Fact.of("sglang"))
    for r in run_checks(facts, select=sorted(VLLM_CHECKS)):
        assert r.status == "skipped" and r.unjudged is False
        assert r.reason == "not a vLLM server: this check judges vLLM servers"
    # A host where no server was found is judged as before: SGLang's checks run.
    unknown = run_checks(HostFacts(host="h"), select=["DFD102"])
    assert "vLLM" not in (unknown[0].reason or "")


def runner_facts(version: str | None, value: str, layer_types: list[str]) -> HostFacts:
    """A vLLM host's facts with the runner variable, the installed release and a drafter."""
    spec = VllmSpeculative(method="dflash", model="/models/d", num_speculative_tokens=15)
    launch = VllmLaunch(
        source="launch.sh", kind="script", speculative=spec, environ={RUNNER_ENV: value}
    )
    drafter = DrafterConfig(
        path="config.json", hidden_size=64, num_hidden_layers=len(layer_types),
        num_attention_heads=4, num_key_value_heads=4, head_dim=16, layer_types=layer_types,
        sliding_window=2048, block_size=16,
    )  # fmt: skip
    return HostFacts(
        host="h",
        engine=Fact.of("vllm"),
        vllm_launch=Fact.of(launch),
        vllm_version=Fact.of(version) if version else Fact[str](),
        drafter=Fact.of(drafter),
    )


MIXED = ["sliding_attention", "full_attention"]
FULL = ["full_attention", "full_attention"]


@pytest.mark.parametrize(
    ("version", "value", "layers", "status", "said"),
    [
        ("0.34.0", "0", FULL, "failed", "vLLM 0.34.0 refuses"),
        ("0.34.0", "1", MIXED, "passed", None),
        ("0.33.0", "0", MIXED, "failed", "refuses this mixed sliding/full"),
        ("0.33.0", "0", FULL, "passed", None),
        ("0.30.0", "false", FULL, "failed", "is not an integer"),
        ("0.31.0", "01", MIXED, "passed", None),
        (None, "0", FULL, "failed", "the installed vLLM is not known"),
        ("0.26.0", "0", MIXED, "skipped", "predates the releases read"),
    ],
)
def test_the_runner_variable_by_release(
    version: str | None, value: str, layers: list[str], status: str, said: str | None
) -> None:
    (result,) = run_checks(runner_facts(version, value, layers), select=["DFD300"])
    assert result.status == status, result
    text = result.reason or " ".join(f.message for f in result.findings)
    assert said is None or said in text
    if version is None and status == "failed":
        assert result.findings[0].severity.value == "warning"


def test_a_systemd_unit_through_the_gate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`gate vllm.service`: the unit's vLLM launch and its Environment= judged offline."""
    shared = REPO / "fixtures" / "checks" / "_shared"
    spec = '{"method": "dflash", "model": "/models/d", "num_speculative_tokens": 15}'
    (tmp_path / "vllm.service").write_text(
        "[Service]\nEnvironment=VLLM_USE_V2_MODEL_RUNNER=0\n"
        f"ExecStart=/opt/vllm/venv/bin/vllm serve /models/t --speculative-config '{spec}'\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    argv = ["gate", "vllm.service", "--drafter", str(shared / "kimi-k2.6-dflash"), "--target",
            str(shared / "kimi-k2.6"), "--format", "json", "--select", "DFD300"]  # fmt: skip
    result = CliRunner().invoke(app, argv)
    (host,) = json.loads(result.stdout)["hosts"]
    (checked,) = host["results"]
    assert checked["status"] == "failed", checked
    assert checked["findings"][0]["evidence"][0]["file"] == "vllm.service"


def keys_facts(version: str | None, keys: list[str]) -> HostFacts:
    spec = VllmSpeculative(method="dflash", model="/models/d", keys=keys)
    launch = VllmLaunch(source="launch.sh", kind="script", speculative=spec)
    return HostFacts(
        host="h",
        engine=Fact.of("vllm"),
        vllm_launch=Fact.of(launch),
        vllm_version=Fact.of(version) if version else Fact[str](),
    )


@pytest.mark.parametrize(
    ("version", "key", "status"),
    [
        ("0.34.0", "enable_adaptive_verification", "passed"),
        ("0.27.1", "enable_adaptive_verification", "failed"),  # not yet a 0.27.1 key
        ("0.28.5", "draft_sample_method", "passed"),  # answers as 0.28.0
        ("0.34.0", "disable_padded_drafter_batch", "failed"),  # gone by 0.34.0
        (None, "disable_padded_drafter_batch", "passed"),  # some release has it
        (None, "num_spec_tokens", "failed"),
        ("0.35.0", "num_spec_tokens", "skipped"),  # newer than the releases read
    ],
)
def test_speculative_config_keys_by_release(version: str | None, key: str, status: str) -> None:
    (result,) = run_checks(keys_facts(version, ["method", key]), select=["DFD303"])
    assert result.status == status, result


def test_the_key_data_is_what_the_wheels_give() -> None:
    if not Path("/work/wheels/vllm/src/0.34.0").is_dir():
        pytest.skip("vLLM wheels not unpacked")
    script = REPO / "scripts" / "gen_vllm_speculative.py"
    assert subprocess.run([sys.executable, str(script), "--check"]).returncode == 0
