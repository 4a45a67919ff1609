"""The live vLLM server's answers (`/version`, `/metrics`, asked on the host by the shipped
client's `version` and `vllm_metrics` operations, on_host/server_http.py), typed.

Two scrapes make a window: the counters' increase between them is what the server did
in that time (`delta`), as vLLM's own `vllm bench serve` measures acceptance
(vllm/benchmarks/serve.py 0.34.0:210-271, 996, 1131-1171: the counters fetched before and
after the run, `1 + accepted / drafts` of the difference). A counter that went down
means the server restarted between the scrapes: no delta, one line.

The samples arrive already bounded (the client keeps at most MAX_METRIC_SAMPLES finite
values of `vllm:spec_decode_*`); what is read here is still host text: a count that is not a
whole non-negative number, a position that is not a small integer, or a counter missing is
one line naming /metrics, never a traceback.
"""

from __future__ import annotations

from typing import Any

from dflash_doctor.errors import FactError
from dflash_doctor.facts.vllm_models import VllmRuntime, VllmSpecDecode

# The counters' exported names: prometheus_client adds `_total` to a Counter's samples
# (the names vllm/v1/spec_decode/metrics.py 0.34.0:229-231, 255 give, plus `_total`).
DRAFTS = "vllm:spec_decode_num_drafts_total"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
# num_speculative_tokens has no upper bound in vLLM; a position past this is not a draft
# length anyone serves and is refused rather than allocated.
MAX_POSITIONS = 256
MAX_COUNT = 1 << 62
# The scheduler's gauges (vllm/v1/metrics/loggers.py 0.34.0:528, 538): requests running
# and waiting now, summed over engines.
RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"


def parse_vllm_runtime(
    version: dict[str, Any],
    metrics: dict[str, Any],
    url: str,
    later: tuple[dict[str, Any], float] | None = None,
) -> VllmRuntime:
    """The typed fact from the client's `version` and `vllm_metrics` answers; with `later`
    (a second `vllm_metrics` answer and the seconds between them), the window too."""
    spec, metrics_error = None, None
    try:
        spec = spec_decode(metrics)
    except FactError as e:
        metrics_error = str(e)
    got = version.get("version")
    runtime = VllmRuntime(
        url=url,
        version=got if isinstance(got, str) and got else None,
        version_error=None if isinstance(got, str) and got else str(version.get("error")),
        spec_decode=spec,
        metrics_error=metrics_error,
    )
    if later is None or spec is None:
        return runtime
    try:
        after = spec_decode(later[0])
        if after is None:
            raise FactError("/metrics: the spec-decode counters are gone at the second scrape")
        window = delta(spec, after)
    except FactError as e:
        return runtime.model_copy(update={"window_error": str(e)[:300]})
    return runtime.model_copy(update={"spec_decode": after, "window": window, "window_s": later[1]})


def delta(before: VllmSpecDecode, after: VllmSpecDecode) -> VllmSpecDecode:
    """What the counters grew by between two scrapes; FactError where one went down (the
    server restarted between them, its counters from zero again)."""
    pairs = [
        (before.drafts, after.drafts),
        (before.draft_tokens, after.draft_tokens),
        (before.accepted, after.accepted),
    ]
    per_pos = []
    for pos, now in enumerate(after.accepted_per_pos):
        then = before.accepted_per_pos[pos] if pos < len(before.accepted_per_pos) else 0
        pairs.append((then, now))
        per_pos.append(now - then)
    if any(now < then for then, now in pairs):
        raise FactError("/metrics: a spec-decode counter went down (the server restarted)")
    return VllmSpecDecode(
        drafts=after.drafts - before.drafts,
        draft_tokens=after.draft_tokens - before.draft_tokens,
        accepted=after.accepted - before.accepted,
        accepted_per_pos=per_pos,
    )


def requests_now(metrics: dict[str, Any]) -> int | None:
    """Requests running plus waiting on the server (its gauges summed over engines), None
    where /metrics does not say."""
    samples = metrics.get("samples")
    if not isinstance(samples, dict) or RUNNING not in samples:
        return None
    total = 0.0
    for name in (RUNNING, WAITING):
        rows = samples.get(name) or []
        for row in rows if isinstance(rows, list) else []:
            value = row.get("value") if isinstance(row, dict) else None
            if isinstance(value, int | float) and 0 <= value < MAX_COUNT:
                total += value
    return round(total)


def spec_decode(metrics: dict[str, Any]) -> VllmSpecDecode | None:
    """The counters summed over label sets (one per engine); None where the server serves
    none (no speculative decoding); FactError on an answer that cannot be read."""
    if "error" in metrics:
        raise FactError(str(metrics["error"])[:300])
    samples = metrics.get("samples")
    if not isinstance(samples, dict):
        raise FactError("/metrics: no samples in the answer")
    if not any(name in samples for name in (DRAFTS, DRAFT_TOKENS, ACCEPTED)):
        return None
    per_pos: dict[int, int] = {}
    for labels, value in _rows(samples, PER_POS):
        position = labels.get("position", "")
        if not (position.isascii() and position.isdigit() and int(position) < MAX_POSITIONS):
            raise FactError(f"/metrics: {PER_POS} position {position[:20]!r} is not a position")
        per_pos[int(position)] = per_pos.get(int(position), 0) + value
    positions = sorted(per_pos)
    if positions != list(range(len(positions))):
        raise FactError(f"/metrics: {PER_POS} positions are not 0..k-1")
    return VllmSpecDecode(
        drafts=_total(samples, DRAFTS),
        draft_tokens=_total(samples, DRAFT_TOKENS),
        accepted=_total(samples, ACCEPTED),
        accepted_per_pos=[per_pos[p] for p in positions],
    )


def _rows(samples: dict[str, Any], name: str) -> list[tuple[dict[str, str], int]]:
    """(labels, count) of each sample of one counter; a count must be a whole number."""
    rows = samples.get(name) or []
    if not isinstance(rows, list):
        raise FactError(f"/metrics: {name} is not a list of samples")
    out = []
    for row in rows:
        value = row.get("value") if isinstance(row, dict) else None
        labels = row.get("labels") if isinstance(row, dict) else None
        if not isinstance(value, int | float) or not 0 <= value < MAX_COUNT or value % 1:
            raise FactError(f"/metrics: {name} has a value that is not a count")
        if not isinstance(labels, dict):
            labels = {}
        out.append(({str(k): str(v) for k, v in labels.items()}, int(value)))
    return out


def _total(samples: dict[str, Any], name: str) -> int:
    """One counter summed over its label sets (engines); FactError where it is missing."""
    if name not in samples:
        raise FactError(f"/metrics: {name} is missing")
    return sum(value for _, value in _rows(samples, name))
