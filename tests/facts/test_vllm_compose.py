"""vLLM launches in compose files and their options, on hostile input: one FactError line,
bounded, and nothing but the catalog's VLLM_* variables read from the environment."""

from __future__ import annotations

import pytest

from dflash_doctor.errors import FactError
from dflash_doctor.facts.vllm_launch import (
    MAX_OPTIONS,
    NotVllm,
    parse_vllm_argv,
    parse_vllm_command,
    parse_vllm_compose,
)

SERVICE = """\
services:
  llm:
    entrypoint: vllm serve
    command: Qwen/Qwen3-8B --max-model-len 4096
    environment:
      VLLM_USE_V2_MODEL_RUNNER: "0"
      VLLM_API_KEY: sk-secret
"""


def test_the_environment_gives_only_the_runner_variable() -> None:
    launch = parse_vllm_compose(SERVICE.encode(), source="c.yml")
    assert launch.kind == "compose" and launch.max_model_len == 4096
    assert launch.environ == {"VLLM_USE_V2_MODEL_RUNNER": "0"}
    assert launch.flag_lines == {"--max-model-len": 4}


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b"services: [\x00\xff", "binary data"),
        (b"[" * 5000, "invalid YAML"),
        (b"services:\n  llm:\n    command: {a: b}\n", "should be a string or a list"),
        (b"services:\n  web:\n    image: nginx\n", "no compose service runs `vllm serve`"),
        (b"just text", "compose file has no services"),
    ],
)
def test_hostile_compose_files_are_one_line(data: bytes, error: str) -> None:
    with pytest.raises(FactError) as got:
        parse_vllm_compose(data, source="c.yml")
    assert error in str(got.value) and "\n" not in str(got.value)


def test_a_named_service_that_runs_no_vllm_says_so() -> None:
    with pytest.raises(NotVllm, match="'web' does not run"):
        parse_vllm_compose(
            SERVICE.encode() + b"  web:\n    image: nginx\n", source="c", service="web"
        )


def test_options_are_bounded_and_printable() -> None:
    words = [f"--opt-{i}\x1b[31m" for i in range(MAX_OPTIONS + 50)]
    launch = parse_vllm_argv(["vllm", "serve", "m", *words], source="s", kind="argv")
    assert len(launch.options) == MAX_OPTIONS
    assert all(o.isprintable() for o in launch.options)


def test_a_command_that_cannot_be_split_is_one_line() -> None:
    with pytest.raises(FactError, match="cannot be split"):
        parse_vllm_command("vllm serve m --speculative-config '{")
