"""Hold-out review of issue 25's checks: verdicts the wheels contradict, kept fixed.

DFD171: Qwen3's chat template (the targets of the known non-thinking drafters) reads
`enable_thinking` only; SGLang's qwen3 reasoning parser turns thinking off on that key alone
(entrypoints/openai/serving_chat.py 0.5.11:1396-1401, parser/reasoning_parser.py
0.5.23:441,483), while `thinking` is the key of other parsers (serving_chat.py
0.5.11:1391-1394). So `{"thinking": false}` leaves a Qwen3 target thinking.
"""

from __future__ import annotations

import pytest

from dflash_doctor.facts.models import PrefixProbe
from tests.checks.test_thinking_hybrid import (
    argv_of,
    facts_of,
    hybrid_target,
    judge,
    launch_of,
    probe_bench,
    qwen3_launch,
    qwen3_target,
)

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


# DFD173: an upgrade to 0.5.18 (speculative/dflash_info.py 0.5.18:91-96) is no fix on a host
# already at 0.5.18 or newer; there it would be a downgrade.


@pytest.mark.parametrize(("version", "upgrade"), [("0.5.17", True), ("0.5.18", False),
                                                  ("0.5.23", False)])  # fmt: skip
def test_dfd173_offers_the_upgrade_only_below_0_5_18(version: str, upgrade: bool) -> None:
    probe = PrefixProbe(
        prompt_tokens=1500, max_new_tokens=32, cached_tokens=1499, tokens_compared=32,
        first_mismatch=5, first_tokens=[1, 2, 3, 4, 5], second_tokens=[1, 2, 3, 4, 6],
    )  # fmt: skip
    args = launch_of(version, argv_of("m", "d"))
    r = judge("DFD173", facts_of(version, args, hybrid_target(), bench=probe_bench(probe)))
    (finding,) = r.findings
    actions = [f.action for f in finding.fixes]
    assert actions == (["upgrade_sglang", "set_flag"] if upgrade else ["set_flag"])


# DFD172: from 0.5.14 a named no_buffer is refused at start with the overlap scheduler on or
# pages over one token (srt/server_args.py 0.5.14:4355-4362, 0.5.17:5575-5582,
# arg_groups/mamba_hook.py 0.5.23:156-163); `auto` resolving to no_buffer turns overlap off.


@pytest.mark.parametrize("version", ["0.5.14", "0.5.17", "0.5.18", "0.5.23"])
def test_dfd172_named_no_buffer_with_overlap_is_refused(version: str) -> None:
    flags = ("--speculative-num-draft-tokens", "16", "--mamba-radix-cache-strategy", "no_buffer")
    args = launch_of(version, argv_of("Qwen/Qwen3.5-35B-A3B", "z/d", *flags))
    r = judge("DFD172", facts_of(version, args, hybrid_target()))
    assert r.status == "failed", r.reason
    (finding,) = r.findings
    assert "no_buffer do not support overlap schedule" in finding.message
    actions = [f.action for f in finding.fixes]
    upgrade = version in ("0.5.14", "0.5.17")
    assert ("upgrade_sglang" in actions) is upgrade
    paged = launch_of(version, argv_of("Qwen/Qwen3.5-35B-A3B", "z/d", *flags, "--page-size", "64"))
    (finding,) = judge("DFD172", facts_of(version, paged, hybrid_target())).findings
    assert "no_buffer only supports page_size=1." in finding.message


@pytest.mark.parametrize("version", ["0.5.14", "0.5.23"])
def test_dfd172_named_no_buffer_without_overlap_starts(version: str) -> None:
    flags = ("--mamba-radix-cache-strategy", "no_buffer", "--disable-overlap-schedule")
    args = launch_of(version, argv_of("Qwen/Qwen3.5-35B-A3B", "z/d", *flags))
    assert judge("DFD172", facts_of(version, args, hybrid_target())).status == "passed"
