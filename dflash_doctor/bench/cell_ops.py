"""What a sweep does the same on every engine: the empty result of its settings, the
shipped client's op for one repeat of a cell and the rows of its answer (bench/run.py for
SGLang, bench/vllm_run.py for vLLM)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dflash_doctor.bench.matrix import BenchOptions, Matrix
from dflash_doctor.bench.prompts import CORPUS_KINDS, RANDOM_LABEL, PromptSet, corpus, text_op
from dflash_doctor.facts.models import BenchCell, BenchRequest, BenchResult

# One repeat of a cell on the engine: ask the server with the cell's op, add the answer.
OneRepeat = Callable[[BenchCell, dict[str, Any], int], None]


def measure_cells(
    matrix: Matrix,
    options: BenchOptions,
    notes: list[str],
    one_repeat: OneRepeat,
    progress: Callable[[str], None] | None = None,
) -> list[BenchCell]:
    """Every cell of the matrix, each `repeats` times, each repeat run by the engine's
    `one_repeat` (bench/run.py for SGLang, bench/vllm_run.py for vLLM)."""
    cells = []
    for ps, ctx, conc, temp in matrix.cells():
        cell = BenchCell(context=ctx, concurrency=conc, temperature=temp, prompts=ps.label,
                         max_new_tokens=matrix.max_new_tokens, repeats=matrix.repeats)  # fmt: skip
        for repeat in range(matrix.repeats):
            if progress is not None:
                size = f"{ctx} tokens" if ctx else "as given"
                progress(f"{ps.kind} {size} x {conc} at T={temp:g} ({repeat + 1})")
            op, note = cell_op(options, matrix, (ps, ctx, conc, temp), repeat)
            if note and note not in notes:
                notes.append(note)
            one_repeat(cell, op, repeat)
        cells.append(cell)
    return cells


def add_repeat(cell: BenchCell, answer: dict[str, object], repeat: int) -> None:
    """One repeat of a cell from the host's answer; a malformed request row is an error row,
    not a crash."""
    wall = answer.get("wall_s")
    # One entry per repeat (0.0: not measured), so entry r is repeat r's wall time.
    # A huge or non-finite wall time (a hostile answer) is "not measured", never an overflow.
    bounded = isinstance(wall, int | float) and 0 <= wall <= 10**7 and wall == wall
    cell.repeat_wall_s.append(float(wall) if bounded and "error" not in answer else 0.0)  # type: ignore[arg-type]
    if "error" in answer:
        cell.error = cell.error or str(answer["error"])
        return
    cell.wall_s += cell.repeat_wall_s[-1]
    sized = answer.get("sized_by")
    if isinstance(sized, str) and cell.sized_by in (None, "tokenize"):
        cell.sized_by = sized[:20]  # "estimate" on any repeat is what the cell reports
    rows = answer.get("requests")
    for row in rows if isinstance(rows, list) else []:
        if not isinstance(row, dict):
            continue
        try:
            cell.requests.append(BenchRequest.model_validate({**row, "repeat": repeat}))
        except ValueError:
            cell.requests.append(BenchRequest(error="malformed answer", repeat=repeat))


def cell_op(
    options: BenchOptions, matrix: Matrix, cell: tuple[PromptSet, int, int, float], repeat: int
) -> tuple[dict[str, object], str | None]:
    """The shipped client's op for one repeat of a cell, and a note on its text if any."""
    ps, ctx, conc, temp = cell
    op: dict[str, object] = {
        "op": "cell",
        "seed": f"{options.seed}/{ctx}/{conc}/{temp:g}" + (f"/{repeat}" if repeat else ""),
        "context": ctx,
        "concurrency": conc,
        "max_new_tokens": matrix.max_new_tokens,
        "temperature": temp,
        "vocab": matrix.vocab,
    }
    if ps.kind == "random":
        return op, None
    # The same excerpts at every temperature and before and after a fix: only the key.
    text, note = text_op(ps, f"{options.seed}/{ps.kind}/{ctx}/{conc}", ctx, conc, repeat)
    op["text"] = text
    return op, note


def sweep_result(
    host: str, matrix: Matrix, options: BenchOptions, notes: tuple[str, ...] = (), **engine: Any
) -> BenchResult:
    """The empty result of a sweep: its settings, `notes` before the matrix's, and the
    engine's own fields (its name, its release)."""
    return BenchResult(
        host=host,
        window=matrix.window,
        seed=options.seed,
        vocab=matrix.vocab,
        contexts=matrix.contexts,
        concurrency=matrix.concurrency,
        temperatures=matrix.temperatures,
        max_new_tokens=matrix.max_new_tokens,
        prompts=[p.label for p in matrix.prompts] or [RANDOM_LABEL],
        repeats=matrix.repeats,
        corpus_notice=corpus()["notice"]
        if any(p.kind in CORPUS_KINDS for p in matrix.prompts)
        else None,
        tokens_sent=matrix.tokens_sent,
        notes=[*notes, *matrix.notes],
        **engine,
    )
