"""What vLLM's own parser accepts per release (data/vllm_cli_flags.json from the wheels)
and DFD309, a launch option the running release does not register."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dflash_doctor.facts.models import Fact, HostFacts
from dflash_doctor.facts.vllm_launch import parse_vllm_argv
from dflash_doctor.facts.vllm_options import accepts, release_flags, removed_in
from dflash_doctor.runner import run_checks
from tests.conftest import REPO

WHEELS = Path("/work/wheels/vllm/src")


def facts(version: str | None, *options: str) -> HostFacts:
    argv = ["vllm", "serve", "Qwen/Qwen3-8B", *options]
    launch = parse_vllm_argv(argv, source="launch.sh", kind="script", lines=list(range(len(argv))))
    return HostFacts(
        host="h",
        engine=Fact.of("vllm"),
        vllm_launch=Fact.of(launch),
        vllm_version=Fact.of(version) if version else Fact[str](),
    )


@pytest.mark.parametrize(
    ("version", "options", "status"),
    [
        ("0.34.0", ["--max-model-len", "4096", "--speculative_config", "{}"], "passed"),
        ("0.27.1", ["--calculate-kv-scales"], "passed"),
        ("0.28.0", ["--calculate-kv-scales"], "failed"),  # removed in 0.28.0
        ("0.28.5", ["--calculate-kv-scales"], "failed"),  # answers as 0.28.0
        (None, ["--calculate-kv-scales"], "passed"),  # some release has it
        (None, ["--context-length", "4096"], "failed"),  # SGLang's, no vLLM release's
        ("0.34.0", ["--no-enable-prefix-caching"], "passed"),
        ("0.34.0", ["--max-num-seq", "8"], "passed"),  # a unique abbreviation
        ("0.34.0", ["--max", "8"], "failed"),  # ambiguous
        ("0.34.0", ["--foo=1", "--", "--bar"], "failed"),
        ("0.35.0", ["--foo"], "skipped"),  # newer than the releases read
    ],
)
def test_options_by_release(version: str | None, options: list[str], status: str) -> None:
    (result,) = run_checks(facts(version, *options), select=["DFD309"])
    assert result.status == status, result
    if status == "failed":
        (finding,) = result.findings
        assert "unrecognized arguments" in finding.message
        assert finding.evidence[0].line is not None


def test_a_removed_flag_names_the_release_that_removed_it() -> None:
    assert removed_in("--calculate-kv-scales") == "0.28.0"
    (result,) = run_checks(facts("0.30.0", "--calculate-kv-scales"), select=["DFD309"])
    assert "removed in 0.28.0" in result.findings[0].message
    # Words after a bare `--` are positionals to argparse, not options.
    assert facts(None, "--", "--bar").vllm_launch.value.options == []  # type: ignore[union-attr]


def test_enable_disable_pairs_from_the_release_that_has_them() -> None:
    old, new = release_flags("0.32.0"), release_flags("0.33.0")
    assert old is not None and new is not None
    assert "--enable-prefix-caching" in new.flags
    assert accepts(new, "--disable-prefix-caching")
    assert not accepts(old, "--disable-prefix-caching")


def test_the_flag_data_is_what_the_wheels_give() -> None:
    if not (WHEELS / "0.34.0").is_dir():
        pytest.skip("vLLM wheels not unpacked")
    script = REPO / "scripts" / "gen_vllm_options.py"
    assert subprocess.run([sys.executable, str(script), "--check"]).returncode == 0
