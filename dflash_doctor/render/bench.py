"""The bench report: a table per sweep, two side by side for a fix, the JSON document."""

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

from dflash_doctor.bench.compare import Verdict
from dflash_doctor.facts.models import BenchCell, BenchResult

SCHEMA = "dflash-doctor-bench/1"


def _f(value: float | None, digits: int = 2) -> str:
    """A number with `digits` decimals, or a dash for none."""
    return "-" if value is None else f"{value:.{digits}f}"


def cell_summary(c: BenchCell) -> dict[str, Any]:
    """One cell's figures as the JSON report gives them."""
    lengths = c.accept_lengths
    return {
        "context": c.context,
        "concurrency": c.concurrency,
        "temperature": c.temperature,
        "max_new_tokens": c.max_new_tokens,
        "requests": len(c.requests),
        "errors": sum(1 for r in c.requests if r.error is not None) + (1 if c.error else 0),
        "error": c.error or next((r.error for r in c.requests if r.error), None),
        "accept_length": c.accept_length,
        "accept_length_min": min(lengths) if lengths else None,
        "accept_length_max": max(lengths) if lengths else None,
        "tokens_per_s_request": c.tokens_per_s_request,
        "tokens_per_s_total": c.tokens_per_s_total,
        "latency_s": c.latency_s,
        "wall_s": c.wall_s,
    }


def bench_document(result: BenchResult, verdict: Verdict | None = None) -> dict[str, Any]:
    """The bench JSON document: the sweep, each cell with its requests, the verdict if any."""
    doc: dict[str, Any] = {"schema": SCHEMA}
    doc.update(result.model_dump(exclude={"cells"}))
    doc["cells"] = [
        {**cell_summary(c), "per_request": [r.model_dump() for r in c.requests]}
        for c in result.cells
    ]
    if verdict is not None:
        doc["verdict"] = verdict.model_dump()
    return doc


def render_bench_json(result: BenchResult) -> str:
    """The bench as its JSON document."""
    return json.dumps(bench_document(result), indent=2) + "\n"


def _where(c: BenchCell, window: int | None) -> str:
    """Whether a cell's context is inside or beyond the window (blank without one)."""
    if window is None:
        return ""
    return "inside" if c.context <= window else "beyond"


def bench_table(result: BenchResult, title: str | None = None) -> Table:
    table = Table(
        "context",
        "window",
        "conc",
        "T",
        "accept len",
        "min-max",
        "tok/s/req",
        "tok/s total",
        "latency s",
        title=title,
        box=None,
    )
    for c in result.cells:
        s = cell_summary(c)
        lo, hi = s["accept_length_min"], s["accept_length_max"]
        table.add_row(
            str(c.context),
            _where(c, result.window),
            str(c.concurrency),
            f"{c.temperature:g}",
            Text(s["error"][:60], style="red")
            if s["accept_length"] is None
            else _f(c.accept_length),
            f"{_f(lo)}-{_f(hi)}" if lo is not None else "-",
            _f(s["tokens_per_s_request"], 1),
            _f(s["tokens_per_s_total"], 1),
            _f(s["latency_s"], 3),
        )
    return table


def render_bench(result: BenchResult, console: Console) -> None:
    """The bench as a terminal report: its settings, the table and its notes."""
    console.rule(Text(f"{result.host}  bench (SGLang {result.sglang_version})", style="bold"))
    console.print(
        f"window {result.window or 'none'}, vocab {result.vocab}, seed {result.seed!r}, "
        f"{result.max_new_tokens} new tokens per request, {result.tokens_sent} tokens sent",
        markup=False,
        highlight=False,
    )
    for note in result.notes:
        console.print(Text(note, style="dim"))
    console.print(bench_table(result))


def render_bench_pair(
    before: BenchResult, after: BenchResult | None, verdict: Verdict | None, console: Console
) -> None:
    """Before and after the fix, side by side, and the verdict."""
    grid = Table.grid(padding=(0, 4))
    grid.add_column()
    grid.add_column()
    right: Table | Text = (
        bench_table(after, "after the fix") if after is not None else Text("after: not measured")
    )
    grid.add_row(bench_table(before, "before the fix"), right)
    console.print(grid)
    if verdict is not None:
        style = "green" if verdict.keep else "bold red"
        word = "kept" if verdict.keep else "not kept"
        console.print(Text(f"bench: {word}: {verdict.reason}", style=style))


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
