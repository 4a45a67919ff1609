"""The served-span model against SGLang's own arithmetic.

`_compute_compact_draft_seq_lens` (speculative/dflash_worker.py 0.5.11:423-439,
dflash_worker_v2.py 0.5.23:1209-1225) is re-run here in plain Python, so the model's
view bounds are checked against the wheel's formula, not against themselves.
"""

from __future__ import annotations

import pytest

from dflash_doctor.spans import Behaviour, compact_view, served_spans

HONOURS = Behaviour(True, "test: 0.5.14+")
IGNORES = Behaviour(False, "test: 0.5.11-0.5.13")


def sglang_compact_len(seq_len: int, window: int, page_size: int) -> int:
    """dflash_worker.py 0.5.11:423-439, transcribed."""
    visible = min(seq_len, window)
    if page_size <= 1:
        return visible
    start = seq_len - visible
    aligned = start - start % page_size
    return seq_len - aligned


@pytest.mark.parametrize("page", [1, 16, 64])
@pytest.mark.parametrize("window", [100, 2048])
def test_compact_view_bounds_match_sglang(page: int, window: int) -> None:
    for context in (50, window, window + 1, window + page - 1, 3 * window + 7, 131072):
        lens = [sglang_compact_len(n, window, page) for n in range(1, context + 1)]
        beyond = [n for i, n in enumerate(lens, start=1) if i >= window] or lens[-1:]
        lo, hi = compact_view(context, window, page)
        assert lo == min(beyond) and hi == max(beyond), (context, lens[-3:])


def test_sliding_honoured_keeps_window_under_larger_flag() -> None:
    m = served_spans(
        behaviour=HONOURS,
        layer_types=["sliding_attention", "full_attention"],
        sliding_window=2048,
        window_flag=8192,
        page_size=64,
        context=131072,
    )
    assert [s.verdict for s in m.layers] == ["as_trained", "clamped"]
    assert (m.layers[1].served_min, m.layers[1].served_max) == (8192, 8192 + 63)


def test_ignored_layer_types_with_flag_at_window_has_page_slack() -> None:
    m = served_spans(
        behaviour=IGNORES,
        layer_types=["sliding_attention"] * 2,
        sliding_window=2048,
        window_flag=2048,
        page_size=64,
        context=131072,
    )
    assert m.served_as_trained and m.page_slack == 63


def test_unknown_context_is_taken_as_long() -> None:
    m = served_spans(
        behaviour=IGNORES,
        layer_types=["sliding_attention"],
        sliding_window=2048,
        window_flag=None,
    )
    assert m.layers[0].verdict == "wider" and m.layers[0].describe_served() == "the whole context"
    assert m.reads_per_step() is None


def test_reads_per_step_counts_block_queries() -> None:
    m = served_spans(
        behaviour=HONOURS,
        layer_types=["sliding_attention", "full_attention"],
        sliding_window=100,
        window_flag=None,
        block_size=16,
        context=1000,
    )
    assert m.reads_per_step() == (100 + 1000) * 16
