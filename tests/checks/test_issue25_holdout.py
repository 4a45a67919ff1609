"""Hold-out review of issue 25's checks: verdicts the wheels contradict, kept fixed.

DFD171: Qwen3's chat template (the targets of the known non-thinking drafters) reads
`enable_thinking` only; SGLang's qwen3 reasoning parser turns thinking off on that key alone
(entrypoints/openai/serving_chat.py 0.5.11:1396-1401, parser/reasoning_parser.py
0.5.23:441,483), while `thinking` is the key of other parsers (serving_chat.py
0.5.11:1391-1394). So `{"thinking": false}` leaves a Qwen3 target thinking.
"""

from __future__ import annotations

import pytest

from tests.checks.test_thinking_hybrid import facts_of, judge, qwen3_launch, qwen3_target

KWARGS = "--default-chat-template-kwargs"


@pytest.mark.parametrize("version", ["0.5.16", "0.5.23"])
def test_dfd171_thinking_key_does_not_turn_qwen3_thinking_off(version: str) -> None:
    launch = qwen3_launch(version, KWARGS, '{"thinking": false}')
    r = judge("DFD171", facts_of(version, launch, qwen3_target()))
    assert r.status == "failed", r.reason
    (finding,) = r.findings
    assert "thinks unless a request sends enable_thinking=false" in finding.message


def test_dfd171_enable_thinking_still_decides_over_thinking() -> None:
    both = qwen3_launch("0.5.23", KWARGS, '{"enable_thinking": false, "thinking": true}')
    assert judge("DFD171", facts_of("0.5.23", both, qwen3_target())).status == "passed"
    on = qwen3_launch("0.5.23", KWARGS, '{"enable_thinking": true, "thinking": false}')
    r = judge("DFD171", facts_of("0.5.23", on, qwen3_target()))
    assert r.status == "failed" and "sets enable_thinking=true" in r.findings[0].message
