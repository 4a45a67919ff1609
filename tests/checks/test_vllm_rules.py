"""vLLM's version-keyed DFlash rules (DFD305-DFD307): each release read answers as the
wheels say (data/vllm_rules.json, scripts/gen_vllm_rules.py), and the data is what the
wheels give."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from dflash_doctor.facts.log_patterns import patterns
from dflash_doctor.facts.model_config import rope_types_of
from dflash_doctor.facts.models import DrafterConfig, Fact, HostFacts, TargetConfig
from dflash_doctor.facts.server_log import scan_log
from dflash_doctor.facts.vllm_launch import parse_vllm_argv
from dflash_doctor.facts.vllm_models import RUNNER_ENV, VllmLaunch, VllmSpeculative
from dflash_doctor.facts.vllm_rules import (
    rule,
    rules,
    vllm_crash_texts,
    vllm_releases_read,
    vllm_texts,
)
from dflash_doctor.on_host import log_filter
from dflash_doctor.runner import run_checks
from tests.conftest import REPO

WHEELS = Path("/work/wheels/vllm/src")


def drafter(**kw: object) -> DrafterConfig:
    base: dict[str, object] = {
        "path": "/models/d/config.json",
        "hidden_size": 4096,
        "num_hidden_layers": 5,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "layer_types": ["full_attention"] * 5,
        "max_position_embeddings": 40960,
        "architectures": ["DFlashDraftModel"],
    }
    return DrafterConfig.model_validate(base | kw)


def facts(
    version: str | None,
    cfg: DrafterConfig,
    *,
    max_len: int | None = 131072,
    environ: dict[str, str] | None = None,
    spec: dict[str, object] | None = None,
    prefix_caching: bool | None = None,
) -> HostFacts:
    speculative = VllmSpeculative(method="dflash", model="/models/d", **(spec or {}))
    launch = VllmLaunch(
        source="launch.sh",
        kind="script",
        speculative=speculative,
        max_model_len=max_len,
        environ=environ or {},
        enable_prefix_caching=prefix_caching,
    )
    target = TargetConfig.model_validate(
        {
            "path": "/models/t/config.json",
            "hidden_size": 4096,
            "num_hidden_layers": 36,
            "max_position_embeddings": 262144,
        }
    )
    return HostFacts(
        host="h",
        engine=Fact.of("vllm"),
        vllm_launch=Fact.of(launch),
        vllm_version=Fact.of(version) if version else Fact[str](),
        drafter=Fact.of(cfg),
        target=Fact.of(target),
    )


def judged(check_id: str, f: HostFacts) -> tuple[str, str | None, str]:
    (result,) = run_checks(f, select=[check_id])
    finding = result.findings[0] if result.findings else None
    return (
        result.status,
        finding.severity.value if finding else None,
        (finding.message if finding else ""),
    )


@pytest.mark.parametrize(
    ("version", "rope", "environ", "severity", "says"),
    [
        ("0.27.1", None, None, "error", "engine dies"),
        ("0.32.0", None, None, "error", "engine dies"),
        ("0.33.0", None, None, "warning", "never trained"),
        ("0.34.0", {"rope_type": "yarn", "factor": 4.0}, None, "warning", "lowers the server"),
        # 0.33.0 lowers the length on the V2 runner only: V1 dies as before.
        ("0.33.0", {"rope_type": "yarn", "factor": 4.0}, {RUNNER_ENV: "0"}, "error", "dies"),
        (None, None, None, "warning", "release is not known"),
        ("0.35.0", None, None, "warning", "release is not known"),
    ],
)
def test_long_prompts_by_release(
    version: str | None,
    rope: dict[str, object] | None,
    environ: dict[str, str] | None,
    severity: str,
    says: str,
) -> None:
    cfg = drafter(rope_types=rope_types_of({"rope_scaling": rope} if rope else {}))
    status, sev, message = judged("DFD305", facts(version, cfg, environ=environ))
    assert (status, sev) == ("failed", severity)
    assert says in message


def test_long_prompts_within_the_drafter_pass_and_the_target_length_is_the_default() -> None:
    assert judged("DFD305", facts("0.30.0", drafter(), max_len=40960))[0] == "passed"
    # No --max-model-len: the target's 262144 positions are served.
    assert judged("DFD305", facts("0.30.0", drafter(), max_len=None))[0] == "failed"


@pytest.mark.parametrize(
    ("version", "prefix_caching", "status"),
    [
        ("0.30.0", None, "failed"),
        ("0.32.0", True, "failed"),
        ("0.32.0", False, "passed"),  # no prefix caching, no block to keep
        ("0.33.0", None, "passed"),  # DFlash needs no drop from 0.33.0: the key is a no-op
        ("0.34.0", None, "passed"),
        (None, None, "failed"),  # info naming both ranges
    ],
)
def test_block_drop_by_release(
    version: str | None, prefix_caching: bool | None, status: str
) -> None:
    f = facts(
        version,
        drafter(),
        spec={"disable_eagle_block_drop": True},
        prefix_caching=prefix_caching,
    )
    assert judged("DFD306", f)[0] == status
    assert judged("DFD306", facts(version, drafter()))[0] == "passed"


@pytest.mark.parametrize(
    ("version", "environ", "status", "severity", "says"),
    [
        ("0.27.1", None, "failed", "error", "no DFlash2DraftModel"),
        ("0.28.0", {RUNNER_ENV: "0"}, "failed", "warning", "as DFlash 1"),
        ("0.28.0", None, "passed", None, ""),
        ("0.29.0", {RUNNER_ENV: "0"}, "failed", "error", "refuses"),
        ("0.33.0", {RUNNER_ENV: "false"}, "failed", "error", "refuses"),
        ("0.34.0", {RUNNER_ENV: "0"}, "failed", "error", "V1 runner is gone"),
        ("0.34.0", {RUNNER_ENV: "1"}, "passed", None, ""),
        (None, {RUNNER_ENV: "0"}, "failed", "error", "release is not known"),
    ],
)
def test_dflash2_on_v1_by_release(
    version: str | None,
    environ: dict[str, str] | None,
    status: str,
    severity: str | None,
    says: str,
) -> None:
    cfg = drafter(architectures=["DFlash2DraftModel"])
    got = judged("DFD307", facts(version, cfg, max_len=32768, environ=environ))
    assert got[:2] == (status, severity)
    assert says in got[2]
    # A DFlash 1 drafter is not DFD307's.
    assert judged("DFD307", facts(version, drafter(), environ=environ))[0] == "passed"


def test_every_rule_names_a_read_range_and_its_texts() -> None:
    read = vllm_releases_read()
    assert read[0] == "0.27.1" and read[-1] == "0.34.0"
    for r in rules().values():
        assert r.first in read and r.last in read, r.id
        for sites in r.cited.values():
            assert all(s.startswith("vllm/") and ".py 0." in s for s in sites), r.id
    assert rule("dflash2_v1_silent").releases() == "0.28.0"


def test_rope_types_and_prefix_caching_are_read_as_vllm_reads_them() -> None:
    assert rope_types_of({}) == ["default"]
    assert rope_types_of({"rope_scaling": {"type": "yarn"}}) == ["yarn"]
    nested = {
        "full_attention": {"rope_type": "default"},
        "sliding_attention": {"rope_type": "yarn"},
    }
    assert rope_types_of({"rope_parameters": nested}) == ["default", "yarn"]
    argv = ["vllm", "serve", "m", "--enable-prefix-caching", "--no_enable_prefix_caching"]
    assert parse_vllm_argv(argv, source="x", kind="process").enable_prefix_caching is False
    assert parse_vllm_argv(argv[:3], source="x", kind="process").enable_prefix_caching is None


def test_the_rule_data_is_what_the_wheels_give() -> None:
    if not (WHEELS / "0.34.0").is_dir():
        pytest.skip("vLLM wheels not unpacked")
    script = REPO / "scripts" / "gen_vllm_rules.py"
    assert subprocess.run([sys.executable, str(script), "--check"]).returncode == 0


def test_every_vllm_crash_text_is_marked_and_read_from_a_log() -> None:
    marks = [m.decode() for m in (*log_filter.MARKS, *log_filter.STARTUP_MARKS)]
    assert not set(vllm_texts()) & set(patterns()), "vLLM and SGLang text ids must differ"
    lines = []
    for p in vllm_crash_texts():
        # Fields filled as a DFlash server fills them (`_speculator_name` is "DFlash").
        text = re.sub(r"\{[^{}]*\}", "DFlash", p.formats[-1].format)
        if p.id in ("v1_dflash2", "v1_candidate_head"):
            text = f"Model Runner V1 does not support: {text}"  # a feature of that text
        assert any(m in text for m in marks), (p.id, text)
        lines.append(f"ERROR 12-03 09:14:02 [x.py:1] ValueError: {text}")
    log = scan_log([("\n".join(lines) + "\n").encode()], "server.log")
    assert set(log.crashes) == {p.id for p in vllm_crash_texts()}
