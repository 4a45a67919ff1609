"""`fix` on a vLLM compose service and an inventory's vLLM `launch:` command: the
`--speculative-config` key edits made in a service's `command:` through the YAML node edit
(fix/compose_edits.py), read back by vLLM's own reading (facts/vllm_launch.py), or in the
inventory's entry; the runner variable left to the user (a service's `environment:` and
an inventory entry's prefix are not edited)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from dflash_doctor.errors import FactError
from dflash_doctor.facts.vllm_launch import parse_vllm_compose
from dflash_doctor.fix.launch_sources import parse_file
from dflash_doctor.fix.plan import plan_fixes
from dflash_doctor.fix.vllm_edits import edit_vllm_compose
from dflash_doctor.launch_edits import Edit
from tests.cli_helper import doctor
from tests.test_vllm_fix import RUNNER_FIX, SPEC, TOKENS, TOKENS_FIX, results
from tests.test_vllm_gate import SHARED

BLOCK = """services:
  web:
    image: nginx  # not the server
  vllm:
    image: vllm/vllm-openai:v0.34.0
    entrypoint: ["vllm", "serve"]
    environment:
      - VLLM_USE_V2_MODEL_RUNNER=0
    command:
      - /models/target  # the target
      - --speculative-config
      - '{spec}'
      - --port
      - "8001"
"""
FLOW = """services:
  vllm:
    image: vllm/vllm-openai:v0.34.0
    command: ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m",
              "--speculative-config.num_speculative_tokens", "16"]
"""


def plan(text: str, *fixes: object) -> object:
    launch = parse_file(text.encode(), source="/c.yaml", path="/c.yaml", engine="vllm")
    return plan_fixes(
        "h",
        results(*fixes),  # type: ignore[arg-type]
        source="/c.yaml",
        source_text=text,
        source_launch=launch,
        running=None,
        engine="vllm",
    )


def test_a_block_list_gets_the_key_and_the_runner_is_a_manual_step() -> None:
    text = BLOCK.format(spec=SPEC)
    p = plan(text, TOKENS_FIX, RUNNER_FIX)
    new = p.new_text  # type: ignore[attr-defined]
    assert new == text.replace(
        "'" + SPEC + "'", '"' + SPEC.replace("16", "15").replace('"', '\\"') + '"'
    )
    after = parse_vllm_compose(new.encode(), source="/c.yaml")
    assert after.speculative is not None and after.speculative.num_speculative_tokens == 15
    assert after.environ == {"VLLM_USE_V2_MODEL_RUNNER": "0"}  # left to the user
    assert any("VLLM_USE_V2_MODEL_RUNNER" in m for m in p.manual)  # type: ignore[attr-defined]
    assert "# the target" in new and "image: nginx  # not the server" in new


def test_a_flow_list_with_a_dotted_key() -> None:
    p = plan(FLOW, TOKENS_FIX)
    new = p.new_text  # type: ignore[attr-defined]
    # A flow list is written again as one (fix/compose_edits.py: flags plain, values quoted).
    assert new.endswith('--speculative-config.num_speculative_tokens, "15"]\n')
    after = parse_vllm_compose(new.encode(), source="/c.yaml")
    assert after.speculative is not None and after.speculative.num_speculative_tokens == 15


def test_an_edit_in_the_entrypoint_or_the_environment_is_refused() -> None:
    text = BLOCK.format(spec=SPEC).replace(
        'entrypoint: ["vllm", "serve"]',
        'entrypoint: ["vllm", "serve", "--speculative-config.num_speculative_tokens", "16"]',
    )
    with pytest.raises(FactError, match="entrypoint"):
        edit_vllm_compose(text, [Edit(action="set_key", flag=TOKENS, value="15")])
    with pytest.raises(FactError, match="environment"):
        edit_vllm_compose(
            text, [Edit(action="set_env", flag="VLLM_USE_V2_MODEL_RUNNER", value="1")]
        )


def test_an_inventory_vllm_launch_is_edited_in_the_inventory(tmp_path: Path) -> None:
    """`fix -I inventory --apply` on a host whose `launch:` runs `vllm serve`: the key edit
    made in the inventory (a string keeps its other words as spelt, a list stays a list),
    backed up; the runner variable left as a manual step; the host never relaunched."""
    spec = '{"method": "dflash", "model": "%s", "num_speculative_tokens": 16}' % (
        SHARED / "qwen3-8b-dflash-b16"
    )
    command = f"VLLM_USE_V2_MODEL_RUNNER=0 vllm serve Qwen/Qwen3-8B -sc '{spec}' --port 8001"
    original = (
        "# fleet\ndefaults:\n  vllm_version: 0.32.0\n  offline: true\n"
        f"  drafter_path: {SHARED / 'qwen3-8b-dflash-b16'}\n"
        f"  target_path: {SHARED / 'qwen3-8b'}\n"
        "hosts:\n"
        f"  gpu-a:  # canary\n    launch: {json.dumps(command)}\n"
        "  gpu-b:\n    launch:\n      - vllm\n      - serve\n      - Qwen/Qwen3-8B\n"
        f"      - --speculative-config\n      - {json.dumps(spec)}\n"
        "    labels: [prod]  # keep\n"
    )
    inv = tmp_path / "inventory.yaml"
    inv.write_text(original)
    p = doctor("fix", "-I", str(inv), "--apply", "--yes", timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    text = inv.read_text()
    assert "# fleet" in text and "  gpu-a:  # canary" in text and "labels: [prod]  # keep" in text
    fixed = command.replace('"num_speculative_tokens": 16', '"num_speculative_tokens": 15')
    doc = yaml.safe_load(text)
    assert doc["hosts"]["gpu-a"]["launch"] == fixed  # the runner prefix kept as written
    listed = doc["hosts"]["gpu-b"]["launch"]
    assert listed[:4] == ["vllm", "serve", "Qwen/Qwen3-8B", "--speculative-config"]
    assert json.loads(listed[4])["num_speculative_tokens"] == 15
    assert "VLLM_USE_V2_MODEL_RUNNER" in p.stdout  # DFD300: a manual step
    backups = list(tmp_path.glob("inventory.yaml.dflash-doctor-*.bak"))
    assert len(backups) == 1 and backups[0].read_text() == original
