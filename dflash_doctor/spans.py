"""Trained vs served attention span of each draft layer: one pure model of what SGLang runs.

A span is the number of committed context tokens a draft layer attends over (the draft
block's own positions come on top, the same in training and serving, so they are left out).
`None` means the whole context.

What SGLang does, read in the published wheels:

- **Layer types.** From 0.5.14 `srt/models/dflash.py` builds each layer from
  `config.layer_types` (`_get_dflash_layer_attention_params`, 0.5.14:44-66, 0.5.23:166-190):
  `full_attention` -> window -1 (whole context), `sliding_attention` -> window_left
  `get_dflash_attention_sliding_window_size(config)` = `sliding_window - 1`
  (speculative/dflash_utils.py 0.5.14:341-356, 0.5.23:400-417: "HF sliding windows include
  the current token; SGLang stores window_left"), i.e. exactly the trained W tokens.
  0.5.11-0.5.13 build every layer with `AttentionType.ENCODER_ONLY` and no window
  (models/dflash.py 0.5.11:112-118, 0.5.13:116-122): every layer sees the whole context.
- **The window flag** `--speculative-draft-window-size N` (0.5.11:
  `--speculative-dflash-draft-window-size`) gives the draft worker a private compact
  req->token table (speculative/dflash_worker.py 0.5.11:87-98, dflash_worker_v2.py
  0.5.14:284-291) whose length is `_compute_compact_draft_seq_lens` (0.5.11:423-439,
  0.5.13:425-441, 0.5.14:511-527, 0.5.23:1209-1225): `min(L, N)` rounded so the view starts
  on a page boundary, i.e. `N + (L - N) % page_size` once `L > N`: between N and
  N + page_size - 1 tokens. Every layer, full_attention ones included, sees at most that.
- A sliding layer that SGLang honours sees `min(W, view)`.

Served equal to trained means: the same span, where a view wider than the window only by
the page alignment (at most page_size - 1 older tokens) counts as equal and is said so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

SLIDING = "sliding_attention"
FULL = "full_attention"

Verdict = Literal["as_trained", "wider", "truncated", "clamped"]


@dataclass(frozen=True)
class Behaviour:
    """Whether the host's SGLang builds draft layers from `layer_types`, and who said so."""

    honours_layer_types: bool
    source: str  # e.g. "SGLang source /opt/.../srt/models/dflash.py", "version table (0.5.13)"


@dataclass(frozen=True)
class LayerSpan:
    layer: int
    layer_type: str
    trained: int | None  # tokens; None = the whole context
    served_min: int | None  # None = the whole context
    served_max: int | None
    verdict: Verdict
    page_slack: int = 0  # tokens of page alignment beyond the trained window (<= page - 1)
    context: int | None = None

    def describe_served(self) -> str:
        if self.served_max is None:
            return "the whole context"
        if self.context is not None and self.served_min == self.served_max == self.context:
            return f"the whole context ({self.context} tokens)"
        if self.served_min == self.served_max:
            return f"{self.served_max} tokens"
        return f"{self.served_min}-{self.served_max} tokens"

    def describe_trained(self) -> str:
        return "the whole context" if self.trained is None else f"{self.trained} tokens"


@dataclass(frozen=True)
class SpanModel:
    behaviour: Behaviour
    layers: tuple[LayerSpan, ...]
    window_flag: int | None
    page_size: int
    block_size: int | None
    context: int | None  # the server's context length; None = unknown (assume long)

    def with_verdict(self, *verdicts: Verdict) -> list[LayerSpan]:
        return [s for s in self.layers if s.verdict in verdicts]

    @property
    def served_as_trained(self) -> bool:
        return all(s.verdict == "as_trained" for s in self.layers)

    @property
    def page_slack(self) -> int:
        return max((s.page_slack for s in self.layers), default=0)

    def reads_per_step(self) -> int | None:
        """Context KV entries the draft reads per decode step and request, over all layers.

        Each of the block's `block_size` queries reads every key its layer's span holds;
        None when the context length is unknown and some layer spans the whole context.
        """
        total = 0
        for s in self.layers:
            span = s.served_max if s.served_max is not None else self.context
            if span is None:
                return None
            total += span
        return total * (self.block_size or 1)


def compact_view(context: int | None, flag: int, page_size: int) -> tuple[int, int]:
    """(min, max) committed tokens in the draft worker's compact view over contexts up to
    `context` (`_compute_compact_draft_seq_lens`): N once past N, plus < page of alignment."""
    page = max(page_size, 1)
    low = flag if context is None else min(context, flag)
    high = flag + page - 1 if page > 1 else flag
    if context is not None:
        high = min(context, high)
    return low, high


def served_spans(
    *,
    behaviour: Behaviour,
    layer_types: list[str],
    sliding_window: int | None,
    window_flag: int | None,
    page_size: int = 1,
    block_size: int | None = None,
    context: int | None = None,
) -> SpanModel:
    """Trained vs served span of every draft layer at the server's context length."""
    page = max(page_size or 1, 1)
    view: tuple[int, int] | None = (
        compact_view(context, window_flag, page) if window_flag is not None else None
    )
    spans: list[LayerSpan] = []
    for i, kind in enumerate(layer_types):
        trained = sliding_window if kind == SLIDING and sliding_window else None
        if trained is not None and context is not None and context <= trained:
            trained_eff: int | None = context  # the whole context fits the window
        else:
            trained_eff = trained
        lo: int | None
        hi: int | None
        if view is None:
            lo = hi = None  # the whole context
        else:
            lo, hi = view
        if trained is not None and behaviour.honours_layer_types:
            # SGLang applies the trained window inside whatever view the worker keeps.
            lo = trained if lo is None else min(trained, lo)
            hi = trained if hi is None else min(trained, hi)
        if context is not None:
            lo = context if lo is None else min(lo, context)
            hi = context if hi is None else min(hi, context)
        spans.append(_judge(i, kind, trained_eff, lo, hi, context, page))
    return SpanModel(
        behaviour=behaviour,
        layers=tuple(spans),
        window_flag=window_flag,
        page_size=page,
        block_size=block_size,
        context=context,
    )


def _judge(
    layer: int,
    kind: str,
    trained: int | None,
    lo: int | None,
    hi: int | None,
    context: int | None,
    page: int,
) -> LayerSpan:
    def span(verdict: Verdict, slack: int = 0) -> LayerSpan:
        return LayerSpan(layer, kind, trained, lo, hi, verdict, slack, context)

    if trained is None:
        # Trained over the whole context: served so only when nothing clamps it.
        whole = hi is None or (context is not None and hi >= context and lo == hi)
        return span("as_trained" if whole else "clamped")
    if lo is None or hi is None:
        return span("wider")  # the whole context, beyond the trained window
    if lo < trained:
        return span("truncated")
    slack = hi - trained
    if slack == 0:
        return span("as_trained")
    if lo == trained and slack <= page - 1:
        return span("as_trained", slack)
    return span("wider")
