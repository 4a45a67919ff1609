"""`fix` on a vLLM compose service: the `--speculative-config` key edits made in its
`command:` through the YAML node edit (fix/compose_edits.py), read back by vLLM's own
reading (facts/vllm_launch.parse_vllm_compose); the runner variable left to the user (a
service's `environment:` is not edited)."""

from __future__ import annotations

import pytest

from dflash_doctor.errors import FactError
from dflash_doctor.facts.vllm_launch import parse_vllm_compose
from dflash_doctor.fix.launch_sources import parse_file
from dflash_doctor.fix.plan import plan_fixes
from dflash_doctor.fix.vllm_edits import edit_vllm_compose
from dflash_doctor.launch_edits import Edit
from tests.test_vllm_fix import RUNNER_FIX, SPEC, TOKENS, TOKENS_FIX, results

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
