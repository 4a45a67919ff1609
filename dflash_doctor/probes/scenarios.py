"""What the probe compares: per-layer attention spans as trained, as served, under the fix.

Pure (no I/O). A span is what one draft layer attends over at one context length, in the
probe script's terms: `band` W (a query at position p sees context positions > p - W, the
trained sliding window) and `last` K (only the last K committed tokens are in the draft's
view, the draft window's compact table). None means no limit.

How SGLang serves each layer (read in the published wheels):
- 0.5.11-0.5.13 build every draft layer with `AttentionType.ENCODER_ONLY` and no sliding
  window (0.5.13 srt/models/dflash.py:115-123): layer_types is ignored, every layer sees
  the whole context.
- From 0.5.14 `_get_dflash_layer_attention_params` reads layer_types: sliding_attention
  layers get `sliding_window_size = sliding_window - 1` (SGLang's window_left, so the
  query plus W - 1 earlier tokens: W tokens as in HF), full_attention layers -1, the whole
  context (0.5.14 srt/models/dflash.py:44-66, speculative/dflash_utils.py:341-356).
- `--speculative-draft-window-size N` (`--speculative-dflash-draft-window-size` in 0.5.11)
  gives the draft worker "a private compact req->token table over the same global KV index
  space" (0.5.11 speculative/dflash_worker.py:88-92) whose length is
  `_compute_compact_draft_seq_lens`: min(len, N), its start moved left to a page boundary
  (up to page_size - 1 more tokens) (0.5.11 speculative/dflash_worker.py:423-439; 0.5.23
  speculative/dflash_worker_v2.py:1209-1225). Every draft layer reads through that table,
  full_attention layers included.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dflash_doctor.sglang_versions import LAYER_TYPES_SINCE, NEW_WINDOW_FLAG, format_version

Span = dict[str, int | None]


@dataclass(frozen=True)
class Serving:
    """What decides the served spans: the SGLang behaviour and the draft window flag."""

    honours_layer_types: bool
    draft_window: int | None = None
    page_size: int = 1


@dataclass(frozen=True)
class Scenario:
    name: str
    label: str
    serving: Serving | None  # None: the spans the drafter was trained with


def compact_draft_len(context: int, window: int, page_size: int) -> int:
    """Committed tokens in the draft's compact view (`_compute_compact_draft_seq_lens`)."""
    visible = min(context, window)
    if page_size <= 1:
        return visible
    start = context - visible
    return context - (start - start % page_size)


def layer_spans(
    layer_types: list[str], window: int | None, serving: Serving | None, context: int
) -> list[Span]:
    """Each layer's span at one context length; `serving` None gives the trained spans."""
    spans: list[Span] = []
    for kind in layer_types:
        sliding = kind == "sliding_attention" and window is not None
        band = window if sliding and (serving is None or serving.honours_layer_types) else None
        last = None
        if serving is not None and serving.draft_window is not None:
            last = compact_draft_len(context, serving.draft_window, serving.page_size)
        spans.append({"band": band, "last": last})
    return spans


def _served_label(version: str | None, honours: bool, flag: int | None) -> str:
    how = "layer_types honoured" if honours else "layer_types ignored"
    head = f"SGLang {version} ({how})" if version else f"SGLang ({how})"
    return head + (f", {NEW_WINDOW_FLAG} {flag}" if flag is not None else ", no draft window")


def scenarios_for(
    layer_types: list[str],
    window: int | None,
    *,
    honours_layer_types: bool | None,
    draft_window: int | None,
    page_size: int = 1,
    version: str | None = None,
) -> list[Scenario]:
    """Trained, served (both readings when the SGLang behaviour is unknown), and the fix.

    The fix follows the window verdicts: on a build that ignores layer_types, a drafter
    with sliding layers gets the window flag at its trained window (the automated fix; the
    upgrade to 0.5.14 serves exactly as trained); on a build that honours them, a set flag
    is removed. No fix scenario when the host already serves as trained.
    """
    page = max(page_size, 1)
    trained = Scenario("trained", "each layer's own window, or the whole context", None)
    if honours_layer_types is None:
        post = format_version(LAYER_TYPES_SINCE)
        return [
            trained,
            Scenario(
                "served_before_0.5.14",
                f"if SGLang < {post}: " + _served_label(None, False, draft_window),
                Serving(False, draft_window, page),
            ),
            Scenario(
                "served_from_0.5.14",
                f"if SGLang >= {post}: " + _served_label(None, True, draft_window),
                Serving(True, draft_window, page),
            ),
        ]
    served = Serving(honours_layer_types, draft_window, page)
    out = [
        trained,
        Scenario("served", _served_label(version, honours_layer_types, draft_window), served),
    ]
    sliding = window is not None and "sliding_attention" in layer_types
    fix: Serving | None = None
    if not honours_layer_types and sliding and draft_window != window:
        fix = Serving(False, window, page)
        label = f"{NEW_WINDOW_FLAG} {window} (upgrading to 0.5.14 serves as trained)"
    elif draft_window is not None and (honours_layer_types or not sliding):
        fix = Serving(honours_layer_types, None, page)
        label = f"remove {NEW_WINDOW_FLAG}"
    if fix is not None:
        out.append(Scenario("fix", label, fix))
    return out


def spans_input(
    scenarios: list[Scenario], layer_types: list[str], window: int | None, contexts: list[int]
) -> list[dict[str, Any]]:
    """The probe script's `scenarios` input: per scenario, per context, per layer spans."""
    return [
        {
            "name": s.name,
            "label": s.label,
            "spans": [layer_spans(layer_types, window, s.serving, n) for n in contexts],
        }
        for s in scenarios
    ]
