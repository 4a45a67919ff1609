"""The prefix-reuse probe of a bench: one greedy prompt sent twice after a flush.

The second request reuses the first's prompt from the radix cache; with greedy sampling it
must continue exactly as the first did. On a hybrid target (linear-attention / Mamba layers)
whose release takes the recurrent-state checkpoint at the wrong place (DFD172), the second
answer departs from the first: DFD173 reads the comparison made here.

The prompt is longer than SGLang's default Mamba track interval (256 tokens,
`--mamba-track-interval`), so the reused prefix passes at least one state checkpoint.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dflash_doctor.bench.prompts import PromptSet, corpus
from dflash_doctor.facts.models import PrefixProbe

PROBE_CHARS = 6000  # about 1500 tokens of prose: several track intervals
PROBE_NEW_TOKENS = 64
PROBE_TASK = "Continue the text above for one more paragraph."
# Output ids shown either side of the first mismatch.
SHOWN = 4


def probe_text(prompts: Sequence[PromptSet] = ()) -> str:
    """The probe's prompt: where the sweep sends only a user's file, its longest prompt (the
    bench adds no text of its own to a user's traffic); else the start of the packaged prose
    corpus and a task."""
    files = [t for ps in prompts if ps.kind == "file" for t in ps.texts]
    if files and all(ps.kind in ("file", "random") for ps in prompts):
        return max(files, key=len)[:PROBE_CHARS]
    text = str(corpus()["prose"]["text"])[:PROBE_CHARS]
    return f"{text}\n\n{PROBE_TASK}"


def probe_op(max_new_tokens: int, prompts: Sequence[PromptSet] = ()) -> dict[str, Any]:
    """The shipped client's `repeat` op (on_host/server_http.py)."""
    return {"op": "repeat", "text": probe_text(prompts), "max_new_tokens": max_new_tokens}


def _ids(value: object) -> list[int]:
    if not isinstance(value, list):
        return []
    return [i for i in value if isinstance(i, int) and not isinstance(i, bool)]


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def compare(answer: dict[str, Any], max_new_tokens: int) -> PrefixProbe:
    """The probe's result from the host's answer: where the two answers first differ."""
    if "error" in answer:
        return PrefixProbe(max_new_tokens=max_new_tokens, error=str(answer["error"])[:300])
    first, second = _ids(answer.get("first")), _ids(answer.get("second"))
    probe = PrefixProbe(
        prompt_tokens=_int(answer.get("prompt_tokens")),
        max_new_tokens=max_new_tokens,
        cached_tokens=_int(answer.get("cached_tokens")),
        tokens_compared=min(len(first), len(second)),
    )
    if not first or not second:
        probe.error = "an answer had no output tokens"
        return probe
    pairs = enumerate(zip(first, second, strict=False))
    mismatch = next((i for i, (a, b) in pairs if a != b), None)
    if mismatch is None and len(first) != len(second):
        mismatch = probe.tokens_compared  # one stopped where the other went on
    if mismatch is not None:
        lo = max(0, mismatch - SHOWN)
        probe.first_mismatch = mismatch
        probe.first_tokens = first[lo : mismatch + SHOWN]
        probe.second_tokens = second[lo : mismatch + SHOWN]
    return probe


def probe_line(probe: PrefixProbe | None) -> str | None:
    """The bench report's line on the probe, or None where it did not run."""
    if probe is None:
        return None
    if probe.error is not None:
        return f"prefix reuse: not measured ({probe.error})"
    cached = (
        f"{probe.cached_tokens} prompt tokens from the cache"
        if probe.cached_tokens
        else ("no prompt tokens from the cache")
    )
    if probe.first_mismatch is None:
        return (
            f"prefix reuse: the same greedy prompt twice gave the same {probe.tokens_compared} "
            f"tokens ({cached})"
        )
    return (
        f"prefix reuse: the same greedy prompt twice differs from output token "
        f"{probe.first_mismatch} on ({cached}): {probe.first_tokens} vs {probe.second_tokens}"
    )
