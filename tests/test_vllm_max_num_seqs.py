"""vLLM's `--max-num-seqs` in VllmLaunch, its per-release default (vllm/engine/arg_utils.py
0.34.0:3010-3042), and the bench capping its concurrency by it as it caps SGLang's by
max_running_requests (bench/matrix.py), over the real sshd against the stand-in."""

from __future__ import annotations

import json
import shutil
import sys
from typing import Any

import pytest

from dflash_doctor.facts.vllm_launch import max_num_seqs, parse_vllm_command
from tests.cli_helper import doctor
from tests.test_vllm_bench import reach
from tests.test_vllm_stand_in import running


def test_given_or_the_release_default() -> None:
    given = parse_vllm_command("vllm serve m --max_num_seqs=12")
    assert given.max_num_seqs == 12
    assert max_num_seqs(given, "0.34.0") == (12, "the server's --max-num-seqs")
    plain = parse_vllm_command("vllm serve m")
    assert plain.max_num_seqs is None
    number, why = max_num_seqs(plain, "0.28.0")
    assert number == 256 and "1024 on a GPU of 70 GiB or more" in why


@pytest.mark.skipif(shutil.which("pgrep") is None, reason="needs pgrep")
def test_bench_caps_concurrency_at_max_num_seqs(sshd: Any) -> None:
    with running(sys.executable, {}, 15, extra=("--max-num-seqs", "2")) as (pid, _):
        argv = ["bench", sshd.address, *reach(sshd), "--pid", str(pid), "--max-new-tokens",
                "8", "--contexts", "256", "--concurrency", "1,4", "--repeats", "3",
                "--prompts", "code", "--temperature", "0", "--format", "json"]  # fmt: skip
        p = doctor(*argv, columns=250, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    doc = json.loads(p.stdout)
    assert sorted({c["concurrency"] for c in doc["cells"]}) == [1, 2]
    assert "concurrency capped at 2 (the server's --max-num-seqs)" in doc["notes"]
