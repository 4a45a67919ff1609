"""DFD150 (rejected requests), DFD151 (slow paths), DFD152 (crash signatures).

Logs are written in each release's own texts (rendered from data/log_patterns.json, which
cites file:line per release) and read by the real scan, then judged by the checks.
"""

from __future__ import annotations

import pytest

from dflash_doctor.checks import CATALOG
from dflash_doctor.checks.base import Severity
from dflash_doctor.facts.log_patterns import pattern
from dflash_doctor.facts.models import LogFacts
from dflash_doctor.facts.server_log import scan_log
from dflash_doctor.runner import run_check
from tests.checks.test_catalog_checks import run
from tests.conftest import host_facts, launch
from tests.facts.test_log_patterns import render


def text(pattern_id: str, release: str) -> str:
    fmt = next(f for f in pattern(pattern_id).formats if release in f.sites)
    return render(fmt)


def start(release: str, max_running: str = "48") -> list[str]:
    dump = (
        f"server_args={{'speculative_algorithm': 'DFLASH', 'max_running_requests': {max_running}}}"
        if release >= "0.5.19"
        else f"server_args=ServerArgs(speculative_algorithm='DFLASH', "
        f"max_running_requests={max_running})"
    )
    return [dump, text("dflash_init", release)]


def log_of(*lines: str) -> LogFacts:
    body = "".join(f"[2026-11-30 10:00:{i % 60:02d} TP0] {t}\n" for i, t in enumerate(lines))
    return scan_log([body.encode()], "/var/log/sglang.log")


def result(check_id: str, log: LogFacts | None, version: str, **kw):  # type: ignore[no-untyped-def]
    facts = host_facts(log=log, version=version, launch_args=kw.pop("launch_args", None))
    return run_check(CATALOG[check_id], facts)


# DFD150 ------------------------------------------------------------------------------------


def test_dfd120_logprob_rejections_at_both_edges() -> None:
    """srt/managers/scheduler.py:306 (0.5.11) .. srt/speculative/dflash_utils.py:845 (0.5.17);
    gone from dflash_utils.py validate_dflash_request in 0.5.18 (:972)."""
    for release in ("0.5.11", "0.5.17"):
        abort = text("reject_return_logprob", release) + ", self.rid='5f2c'"
        r = result("DFD150", log_of(*start(release), abort, "x", abort, abort), release)
        (f,) = r.findings
        assert f.impact == {"rejected_requests": 3, "first_line": 3, "last_line": 6}
        assert f.fixes[0].action == "upgrade_sglang" and f.fixes[0].value == "0.5.18"
        assert "lines 3-6" in f.title
    clean = log_of(*start("0.5.18"), "Decode batch, #running-req: 1")
    assert result("DFD150", clean, "0.5.18").status == "passed"


def test_dfd120_grammar_until_0516_and_hidden_states_still_refused() -> None:
    """Grammar: dflash_utils.py:810 (0.5.16) is the last release that refuses it (the issue
    said 0.5.15.post1). Hidden states: :1110 (0.5.23), only with overlap scheduling."""
    grammar = text("reject_grammar", "0.5.16") + ", self.rid='a'"
    (f,) = result("DFD150", log_of(*start("0.5.16"), grammar), "0.5.16").findings
    assert f.fixes[0].value == "0.5.17"
    hidden = text("reject_return_hidden_states", "0.5.23") + ", self.rid='b'"
    (f,) = result("DFD150", log_of(*start("0.5.23"), hidden), "0.5.23").findings
    assert f.fixes[0].action == "manual" and "--disable-overlap-schedule" in (f.fixes[0].note or "")


def test_dfd120_counts_only_the_latest_start() -> None:
    abort = text("reject_return_logprob", "0.5.14") + ", self.rid='c'"
    log = log_of(*start("0.5.14"), abort, *start("0.5.14"))
    assert result("DFD150", log, "0.5.14").status == "passed"


def test_log_checks_skip_without_a_log() -> None:
    for check_id in ("DFD150", "DFD151", "DFD152"):
        r = result(check_id, None, "0.5.23")
        assert r.status == "skipped" and "log" in (r.reason or ""), check_id


# DFD151 ------------------------------------------------------------------------------------


def test_dfd121_slow_path_lines_at_their_edges() -> None:
    """Draft graph off: dflash_worker_v2.py:306 (0.5.14, first); torch.topk selector:
    models/dflash.py:962 (0.5.19, first) and :1160 (0.5.23); fused KV and greedy: 0.5.11+."""
    cases = {
        "0.5.14": "slow_draft_cuda_graph_off",
        "0.5.19": "slow_selector_torch_topk",
        "0.5.23": "slow_selector_torch_topk",
        "0.5.11": "slow_fused_kv_sequential",
        "0.5.13": "slow_greedy_verify",
    }
    for release, pid in cases.items():
        lines = start(release, max_running="64")
        lines.insert(1, text(pid, release))  # logged while the models are built
        r = result("DFD151", log_of(*lines), release, launch_args=launch())
        assert [f.title for f in r.findings] == [f"DFLASH slow path: {pattern(pid).meaning}"], (
            release
        )
        assert r.findings[0].evidence[0].line == 2


def test_dfd121_decode_lines_without_cuda_graph() -> None:
    def decode(graph: bool) -> str:
        return (
            "Decode batch, #running-req: 60, #token: 9, token usage: 0.10, accept len: 3.00, "
            f"accept rate: 0.20, cuda graph: {graph}, gen throughput (token/s): 9.00, "
            "#queue-req: 0"
        )

    flags = launch("--max-running-requests", "64")
    many = log_of(*start("0.5.23", "64"), *(decode(i % 2 == 0) for i in range(20)))
    (f,) = result("DFD151", many, "0.5.23", launch_args=flags).findings
    assert f.severity == Severity.WARNING and f.impact["graph_off_lines"] == 10
    assert f.evidence[0].line == 4  # the first `cuda graph: False` line
    few = log_of(*start("0.5.23", "64"), decode(False), *(decode(True) for _ in range(19)))
    (f,) = result("DFD151", few, "0.5.23", launch_args=flags).findings
    assert f.severity == Severity.INFO
    clean = log_of(*start("0.5.23", "64"), *(decode(True) for _ in range(5)))
    assert result("DFD151", clean, "0.5.23", launch_args=flags).status == "passed"


def test_dfd121_max_running_requests_default() -> None:
    """`Max running requests is reset to 48` when --max-running-requests is absent, every
    release: server_args.py:3433 (0.5.11), arg_groups/speculative_hook.py:445 (0.5.23)."""
    for release in ("0.5.11", "0.5.23"):
        r = result("DFD151", log_of(*start(release)), release, launch_args=launch())
        (f,) = r.findings
        assert "48" in f.title and f.fixes[0].flag == "--max-running-requests"
        assert f.evidence[-1].text == "max_running_requests=48"
    explicit = launch("--max-running-requests", "48")
    assert result("DFD151", log_of(*start("0.5.23")), "0.5.23", launch_args=explicit).status == (
        "passed"
    )


# DFD152 ------------------------------------------------------------------------------------


def test_dfd122_crash_in_the_latest_start_is_an_error() -> None:
    crash = "ValueError: " + text("crash_mask_token_outside_vocab", "0.5.23")
    r = result("DFD152", log_of(*start("0.5.23"), crash), "0.5.23")
    (f,) = r.findings
    assert f.severity == Severity.ERROR and f.impact["last_line"] == 3
    assert "drafter" in (f.fixes[0].note or "")


@pytest.mark.parametrize(
    ("pattern_id", "release"),
    [
        ("crash_window_positive_0511", "0.5.11"),
        ("crash_window_positive", "0.5.23"),
        ("crash_window_below_block", "0.5.11"),
        ("crash_window_below_block", "0.5.23"),
        ("crash_sink_without_window", "0.5.21"),
        ("crash_block_size_flags_differ", "0.5.23"),
        ("crash_sliding_window_required", "0.5.14"),
        ("crash_target_hidden_mismatch", "0.5.23"),
    ],
)
def test_a_log_ending_in_a_startup_refusal_is_a_crash_not_a_healthy_server(
    pattern_id: str, release: str
) -> None:
    """Issue 21: each start-up refusal text (DFD111's) is a crash signature, so a host whose
    log ends in one is diagnosed. Sites: window positive server_args.py 0.5.11:3382,
    arg_groups/speculative_hook.py 0.5.23:206; window below block 0.5.11:3425, 0.5.23:431;
    sink 0.5.21:193; flags differ 0.5.23:378; dflash_utils.py 0.5.14:352; models/dflash.py
    0.5.23:835."""
    crash = "ValueError: " + text(pattern_id, release)
    (f,) = result("DFD152", log_of(*start(release), crash), release).findings
    assert f.severity == Severity.ERROR, f.message
    assert pattern(pattern_id).meaning in f.title


def test_dfd122_crash_before_a_later_start_is_a_warning() -> None:
    """DFLASH draft OOM: dflash_worker.py:622 (0.5.11) .. :624 (0.5.13.post1), gone in 0.5.14."""
    oom = "RuntimeError: " + text("crash_draft_oom", "0.5.13.post1")
    log = log_of(*start("0.5.13"), oom, *start("0.5.14"))
    (f,) = result("DFD152", log, "0.5.14").findings
    assert f.severity == Severity.WARNING
    assert "does not write this text" in f.message  # 0.5.14 has no draft OOM text
    (f,) = result("DFD152", log_of(*start("0.5.11"), oom), "0.5.11").findings
    assert f.severity == Severity.ERROR and "does not write" not in f.message


def test_dfd122_layers_to_capture_texts_of_both_eras() -> None:
    """model_runner.py:827 (0.5.11-0.5.15.post1), attention_backend_setup.py:62 (0.5.16+)."""
    for release in ("0.5.15.post1", "0.5.16"):
        crash = "ValueError: " + text("crash_layers_to_capture", release)
        (f,) = result("DFD152", log_of(*start(release), crash), release).findings
        assert "hidden states" in f.title
    assert result("DFD152", log_of(*start("0.5.23")), "0.5.23").status == "passed"


# DFD124 / DFD123 on a host known only by its log ------------------------------------------


def test_dfd124_reads_pp_size_from_the_logged_server_args() -> None:
    """pp_size is a ServerArgs field in every release (0.5.11 server_args.py:390, 0.5.23
    arg_groups/fields/parallel.py:59): the dump carries it, in both of its forms."""
    for release, dump in (
        ("0.5.13", "server_args=ServerArgs(speculative_algorithm='DFLASH', pp_size=2)"),
        ("0.5.23", "server_args={'speculative_algorithm': 'DFLASH', 'pp_size': 2}"),
    ):
        r = result("DFD124", log_of(dump), release)
        (f,) = r.findings
        assert (
            "pp_size=2" in f.title
            and f.evidence[0].text == "server_args pp_size=2"
            and f.evidence[0].kind == "log"
        )
    one = log_of("server_args={'speculative_algorithm': 'DFLASH', 'pp_size': 1}")
    assert result("DFD124", one, "0.5.23").status == "passed"


def test_dfd123_reads_the_phase_backends_from_the_log_and_none_is_unset() -> None:
    """prefill/decode_attention_backend are ServerArgs fields (0.5.11 server_args.py:498-499);
    an unset one logs as None and falls back to --attention-backend as SGLang does."""
    a100 = ["NVIDIA A100-SXM4-80GB"]
    split = log_of(
        "server_args={'speculative_algorithm': 'DFLASH', 'attention_backend': 'fa3', "
        "'prefill_attention_backend': 'trtllm_mha', 'decode_attention_backend': None, "
        "'page_size': 64}"
    )
    (f,) = run("DFD123", log=split, version="0.5.23", gpus=a100).findings
    assert f.title.startswith("trtllm_mha prefill")
    base = log_of(
        "server_args={'speculative_algorithm': 'DFLASH', 'attention_backend': 'trtllm_mha', "
        "'prefill_attention_backend': None, 'decode_attention_backend': None, 'page_size': 64}"
    )
    titles = [
        x.title.split(" cannot")[0]
        for x in run("DFD123", log=base, version="0.5.23", gpus=a100).findings
    ]
    assert titles == ["trtllm_mha prefill", "trtllm_mha decode"]


def test_a_crashed_start_is_not_a_server_capped_at_48() -> None:
    """Issue 21: a log whose latest start ends in a start-up refusal is diagnosed (DFD152),
    not reported as a healthy server capped at 48 running requests (DFD151 skips)."""
    crash = "ValueError: " + text("crash_window_below_block", "0.5.23")
    log = log_of(*start("0.5.23"), crash)
    r = result("DFD151", log, "0.5.23", launch_args=launch())
    assert r.status == "skipped" and "latest start crashed" in (r.reason or "")
    later = log_of(*start("0.5.23"), crash, *start("0.5.23"))
    assert result("DFD151", later, "0.5.23", launch_args=launch()).status == "failed"
