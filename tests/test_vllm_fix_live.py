"""`fix --apply` on a vLLM host end to end: the stand-in vLLM server (fixtures/fake_vllm)
started from its launch script, reached over the real sshd; the plan, the backup, the
relaunch, the wait for `/health`, the re-check of the running process (its command line, its
environment, `/version`), and the rollback when the relaunched server does not come up."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from fixtures.stand_in import healthy
from fixtures.vllm_stand_in import VllmStandIn, end_vllm_under, vllm_pids
from tests.cli_helper import doctor
from tests.test_server_choice import two_servers  # noqa: F401 (the fixture)

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="stand-in servers need Linux")


@pytest.fixture
def vllm_host(tmp_path: Path, sshd: Any) -> Iterator[dict[str, Any]]:
    """The stand-in vLLM server in tmp_path, its launch file given, reached over the sshd."""
    server = VllmStandIn(tmp_path)
    server.full_attention_drafter()
    inventory = tmp_path / "inventory.yaml"
    entry = {
        "address": sshd.address,
        "identity_file": str(sshd.client_key),
        "launch_file": str(server.script),
        "log_path": str(server.log),
    }
    inventory.write_text(yaml.safe_dump({"hosts": {"vllm-live": entry}}))

    def fix(*args: str) -> subprocess.CompletedProcess[str]:
        return doctor(
            *("fix", "-I", str(inventory), "--known-hosts", str(sshd.known_hosts)),
            *("--ssh-config", "/dev/null", "--health-timeout", "60", *args),
            columns=200,
            timeout=600,
        )

    yield {"server": server, "fix": fix}
    end_vllm_under(tmp_path)


def command_line(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]


def environ(pid: int) -> dict[str, str]:
    items = Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0")
    return dict(i.split("=", 1) for i in items if "=" in i)


def served_tokens(pid: int) -> int:
    argv = command_line(pid)
    spec = json.loads(argv[argv.index("--speculative-config") + 1])
    return int(spec["num_speculative_tokens"])


def version(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/version", timeout=5) as r:
        return str(json.loads(r.read())["version"])


RUNNER_ZERO = "export VLLM_USE_V2_MODEL_RUNNER=0\n"


def test_apply_fixes_the_draft_tokens_and_the_runner_then_rolls_back(
    vllm_host: dict[str, Any],
) -> None:
    """DFD301 (16 tokens from a 16-block drafter) and DFD300 (the V1 runner forced, the
    release not known from a dist-info) fixed in the script, the server relaunched from it
    and verified from the running process; `--rollback` brings the old one back."""
    server: VllmStandIn = vllm_host["server"]
    fix: Callable[..., subprocess.CompletedProcess[str]] = vllm_host["fix"]
    server.write(tokens=16, extra=RUNNER_ZERO)
    original = server.script.read_bytes()
    old_pid = server.start()
    planned = fix()
    assert planned.returncode == 0, planned.stdout + planned.stderr
    assert '"num_speculative_tokens": 15}' in planned.stdout
    assert "+export VLLM_USE_V2_MODEL_RUNNER=1" in planned.stdout
    assert f"stop: pid {old_pid} (owner {pwd.getpwuid(os.getuid()).pw_name})" in planned.stdout
    assert server.script.read_bytes() == original  # the plan changed nothing
    p = fix("--apply", "--yes")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "verified" in p.stdout and f"healthy: http://127.0.0.1:{server.port}/health" in p.stdout
    (pid,) = vllm_pids(server.dir)
    assert pid != old_pid and served_tokens(pid) == 15
    assert environ(pid)["VLLM_USE_V2_MODEL_RUNNER"] == "1"
    assert version(server.port) == "0.33.0"
    (backup,) = server.dir.glob("serve.sh.dflash-doctor-*.bak")
    assert backup.read_bytes() == original
    again = fix("--apply", "--yes")
    assert again.returncode == 0 and "nothing to change" in again.stdout
    back = fix("--rollback", "--yes")
    assert back.returncode == 0, back.stdout + back.stderr
    assert server.script.read_bytes() == original
    (pid,) = vllm_pids(server.dir)
    assert served_tokens(pid) == 16 and environ(pid)["VLLM_USE_V2_MODEL_RUNNER"] == "0"


def test_a_relaunch_that_fails_health_is_rolled_back(vllm_host: dict[str, Any]) -> None:
    """The fixed launch dies at start-up (vLLM's KV-memory refusal, injected): the script is
    restored byte for byte and the old server runs again; the log's last lines say why."""
    server: VllmStandIn = vllm_host["server"]
    server.write(tokens=16, extra="export FAKE_VLLM_NO_KV_MEMORY_WITH_TOKENS=15\n")
    original = server.script.read_bytes()
    old_pid = server.start()
    p = vllm_host["fix"]("--apply", "--yes")
    assert p.returncode == 4, p.stdout + p.stderr
    assert "rolled back" in p.stdout and "exited before" in p.stdout
    assert "No available memory for the cache blocks" in p.stdout
    assert server.script.read_bytes() == original
    assert healthy(server.port)
    (pid,) = vllm_pids(server.dir)
    assert pid != old_pid and served_tokens(pid) == 16


def test_a_vllm_launch_file_among_sglang_servers_names_its_own_server(
    two_servers: list[Any],  # noqa: F811 (the fixture imported above)
    tmp_path: Path,
) -> None:
    """Two SGLang servers run beside the vLLM one: the vLLM launch file is no reason to ask
    which SGLang server is meant (exit 2); the plan stops the vLLM server on the file's port
    and nothing else."""
    server = VllmStandIn(tmp_path / "vllm")
    server.full_attention_drafter()
    server.write(tokens=16)
    vllm_pid = server.start()
    try:
        p = doctor("fix", "local", "--launch", str(server.script), columns=400, timeout=300)
        assert p.returncode == 0, p.stdout + p.stderr
        assert '"num_speculative_tokens": 15}' in p.stdout
        assert f"stop: pid {vllm_pid} (owner" in p.stdout
        assert all(f"pid {s.pid}" not in p.stdout for s in two_servers)
    finally:
        end_vllm_under(tmp_path / "vllm")


def test_a_server_down_for_a_misspelt_key_is_fixed_and_started(
    vllm_host: dict[str, Any],
) -> None:
    """DFD303: vLLM refuses `num_speculative_token` (pydantic's ValidationError, the stand-in
    as vLLM); no server runs. `fix --apply` renames the key inside the JSON, starts the
    server from the script and verifies it."""
    server: VllmStandIn = vllm_host["server"]
    server.write(tokens=15, key="num_speculative_token")
    with pytest.raises(RuntimeError, match="Unexpected keyword argument"):
        server.start(timeout=10)
    p = vllm_host["fix"]("--apply", "--yes")
    assert p.returncode == 0, p.stdout + p.stderr
    assert '-  --speculative-config \'{"method": "dflash"' in p.stdout
    assert '"num_speculative_tokens": 15}' in p.stdout and "verified" in p.stdout
    (pid,) = vllm_pids(server.dir)
    assert served_tokens(pid) == 15


def test_apply_with_bench_measures_the_vllm_server_before_and_after(
    vllm_host: dict[str, Any],
) -> None:
    """`fix --apply --bench` on a vLLM host: the running server benched through its OpenAI
    API before the change and the relaunched one after (followed by its new process, not the
    launch file), the fix kept when acceptance holds."""
    server: VllmStandIn = vllm_host["server"]
    fix: Callable[..., subprocess.CompletedProcess[str]] = vllm_host["fix"]
    server.write(tokens=16)
    old_pid = server.start()
    bench = ("--bench", "--bench-contexts", "256", "--bench-concurrency", "1",
             "--bench-max-new-tokens", "16", "--bench-prompts", "code")  # fmt: skip
    p = fix("--apply", "--yes", *bench)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "verified" in p.stdout
    assert "before the fix: code" in p.stdout and "after the fix: code" in p.stdout, p.stdout
    assert "bench: kept" in p.stdout  # the stand-in accepts 3 a step either way
    (pid,) = vllm_pids(server.dir)
    assert pid != old_pid and served_tokens(pid) == 15
