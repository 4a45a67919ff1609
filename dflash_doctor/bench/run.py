"""Run a bench sweep on the live server, through the transport (the requests run on the host).

Before the first cell it asks whether the server serves traffic (`sglang:num_running_reqs`
and `sglang:num_queue_reqs` from /metrics, else /v1/loads) and refuses unless told `yes`;
between cells it flushes the prefix cache (/flush_cache) so no cell reuses another's prompt.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

from dflash_doctor.bench.matrix import BenchOptions, Matrix, plan_matrix
from dflash_doctor.errors import FactError, UsageError
from dflash_doctor.facts.models import BenchCell, BenchRequest, BenchResult, HostFacts
from dflash_doctor.facts.runtime import server_address
from dflash_doctor.finders.server_api import ask_server
from dflash_doctor.gather import gather
from dflash_doctor.hosts import HostSpec
from dflash_doctor.transport.base import Transport

Progress = Callable[[str], None]


def traffic(
    transport: Transport, address: tuple[str, int], pid: int | None, why: list[str] | None = None
) -> int | None:
    """Running plus queued requests now, or None when the server does not say (see `why`)."""
    metrics, load = ask_server(transport, address, pid, [{"op": "metrics"}, {"op": "load"}])
    if why is not None:
        why.extend(str(a["error"]) for a in (metrics, load) if "error" in a)
    samples = metrics.get("samples")
    if isinstance(samples, dict) and "sglang:num_running_reqs" in samples:
        total = 0.0
        for name in ("sglang:num_running_reqs", "sglang:num_queue_reqs"):
            for row in samples.get(name) or []:
                if isinstance(row, dict) and isinstance(row.get("value"), int | float):
                    total += float(row["value"])
        return round(total)
    if isinstance(load.get("running"), int) and isinstance(load.get("waiting"), int):
        return int(load["running"]) + int(load["waiting"])
    return None


def _cell(answer: dict[str, object], ctx: int, conc: int, temp: float, new: int) -> BenchCell:
    """One cell from the host's answer; a malformed request row is an error row, not a crash."""
    cell = BenchCell(context=ctx, concurrency=conc, temperature=temp, max_new_tokens=new)
    if "error" in answer:
        cell.error = str(answer["error"])
        return cell
    wall = answer.get("wall_s")
    cell.wall_s = float(wall) if isinstance(wall, int | float) else 0.0
    rows = answer.get("requests")
    for row in rows if isinstance(rows, list) else []:
        if not isinstance(row, dict):
            continue
        try:
            cell.requests.append(BenchRequest.model_validate(row))
        except ValueError:
            cell.requests.append(BenchRequest(error="malformed answer"))
    return cell


def run_matrix(
    transport: Transport,
    facts: HostFacts,
    matrix: Matrix,
    options: BenchOptions,
    pid: int | None,
    progress: Progress | None = None,
) -> BenchResult:
    """Run every cell of the matrix on the host, refusing a server under traffic unless --yes."""
    launch = facts.launch.value
    address = server_address(launch)
    if facts.runtime.value is None:
        raise FactError(f"cannot bench: {facts.runtime.error or 'no running server found'}")
    why: list[str] = []
    busy = traffic(transport, address, pid, why)
    if not options.yes:
        if busy is None:
            raise UsageError(
                f"{facts.host}: cannot tell whether the server serves traffic "
                f"({'; '.join(why)}): add --yes to bench it anyway"
            )
        if busy > 0:
            raise UsageError(
                f"{facts.host}: the server is serving traffic ({busy} running or queued "
                "requests): add --yes to load it anyway"
            )
    result = BenchResult(
        host=facts.host,
        sglang_version=facts.runtime.value.version or facts.sglang_version.value,
        window=matrix.window,
        seed=options.seed,
        vocab=matrix.vocab,
        contexts=matrix.contexts,
        concurrency=matrix.concurrency,
        temperatures=matrix.temperatures,
        max_new_tokens=matrix.max_new_tokens,
        tokens_sent=matrix.tokens_sent,
        notes=list(matrix.notes),
    )
    for ctx, conc, temp in matrix.cells():
        if progress is not None:
            progress(f"{ctx} tokens x {conc} at T={temp:g}")
        op = {
            "op": "cell",
            "seed": f"{options.seed}/{ctx}/{conc}/{temp:g}",
            "context": ctx,
            "concurrency": conc,
            "max_new_tokens": matrix.max_new_tokens,
            "temperature": temp,
            "vocab": matrix.vocab,
        }
        flush, answer = ask_server(
            transport, address, pid, [{"op": "flush"}, op], timeout=options.request_timeout
        )
        cell = _cell(answer, ctx, conc, temp, matrix.max_new_tokens)
        if "error" in flush and cell.error is None:
            result.notes.append(f"cell {ctx}x{conc}: {flush['error']}")
        result.cells.append(cell)
    return result


def bench_host(
    spec: HostSpec,
    transport: Transport,
    options: BenchOptions,
    progress: Callable[[int], AbstractContextManager[Progress]] | None = None,
) -> BenchResult:
    """Gather the host's facts, plan the matrix, run it (with a progress bar over its cells)."""
    if transport.live_refused is not None:
        raise UsageError(f"{transport.live_refused}: bench needs a live server")
    facts = gather(spec, transport)
    pid = facts.server_pid() or spec.hints.pid
    matrix = plan_matrix(facts, options)
    if progress is None:
        return run_matrix(transport, facts, matrix, options, pid)
    with progress(len(matrix.cells())) as step:
        return run_matrix(transport, facts, matrix, options, pid, step)
