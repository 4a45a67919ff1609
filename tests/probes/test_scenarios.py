"""The spans the probe is given: trained, served per SGLang behaviour and flag, and the fix.

SGLang facts (wheels at /work/wheels/src/<version>/sglang/):
- 0.5.11-0.5.13 ignore layer_types: every draft layer is ENCODER_ONLY with no sliding
  window (0.5.13 srt/models/dflash.py:115-123).
- 0.5.14+ give sliding_attention layers window_left = sliding_window - 1 and full layers
  the whole context (0.5.14 srt/models/dflash.py:44-66, speculative/dflash_utils.py:341-356).
- The draft window flag clamps every layer to `_compute_compact_draft_seq_lens`: min(len, N)
  with its start moved left to a page boundary (0.5.11 speculative/dflash_worker.py:423-439;
  0.5.23 speculative/dflash_worker_v2.py:1209-1225).
"""

from __future__ import annotations

import pytest

from dflash_doctor.probes.scenarios import (
    Serving,
    compact_draft_len,
    layer_spans,
    scenarios_for,
    spans_input,
)

MIXED = ["sliding_attention"] * 5 + ["full_attention"]


@pytest.mark.parametrize(
    ("context", "window", "page", "expected"),
    [
        (100, 2048, 64, 100),  # shorter than the window: all of it
        (4096, 2048, 1, 2048),  # page 1: exactly the window
        (4096, 2048, 64, 2048),  # start 2048 is page-aligned already
        (4100, 2048, 64, 2052),  # start 2052 moves left to 2048: 4 more tokens
        (4159, 2048, 64, 2111),  # start 2111 -> 2048: page_size - 1 more
    ],
)
def test_compact_draft_len_is_sglangs(context: int, window: int, page: int, expected: int) -> None:
    # seq_lens - (start - start % page) with start = seq_lens - min(seq_lens, window)
    assert compact_draft_len(context, window, page) == expected


def test_trained_spans_follow_layer_types() -> None:
    spans = layer_spans(MIXED, 2048, None, 8192)
    assert spans[:5] == [{"band": 2048, "last": None}] * 5
    assert spans[5] == {"band": None, "last": None}


def test_served_before_0_5_14_ignores_layer_types() -> None:
    assert layer_spans(MIXED, 2048, Serving(False), 8192) == [{"band": None, "last": None}] * 6


def test_served_from_0_5_14_honours_layer_types() -> None:
    assert layer_spans(MIXED, 2048, Serving(True), 8192) == layer_spans(MIXED, 2048, None, 8192)


def test_window_flag_clamps_every_layer_full_ones_included() -> None:
    spans = layer_spans(MIXED, 2048, Serving(True, 1024, 64), 4100)
    assert [s["last"] for s in spans] == [1028] * 6  # 4100 - (3076 - 3076 % 64)
    assert spans[5]["band"] is None and spans[0]["band"] == 2048


def names(scenarios: list) -> list[str]:  # type: ignore[type-arg]
    return [s.name for s in scenarios]


def test_seed_case_on_0_5_13_fix_is_the_flag_at_the_window() -> None:
    out = scenarios_for(MIXED, 2048, honours_layer_types=False, draft_window=None, page_size=64)
    assert names(out) == ["trained", "served", "fix"]
    assert out[2].serving == Serving(False, 2048, 64)
    assert "--speculative-draft-window-size 2048" in out[2].label


def test_flag_on_0_5_14_fix_removes_it() -> None:
    out = scenarios_for(MIXED, 2048, honours_layer_types=True, draft_window=2048)
    assert out[2].serving == Serving(True, None, 1) and out[2].label.startswith("remove")


def test_served_as_trained_has_no_fix() -> None:
    out = scenarios_for(MIXED, 2048, honours_layer_types=True, draft_window=None)
    assert names(out) == ["trained", "served"]


def test_flag_at_the_window_on_0_5_13_is_kept() -> None:
    # The lesser evil there: nothing but the upgrade serves closer to trained.
    out = scenarios_for(MIXED, 2048, honours_layer_types=False, draft_window=2048)
    assert names(out) == ["trained", "served"]


def test_unknown_version_probes_both_readings() -> None:
    out = scenarios_for(MIXED, 2048, honours_layer_types=None, draft_window=None)
    assert names(out) == ["trained", "served_before_0.5.14", "served_from_0.5.14"]


def test_spans_input_has_one_list_per_context_and_layer() -> None:
    out = spans_input(
        scenarios_for(MIXED, 128, honours_layer_types=False, draft_window=None),
        MIXED,
        128,
        [64, 512],
    )
    assert [len(s["spans"]) for s in out] == [2, 2, 2]
    assert all(len(per_ctx) == 6 for s in out for per_ctx in s["spans"])
    assert out[2]["spans"][1][5] == {"band": None, "last": 128}
