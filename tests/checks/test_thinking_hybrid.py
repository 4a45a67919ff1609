"""Issue 25 items 8 and 9: DFD171 (thinking mode on a drafter trained without thinking),
DFD172 (a hybrid target with DFLASH and the radix cache, per release), DFD173 (the bench's
repeated greedy prompt gave other tokens from the prefix cache), and what the bench records.

Wheel facts (/work/wheels/src/<version>/sglang/srt): `auto` -> `no_buffer` server_args.py
0.5.11:1079-1082; spec + radix + no_buffer refused 0.5.11:2452-2456 .. 0.5.13:2753-2757;
`--mamba-radix-cache-strategy` from 0.5.14 (auto -> extra_buffer with overlap or paging,
0.5.14:4385-4393); extra_buffer_lazy refused with spec 0.5.14:4371-4374, for DFLASH by name
0.5.17:5599-5605; DFLASH's verify rebuilds the Mamba track indices from 0.5.18
(speculative/dflash_info.py 0.5.18:91-96). `--default-chat-template-kwargs` from 0.5.16.
"""

from __future__ import annotations

import json

import pytest

from dflash_doctor.bench.prefix_probe import compare, probe_line, probe_op
from dflash_doctor.checks import CATALOG
from dflash_doctor.checks.base import CheckResult
from dflash_doctor.checks.thinking_drafter import known_drafter, repo_candidates
from dflash_doctor.facts.launch import parse_argv, replay_launch
from dflash_doctor.facts.model_config import parse_drafter_config, parse_target_config
from dflash_doctor.facts.models import (
    BenchCell,
    BenchRequest,
    BenchResult,
    Fact,
    HostFacts,
    LaunchArgs,
    PrefixProbe,
    ServerRuntime,
    TargetConfig,
)
from dflash_doctor.on_host.server_http import carried_reasoning
from dflash_doctor.render.bench import issue_lines
from dflash_doctor.runner import run_check
from tests.conftest import REPO, target_cfg

CASES = REPO / "fixtures" / "checks"
HYBRID = CASES / "_shared" / "qwen3.5-35b-a3b" / "config.json"
QWEN3 = CASES / "DFD171" / "fires" / "target" / "config.json"
QWEN3_DRAFTER = CASES / "DFD171" / "fires" / "drafter" / "config.json"


def hybrid_target() -> TargetConfig:
    return parse_target_config(HYBRID.read_bytes(), str(HYBRID))


def argv_of(model: str, drafter: str, *flags: str) -> list[str]:
    return [
        "/venv/bin/python3", "-m", "sglang.launch_server", "--model-path", model,
        "--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", drafter, *flags,
    ]  # fmt: skip


def launch_of(version: str, argv: list[str]) -> LaunchArgs:
    args = replay_launch(parse_argv(argv, source="launch.sh", kind="script"), version)
    assert args.parser == "replay", args.parser_notes
    return args


def facts_of(
    version: str,
    launch: LaunchArgs,
    target: TargetConfig | None = None,
    runtime: ServerRuntime | None = None,
    bench: BenchResult | None = None,
) -> HostFacts:
    facts = HostFacts(
        host="h",
        sglang_version=Fact.of(version, "declared"),
        launch=Fact.of(launch, "launch.sh"),
        target=Fact.of(target or target_cfg(), "target"),
        drafter=Fact.of(parse_drafter_config(QWEN3_DRAFTER.read_bytes(), str(QWEN3_DRAFTER))),
    )
    if runtime is not None:
        facts = facts.model_copy(update={"runtime": Fact.of(runtime, "http")})
    if bench is not None:
        facts = facts.model_copy(update={"bench": Fact.of(bench, "bench")})
    return facts


def judge(check_id: str, facts: HostFacts) -> CheckResult:
    return run_check(CATALOG[check_id], facts)


# -- DFD171 ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "known"),
    [
        ("z-lab/Qwen3-8B-DFlash-b16", True),
        ("Z-LAB/qwen3-4b-dflash-b16", True),
        ("/root/.cache/huggingface/hub/models--z-lab--Qwen3-8B-DFlash-b16/snapshots/abc/"
         "config.json", True),
        ("/models/Qwen3-8B-DFlash-b16", True),  # a local copy, by its folder name
        ("z-lab/Qwen3.5-27B-DFlash", False),  # trained with thinking (benchmarked with it)
        ("/models/other/Qwen3-8B-DFlash-b16-finetune", False),
        ("", False),
    ],
)  # fmt: skip
def test_known_non_thinking_drafters(path: str, known: bool) -> None:
    assert (known_drafter([path]) is not None) is known, repo_candidates(path)


def qwen3_launch(version: str, *flags: str) -> LaunchArgs:
    return launch_of(version, argv_of("Qwen/Qwen3-8B", "z-lab/Qwen3-8B-DFlash-b16", *flags))


def qwen3_target() -> TargetConfig:
    return parse_target_config(QWEN3.read_bytes(), str(QWEN3))


@pytest.mark.parametrize("version", ["0.5.11", "0.5.15", "0.5.16", "0.5.23"])
def test_dfd170_fires_where_nothing_turns_thinking_off(version: str) -> None:
    r = judge("DFD171", facts_of(version, qwen3_launch(version), qwen3_target()))
    assert r.status == "failed", r.reason
    (finding,) = r.findings
    assert "z-lab/Qwen3-8B-DFlash-b16 was trained without thinking traces" in finding.message
    (fix,) = finding.fixes
    if version in ("0.5.11", "0.5.15"):  # no --default-chat-template-kwargs before 0.5.16
        assert fix.flag is None and "chat_template_kwargs" in (fix.note or "")
    else:
        assert fix.flag == "--default-chat-template-kwargs"
        assert json.loads(fix.value or "") == {"enable_thinking": False}


@pytest.mark.parametrize("version", ["0.5.16", "0.5.23"])
def test_dfd170_clean_with_thinking_off_by_default_kwargs(version: str) -> None:
    off = qwen3_launch(version, "--default-chat-template-kwargs", '{"enable_thinking": false}')
    r = judge("DFD171", facts_of(version, off, qwen3_target()))
    assert r.status == "passed" and r.findings == [], r.reason


def test_dfd170_fires_on_explicit_thinking_and_names_the_bench() -> None:
    on = qwen3_launch("0.5.23", "--default-chat-template-kwargs", '{"enable_thinking": true}')
    cell = BenchCell(
        context=256, concurrency=1, temperature=0.0, max_new_tokens=32,
        requests=[BenchRequest(completion_tokens=32, reasoning=True),
                  BenchRequest(completion_tokens=32, reasoning=False)],
    )  # fmt: skip
    bench = BenchResult(
        host="h", seed="s", vocab=151936, contexts=[256], concurrency=[1],
        temperatures=[0.0], max_new_tokens=32, cells=[cell],
    )  # fmt: skip
    r = judge("DFD171", facts_of("0.5.23", on, qwen3_target(), bench=bench))
    (finding,) = r.findings
    assert "sets enable_thinking=true" in finding.message
    assert any("1 of 2 bench responses" in e.text for e in finding.evidence)


def test_dfd170_reads_the_running_servers_kwargs_first() -> None:
    runtime = ServerRuntime(
        url="http://127.0.0.1:30000",
        endpoint="/server_info",
        args={"default_chat_template_kwargs": {"enable_thinking": False}},
    )
    r = judge("DFD171", facts_of("0.5.23", qwen3_launch("0.5.23"), qwen3_target(), runtime))
    assert r.status == "passed", r.reason


def test_dfd170_skips_where_a_custom_chat_template_decides() -> None:
    custom = qwen3_launch("0.5.23", "--chat-template", "/etc/sglang/qwen3.jinja")
    r = judge("DFD171", facts_of("0.5.23", custom, qwen3_target()))
    assert r.status == "skipped" and "qwen3.jinja" in (r.reason or "")


@pytest.mark.parametrize("value", ["{not json", "[1, 2]", '"x"' * 3000])
def test_dfd170_survives_hostile_kwargs(value: str) -> None:
    hostile = qwen3_launch("0.5.23", "--default-chat-template-kwargs", value)
    r = judge("DFD171", facts_of("0.5.23", hostile, qwen3_target()))
    assert r.status == "failed", r.reason  # unreadable kwargs turn nothing off


def test_dfd170_clean_for_a_drafter_trained_with_thinking() -> None:
    args = launch_of("0.5.23", argv_of("Qwen/Qwen3.5-27B", "z-lab/Qwen3.5-27B-DFlash"))
    facts = facts_of("0.5.23", args, hybrid_target())
    facts = facts.model_copy(update={"drafter": Fact.missing("not read")})
    assert judge("DFD171", facts).status == "passed"


@pytest.mark.parametrize(
    ("text", "meta", "expected"),
    [
        ("<think>\nhm\n</think>\n\nok", {}, True),
        ("plain answer", {"reasoning_tokens": 0}, False),
        (None, {"reasoning_tokens": 12}, True),
        (None, {}, None),
    ],
)
def test_bench_records_reasoning_tokens(
    text: str | None, meta: dict[str, int], expected: bool | None
) -> None:
    assert carried_reasoning(text, meta) is expected


# -- DFD172 ---------------------------------------------------------------------------------


def test_hybrid_targets_are_recognised() -> None:
    assert hybrid_target().hybrid == "layer_types: 30 of 40 layers are linear_attention"
    typed = json.loads(HYBRID.read_text())
    del typed["text_config"]["layer_types"]
    again = parse_target_config(json.dumps(typed).encode(), "t")
    assert again.hybrid == "model_type qwen3_5_moe_text (linear-attention/Mamba layers)"
    assert target_cfg().hybrid is None  # Kimi K2.6: MLA, no recurrent layers
    assert qwen3_target().hybrid is None


def hybrid_case(version: str, *flags: str, runtime: ServerRuntime | None = None) -> CheckResult:
    argv = argv_of("Qwen/Qwen3.5-35B-A3B", "z-lab/Qwen3.5-35B-A3B-DFlash", *flags)
    return judge("DFD172", facts_of(version, launch_of(version, argv), hybrid_target(), runtime))


REFUSED = [
    ("0.5.11", (), "not compatible with radix cache"),
    ("0.5.13", ("--mamba-scheduler-strategy", "no_buffer"), "not compatible with radix cache"),
    ("0.5.14", ("--mamba-radix-cache-strategy", "extra_buffer_lazy"), "unsupported with spec."),
    ("0.5.16", ("--mamba-radix-cache-strategy", "extra_buffer_lazy"), "unsupported with spec."),
    ("0.5.17", ("--mamba-radix-cache-strategy", "extra_buffer_lazy"), "unsupported with DFLASH"),
]
STALE = [
    ("0.5.11", ("--mamba-scheduler-strategy", "extra_buffer")),
    ("0.5.13", ("--mamba-scheduler-strategy", "extra_buffer")),
    ("0.5.14", ()),  # auto -> extra_buffer: DFLASH keeps the overlap scheduler on
    ("0.5.17", ("--mamba-radix-cache-strategy", "extra_buffer")),
    ("0.5.17", ("--mamba-scheduler-strategy", "extra_buffer")),  # the alias, still read
]
CLEAN = [
    ("0.5.11", ("--disable-radix-cache",)),
    # a named no_buffer starts only with the overlap scheduler off (0.5.14:4355-4362)
    ("0.5.14", ("--mamba-radix-cache-strategy", "no_buffer", "--disable-overlap-schedule")),
    ("0.5.14", ("--disable-overlap-schedule",)),  # auto -> no_buffer
    ("0.5.18", ("--mamba-radix-cache-strategy", "extra_buffer")),
    ("0.5.18", ("--mamba-radix-cache-strategy", "extra_buffer_lazy")),
    ("0.5.23", ()),
]


@pytest.mark.parametrize(("version", "flags", "text"), REFUSED)
def test_dfd171_refused_starts(version: str, flags: tuple[str, ...], text: str) -> None:
    r = hybrid_case(version, *flags)
    assert r.status == "failed", r.reason
    (finding,) = r.findings
    assert finding.severity == "error" and text in finding.message, finding.message
    assert [f.action for f in finding.fixes] == ["upgrade_sglang", "set_flag"]


@pytest.mark.parametrize(("version", "flags"), STALE)
def test_dfd171_stale_mamba_checkpoints(version: str, flags: tuple[str, ...]) -> None:
    r = hybrid_case(version, *flags)
    (finding,) = r.findings
    assert finding.severity == "warning", finding.message
    assert "stale" in finding.message and "extra_buffer" in finding.message


@pytest.mark.parametrize(("version", "flags"), CLEAN)
def test_dfd171_clean(version: str, flags: tuple[str, ...]) -> None:
    r = hybrid_case(version, *flags)
    assert r.status == "passed" and r.findings == [], [f.message for f in r.findings]


def test_dfd171_trusts_the_running_servers_resolved_strategy() -> None:
    resolved = ServerRuntime(
        url="http://127.0.0.1:30000",
        endpoint="/server_info",
        args={"mamba_radix_cache_strategy": "no_buffer", "disable_radix_cache": False},
    )
    assert hybrid_case("0.5.15", runtime=resolved).status == "passed"
    off = resolved.model_copy(update={"args": {"disable_radix_cache": True}})
    assert hybrid_case("0.5.11", runtime=off).status == "passed"


def test_dfd171_passes_a_target_without_recurrent_layers() -> None:
    args = launch_of("0.5.11", argv_of("m", "d"))
    assert judge("DFD172", facts_of("0.5.11", args, target_cfg())).status == "passed"


# -- DFD173 and the probe -----------------------------------------------------------------


def test_probe_compare() -> None:
    same = compare({"first": [1, 2, 3], "second": [1, 2, 3], "cached_tokens": 9}, 3)
    assert same.first_mismatch is None and same.tokens_compared == 3
    parted = compare(
        {"first": list(range(20)), "second": [*range(7), 99, 98], "cached_tokens": 5}, 20
    )
    assert parted.first_mismatch == 7
    assert parted.first_tokens == [3, 4, 5, 6, 7, 8, 9, 10]
    assert parted.second_tokens == [3, 4, 5, 6, 99, 98]
    shorter = compare({"first": [1, 2, 3], "second": [1, 2]}, 3)
    assert shorter.first_mismatch == 2
    assert compare({"error": "/generate: HTTP 500"}, 3).error == "/generate: HTTP 500"
    assert compare({"first": "x", "second": None}, 3).error == "an answer had no output tokens"
    op = probe_op(16)
    assert op["op"] == "repeat" and op["max_new_tokens"] == 16 and len(op["text"]) > 4000


def probe_bench(probe: PrefixProbe) -> BenchResult:
    return BenchResult(
        host="h", seed="s", vocab=248320, contexts=[256], concurrency=[1],
        temperatures=[0.0], max_new_tokens=32, prefix_probe=probe,
    )  # fmt: skip


def test_dfd172_fires_on_a_cached_mismatch_and_names_a_hybrid_target() -> None:
    probe = PrefixProbe(
        prompt_tokens=1500, max_new_tokens=32, cached_tokens=1499, tokens_compared=32,
        first_mismatch=5, first_tokens=[1, 2, 3, 4, 5], second_tokens=[1, 2, 3, 4, 6],
    )  # fmt: skip
    args = launch_of("0.5.17", argv_of("m", "d"))
    r = judge("DFD173", facts_of("0.5.17", args, hybrid_target(), bench=probe_bench(probe)))
    (finding,) = r.findings
    assert "from output token 5 on" in finding.message and "DFD172" in finding.message
    assert [f.action for f in finding.fixes] == ["upgrade_sglang", "set_flag"]
    lines = issue_lines(probe_bench(probe))
    assert lines == [
        "prefix reuse: the same greedy prompt twice differs from output token 5 on (1499 "
        "prompt tokens from the cache): [1, 2, 3, 4, 5] vs [1, 2, 3, 4, 6]"
    ]
    assert probe_line(None) is None


def test_dfd172_passes_without_prefix_reuse_and_skips_without_a_probe() -> None:
    uncached = PrefixProbe(max_new_tokens=32, cached_tokens=0, tokens_compared=32, first_mismatch=3)
    args = launch_of("0.5.23", argv_of("m", "d"))
    facts = facts_of("0.5.23", args, hybrid_target(), bench=probe_bench(uncached))
    assert judge("DFD173", facts).status == "passed"
    facts = facts.model_copy(
        update={"bench": Fact.of(probe_bench(uncached).model_copy(update={"prefix_probe": None}))}
    )
    assert judge("DFD173", facts).status == "skipped"
    facts = facts.model_copy(update={"bench": Fact()})
    assert judge("DFD173", facts).reason == "needs check --bench"


def test_silent_collapse_ranks_thinking_on_a_non_thinking_drafter_as_shown() -> None:
    """DFD143's causes name DFD171's finding where the facts show it, not as unverified."""
    from dflash_doctor.checks.silent_collapse import likely_causes

    thinking = likely_causes(facts_of("0.5.23", qwen3_launch("0.5.23"), qwen3_target()))
    assert thinking[0].startswith("thinking mode on z-lab/Qwen3-8B-DFlash-b16") and (
        "DFD171" in thinking[0]
    )
    assert not any("unverified: the chat template" in c for c in thinking)
    off = qwen3_launch("0.5.23", "--default-chat-template-kwargs", '{"enable_thinking": false}')
    plain = likely_causes(facts_of("0.5.23", off, qwen3_target()))
    assert plain[0] == "no fact of the host names a cause"
    assert any("unverified: the chat template" in c for c in plain)
