"""The vLLM launch parser: what `vllm serve` and the API server module ask for,
read as vLLM's own parser reads it, and hostile command lines refused in one line."""

from __future__ import annotations

import argparse
import ast
import json
import re
from pathlib import Path
from typing import Any

import pytest

from dflash_doctor.errors import FactError
from dflash_doctor.facts.vllm_launch import (
    NotVllm,
    engine_of,
    human_readable_int,
    max_model_len,
    parse_vllm_argv,
    parse_vllm_script,
    parse_vllm_systemd_unit,
    process_environ,
)

VLLM_SRC = Path("/work/wheels/vllm/src")
SPEC = '{"method": "dflash", "model": "/models/d", "num-speculative-tokens": 15}'


def argv(*words: str) -> list[str]:
    return ["/opt/v/bin/vllm", "serve", "Qwen/Qwen3-8B", *words]


def test_a_launch_script_with_exports_and_prefix_assignments() -> None:
    script = (
        "#!/bin/bash\n"
        "export VLLM_USE_V2_MODEL_RUNNER=1\n"
        "VLLM_API_KEY=sk-secret-000\n"
        "D=/models/d\n"
        "VLLM_USE_V2_MODEL_RUNNER=0 exec vllm serve Qwen/Qwen3-8B \\\n"
        f"  --speculative-config '{SPEC}' \\\n"
        "  --max_model_len 32k -tp 2 --port 8000\n"
    ).encode()
    launch = parse_vllm_script(script, source="launch.sh")
    assert launch.model == "Qwen/Qwen3-8B" and launch.is_dflash
    assert launch.speculative is not None
    assert launch.speculative.num_speculative_tokens == 15
    assert launch.speculative.keys == ["method", "model", "num_speculative_tokens"]
    assert (launch.max_model_len, launch.tensor_parallel_size, launch.port) == (32000, 2, 8000)
    # The command's own assignment wins over the export; the secret is never read.
    assert launch.environ == {"VLLM_USE_V2_MODEL_RUNNER": "0"}
    assert launch.flag_lines == {
        "--speculative-config": 6,
        "--max-model-len": 7,
        "--tensor-parallel-size": 7,
        "--port": 7,
    }


def test_a_plain_assignment_does_not_reach_the_environment() -> None:
    script = b"VLLM_USE_V2_MODEL_RUNNER=0\nvllm serve m --spec-method dflash --spec-tokens 3\n"
    launch = parse_vllm_script(script, source="s")
    assert launch.environ == {}
    assert launch.speculative is not None and launch.speculative.num_speculative_tokens == 3


def test_dotted_keys_replace_an_earlier_json_object() -> None:
    # vLLM appends the dotted object after the other arguments: the last --speculative-config
    # (vllm/utils/argparse_utils.py 0.34.0:497-502), so the JSON's keys are gone.
    words = [
        "python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "m",
        "--speculative-config", SPEC,
        "--speculative-config.method", "dflash",
        "--speculative_config.num_speculative_tokens=7",
    ]  # fmt: skip
    launch = parse_vllm_argv(words, source="p", kind="process")
    assert launch.python == "python3" and launch.model == "m"
    assert launch.speculative is not None
    assert launch.speculative.model is None
    assert (launch.speculative.method, launch.speculative.num_speculative_tokens) == ("dflash", 7)


def test_a_dflash_named_draft_without_a_method_is_dflash() -> None:
    launch = parse_vllm_argv(argv("-sc", '{"model": "z-lab/Qwen3-8B-DFlash-b16"}'), source="p",
                             kind="process")  # fmt: skip
    assert launch.is_dflash
    eagle = parse_vllm_argv(argv("-sc", '{"method": "eagle3", "model": "x-dflash"}'),
                            source="p", kind="process")  # fmt: skip
    assert not eagle.is_dflash


def test_engine_of_command_lines() -> None:
    assert engine_of(argv()) == "vllm"
    assert engine_of(["python3", "-m", "sglang.launch_server", "--model-path", "m"]) == "sglang"
    assert engine_of(["python3", "-m", "http.server"]) is None
    # `vllm` without `serve` (vllm bench, vllm chat) is no server.
    assert engine_of(["vllm", "bench", "serve"]) is None


def test_an_echo_of_vllm_serve_is_no_launch() -> None:
    with pytest.raises(FactError, match="no `vllm serve` command"):
        parse_vllm_script(b"echo vllm serve m\npkill -f 'vllm serve'\n", source="s")


HOSTILE: list[tuple[list[str], str]] = [
    (argv("-sc", "{bad"), "not valid JSON"),
    (argv("-sc", "[" * 40 + "]" * 40), "nests deeper than 32"),
    (argv("-sc", "[1]"), "not a JSON object"),
    (argv("-sc", json.dumps({f"k{i}": i for i in range(300)})), "more than 256 keys"),
    (argv("-sc", '{"num_speculative_tokens": true}'), "not an integer"),
    (argv("-sc", '{"num_speculative_tokens": "7x"}'), "is not an integer"),
    (argv("-sc", '{"method": ["dflash"]}'), "is not a string"),
    (argv("-sc", '{"enable_adaptive_verification": 1}'), "is not true or false"),
    (argv("--spec-tokens", "3", "-sc", '{"num_speculative_tokens": 2}'), "mutually exclusive"),
    (argv("-sc"), "expects a value"),
    (argv("--max-model-len", "1.5K"), "is not a length"),
    (argv("--max-model-len", "²"), "is not a length"),
    (argv("-tp", "9" * 40), "is not an integer"),
    (argv(*["-x"] * 2000), "words"),
]


@pytest.mark.parametrize(("words", "said"), HOSTILE)
def test_hostile_command_lines_are_one_line(words: list[str], said: str) -> None:
    with pytest.raises(FactError) as e:
        parse_vllm_argv(words, source="p", kind="process")
    assert said in str(e.value) and "\n" not in str(e.value) and len(str(e.value)) < 300


def test_hostile_scripts_are_one_line() -> None:
    for data in (b"vllm serve m\0", b"\xff\xfe vllm serve", b"x" * (2 << 20)):
        with pytest.raises(FactError) as e:
            parse_vllm_script(data, source="s")
        assert "\n" not in str(e.value)


def test_process_environ_keeps_only_the_catalog() -> None:
    raw = b"VLLM_API_KEY=sk-x\0VLLM_USE_V2_MODEL_RUNNER=0\x1b[31m\0HF_TOKEN=hf_x\0\xff\xfe=1\0"
    assert process_environ(raw) == {"VLLM_USE_V2_MODEL_RUNNER": "0?[31m"}


def test_max_model_len_auto() -> None:
    assert max_model_len("auto") is None and max_model_len("-1") is None
    assert max_model_len("128k") == 128000 and max_model_len("128K") == 131072


def _vllm_function(version: str, name: str) -> Any:
    """One function of vLLM's own argparse_utils.py, compiled from its wheel (its module
    imports half of vLLM; this function needs only `re` and argparse's error)."""
    path = VLLM_SRC / version / "vllm/utils/argparse_utils.py"
    tree = ast.parse(path.read_text())
    (node,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
    namespace: dict[str, Any] = {"re": re, "argparse": argparse}
    exec(compile(ast.Module([node], []), str(path), "exec"), namespace)
    return namespace[name]


@pytest.mark.skipif(not (VLLM_SRC / "0.34.0").is_dir(), reason="vLLM wheels not unpacked")
def test_human_readable_int_agrees_with_vllm_0_34() -> None:
    theirs = _vllm_function("0.34.0", "human_readable_int")
    for text in ("1k", "1K", "25.6k", "2M", "3g", "7", " 42 ", "0", "+5", "1.5K", "k", "1e3", "x"):
        try:
            expected: int | None = theirs(text)
        except (ValueError, argparse.ArgumentTypeError):
            expected = None
        try:
            ours: int | None = human_readable_int(text)
        except ValueError:
            ours = None
        assert ours == expected, text


UNIT = """[Unit]
Description=vLLM
[Service]
Environment="VLLM_USE_V2_MODEL_RUNNER=0" HF_HOME=/data/hf
Environment=VLLM_API_KEY=sk-secret-000
EnvironmentFile=-/etc/default/vllm
ExecStart=/opt/vllm/venv/bin/vllm serve /models/t \\
  --speculative-config '{"method": "dflash", "model": "/models/d", "num_speculative_tokens": 15}' \\
  --port 8000
"""


def test_a_systemd_unit() -> None:
    launch = parse_vllm_systemd_unit(UNIT.encode(), source="vllm.service")
    assert (launch.kind, launch.launcher, launch.model) == (
        "systemd", "/opt/vllm/venv/bin/vllm", "/models/t"
    )  # fmt: skip
    assert launch.speculative is not None and launch.speculative.num_speculative_tokens == 15
    assert launch.environ == {"VLLM_USE_V2_MODEL_RUNNER": "0"}
    assert launch.flag_lines == {"--speculative-config": 8, "--port": 9}


def test_a_unit_that_runs_sglang_is_no_vllm_launch() -> None:
    unit = "[Service]\nExecStart=/usr/bin/python3 -m sglang.launch_server --model-path m\n"
    with pytest.raises(NotVllm):
        parse_vllm_systemd_unit(unit.encode(), source="u")
