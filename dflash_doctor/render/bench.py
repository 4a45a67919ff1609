"""The bench report: a table per kind of prompt, before over after for a fix, the JSON
document."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from dflash_doctor.bench.baseline import Pair, pairs
from dflash_doctor.bench.compare import Verdict
from dflash_doctor.bench.prefix_probe import probe_line
from dflash_doctor.facts.bench_stats import (
    Interval,
    cell_interval,
    finish_share,
    histogram,
    repeat_means,
    request_weighted,
)
from dflash_doctor.facts.models import BenchCell, BenchResult
from dflash_doctor.render.text import clean

SCHEMA = "dflash-doctor-bench/2"  # 2: prompts, repeats, intervals, baseline


def _f(value: float | None, digits: int = 2) -> str:
    """A number with `digits` decimals, or a dash for none."""
    return "-" if value is None else f"{value:.{digits}f}"


def cell_summary(c: BenchCell) -> dict[str, Any]:
    """One cell's figures as the JSON report gives them."""
    lengths = c.accept_lengths
    ci = cell_interval(c)
    return {
        "prompts": c.prompts,
        "context": c.context,
        "concurrency": c.concurrency,
        "temperature": c.temperature,
        "max_new_tokens": c.max_new_tokens,
        "repeats": c.repeats,
        "sized_by": c.sized_by,
        "requests": len(c.requests),
        "errors": sum(1 for r in c.requests if r.error is not None) + (1 if c.error else 0),
        "error": c.error or next((r.error for r in c.requests if r.error), None),
        "accept_length": c.accept_length,
        "accept_length_request_weighted": request_weighted(c.requests),
        "accept_length_ci95": [ci.lo, ci.hi] if ci is not None else None,
        "accept_length_repeats": repeat_means(c),
        "accept_length_min": min(lengths) if lengths else None,
        "accept_length_max": max(lengths) if lengths else None,
        "accept_histogram": histogram(c) or None,
        "prompt_tokens_mean": _mean_of([r.prompt_tokens for r in c.ok]),
        "stopped_share": finish_share(c, "stop"),
        "reasoning_responses": _reasoning_count(c),
        "tokens_per_s_request": c.tokens_per_s_request,
        "tokens_per_s_total": c.tokens_per_s_total,
        "latency_s": c.latency_s,
        "wall_s": c.wall_s,
        # vLLM: each repeat's /metrics counter deltas (None: not measured); SGLang: None
        "counter_deltas": [d.model_dump() if d else None for d in c.repeat_counters] or None,
        "per_position_rates": _position_rates(c),
    }


def _position_rates(c: BenchCell) -> list[float] | None:
    """vLLM's per-position acceptance rates pooled over the cell's repeats (accepted at
    each position per draft), None where no counters were read."""
    counted = [d for d in c.repeat_counters if d is not None]
    drafts = sum(d.drafts for d in counted)
    if not drafts:
        return None
    width = max(len(d.accepted_per_pos) for d in counted)
    totals = [sum(d.accepted_per_pos[p] for d in counted if p < len(d.accepted_per_pos))
              for p in range(width)]  # fmt: skip
    return [t / drafts for t in totals]


def _reasoning_count(c: BenchCell) -> int | None:
    """Responses of the cell that carried reasoning tokens (None: the host did not say)."""
    known = [r.reasoning for r in c.ok if r.reasoning is not None]
    return sum(known) if known else None


def _mean_of(values: list[int | None]) -> float | None:
    """The mean of the known values."""
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def bench_document(result: BenchResult, verdict: Verdict | None = None) -> dict[str, Any]:
    """The bench JSON document: the sweep, each cell with its requests, the verdict if any."""
    doc: dict[str, Any] = {"schema": SCHEMA}
    doc.update(result.model_dump(exclude={"cells", "baseline"}))
    doc["cells"] = [
        {**cell_summary(c), "per_request": [r.model_dump() for r in c.requests]}
        for c in result.cells
    ]
    if result.baseline is not None:
        doc["baseline"] = baseline_document(result)
    if verdict is not None:
        doc["verdict"] = verdict.model_dump()
    return doc


def _pair_summary(p: Pair) -> dict[str, Any]:
    """One cell with and without speculation, as the JSON report gives it."""

    def ci(i: Interval | None) -> list[float] | None:
        return [i.lo, i.hi] if i is not None else None

    return {
        "prompts": p.spec.prompts,
        "context": p.spec.context,
        "concurrency": p.spec.concurrency,
        "temperature": p.spec.temperature,
        "accept_length": p.accept.mean if p.accept else None,
        "tokens_per_s": p.tps.mean if p.tps else None,
        "tokens_per_s_ci95": ci(p.tps),
        "tokens_per_s_baseline": p.tps_base.mean if p.tps_base else None,
        "tokens_per_s_baseline_ci95": ci(p.tps_base),
        "latency_s": p.latency.mean if p.latency else None,
        "latency_s_baseline": p.latency_base.mean if p.latency_base else None,
        "speedup": _mean(p.speedup),
        "speedup_ci95": ci(p.speedup),
        "break_even_accept_length": p.break_even,
        "verdict": p.verdict,
    }


def baseline_document(result: BenchResult) -> dict[str, Any]:
    """The baseline part of the JSON document: where, the verdict, each cell paired."""
    assert result.baseline is not None
    return {
        "source": result.baseline.source,
        "verdict": result.baseline.verdict,
        "pairs": [_pair_summary(p) for p in pairs(result)],
        "cells": [
            {**cell_summary(c), "per_request": [r.model_dump() for r in c.requests]}
            for c in result.baseline.cells
        ],
    }


def render_bench_json(result: BenchResult) -> str:
    """The bench as its JSON document."""
    return json.dumps(bench_document(result), indent=2) + "\n"


def _where(c: BenchCell, window: int | None) -> str:
    """Whether a cell's context is inside or beyond the window (blank without one)."""
    if window is None or c.context == 0:
        return ""
    return "in" if c.context <= window else "out"


def _ci(c: BenchCell) -> str:
    """The cell's 95 % interval as lo-hi."""
    ci = cell_interval(c)
    return "-" if ci is None else f"{ci.lo:.2f}-{ci.hi:.2f}"


def bench_table(result: BenchResult, title: str | None = None, prompts: str | None = None) -> Table:
    """The cells of one kind of prompt (all when None), readable at 80 columns."""
    table = Table(
        "context", "win", "conc", "T", "accept", "95% CI", "req-wt", "tok/s", "lat s", "stop",
        title=title, box=None, title_justify="left",
    )  # fmt: skip
    for c in result.cells:
        if prompts is not None and c.prompts != prompts:
            continue
        s = cell_summary(c)
        stop = s["stopped_share"]
        table.add_row(
            str(c.context) if c.context else "given",
            _where(c, result.window),
            str(c.concurrency),
            f"{c.temperature:g}",
            Text("fail", style="red") if s["accept_length"] is None else _f(c.accept_length),
            Text(clean(str(s["error"]))[:11], style="red")
            if s["accept_length"] is None
            else _ci(c),
            _f(s["accept_length_request_weighted"]),
            _f(s["tokens_per_s_total"], 0),
            _f(s["latency_s"], 2),
            "-" if stop is None else f"{stop * 100:.0f}%",
        )
    return table


def _mean(i: Interval | None) -> float | None:
    return i.mean if i is not None else None


def baseline_table(result: BenchResult, prompts: str) -> Table:
    """With vs without speculation per cell of one kind of prompt (80 columns): throughput
    and latency on/off, the break-even accept length and the verdict."""
    table = Table(
        "context", "conc", "T", "accept", "b-even", "tok/s on/off", "lat s on/off", "DFLASH",
        title=f"with vs without speculation: {prompts}", box=None, title_justify="left",
    )  # fmt: skip
    for p in pairs(result):
        if p.spec.prompts != prompts:
            continue
        tps = f"{_f(_mean(p.tps), 0)}/{_f(_mean(p.tps_base), 0)}"
        lat = f"{_f(_mean(p.latency))}/{_f(_mean(p.latency_base))}"
        style = {"slower": "red", "faster": "green"}.get(p.verdict, "")
        table.add_row(
            str(p.spec.context) if p.spec.context else "given",
            str(p.spec.concurrency),
            f"{p.spec.temperature:g}",
            _f(_mean(p.accept)),
            _f(p.break_even),
            tps,
            lat,
            Text(p.verdict, style=style),
        )
    return table


def render_baseline(result: BenchResult, console: Console) -> None:
    """The baseline's tables and its verdict lines (where DFLASH is slower, the bound)."""
    if result.baseline is None:
        return
    console.print(Text(clean(f"baseline: {result.baseline.source}"), style="dim"))
    for kind in _kinds(result):
        console.print(baseline_table(result, kind))
    for line in result.baseline.verdict:
        slower = line.startswith(("DFLASH is slower", "bound it", "slower already"))
        console.print(Text(clean(line), style="bold red" if slower else ""))


def _kinds(result: BenchResult) -> list[str]:
    """The kinds of prompt the sweep sent, in order."""
    return list(dict.fromkeys(c.prompts for c in result.cells))


def render_bench(result: BenchResult, console: Console) -> None:
    """The bench as a terminal report: its settings, a table per kind of prompt, notes."""
    engine = (
        f"vLLM {result.vllm_version}"
        if result.engine == "vllm"
        else f"SGLang {result.sglang_version}"
    )
    console.rule(Text(clean(f"{result.host}  bench ({engine})"), style="bold"))
    console.print(
        f"window {result.window or 'none'}, {result.repeats} repeats per cell, "
        f"{result.max_new_tokens} new tokens at most per request, {result.tokens_sent} tokens "
        f"sent; accept = token-weighted accept length with its 95 % interval, req-wt = "
        "request-weighted; stop = share of requests that ended before the cap",
        markup=False,
        highlight=False,
    )
    for note in result.notes:  # a cell's error is the host's text: cleaned
        console.print(Text(clean(note), style="dim"))
    for kind in _kinds(result):
        console.print(bench_table(result, f"prompts: {kind}", kind))
    for line in collapse_lines(result):
        console.print(Text(clean(line), style="bold red"))
    for line in issue_lines(result):
        console.print(Text(clean(line), style="bold red" if "differs" in line else ""))
    render_baseline(result, console)
    if result.corpus_notice:
        console.print(Text(result.corpus_notice, style="dim"))


def reasoning_line(result: BenchResult) -> str | None:
    """How many responses carried reasoning tokens, where the host said (DFD171)."""
    rows = [r for c in result.cells for r in c.ok if r.reasoning is not None]
    if not rows:
        return None
    thought = sum(1 for r in rows if r.reasoning)
    return f"reasoning tokens (<think>) in {thought} of {len(rows)} responses"


def issue_lines(result: BenchResult) -> list[str]:
    """The reasoning share and the prefix-reuse probe's outcome, where measured."""
    lines = [reasoning_line(result), probe_line(result.prefix_probe)]
    return [line for line in lines if line is not None]


def collapse_lines(result: BenchResult) -> list[str]:
    """The silent-collapse verdict and its likely causes, ranked (DFD143)."""
    if not result.collapse:
        return []
    return [result.collapse[0], *(f"  likely: {c}" for c in result.collapse[1:])]


def bench_pair(
    before: BenchResult, after: BenchResult | None, verdict: Verdict | None
) -> list[Table | Text]:
    """Before and after the fix, stacked per kind of prompt (80 columns), and the verdict:
    what render/fix.py prints of a fix's bench."""
    parts: list[Table | Text] = []
    for kind in _kinds(before):
        parts.append(bench_table(before, f"before the fix: {kind}", kind))
        if after is not None:
            parts.append(bench_table(after, f"after the fix: {kind}", kind))
    if after is None:
        parts.append(Text("after: not measured"))
    if verdict is not None:
        style = "green" if verdict.keep else "bold red"
        word = "kept" if verdict.keep else "not kept"
        parts.append(Text(clean(f"bench: {word}: {verdict.reason}"), style=style))
    return parts


@contextmanager
def cell_progress(total: int) -> Iterator[Callable[[str], None]]:
    """A progress bar over the cells, on stderr when it is a terminal."""
    if not sys.stderr.isatty():
        yield lambda _what: None
        return
    with Progress(
        TextColumn("bench"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}"),
        console=Console(stderr=True),
        transient=True,
    ) as progress:
        task = progress.add_task("", total=total)
        started = [False]

        def step(what: str) -> None:
            if started[0]:
                progress.update(task, advance=1)
            started[0] = True
            progress.update(task, description=what)

        yield step
        progress.update(task, completed=total)
