"""Run a bench sweep on the live server, through the transport (the requests run on the host).

Before the first cell it asks whether the server serves traffic (`sglang:num_running_reqs`
and `sglang:num_queue_reqs` from /metrics, else /v1/loads) and refuses unless told `yes`;
before each repeat of a cell it flushes the prefix cache (/flush_cache) so nothing reuses
another's prompt. What it sends is bench/prompts.py's (real text by default); after the
cells, one greedy prompt twice to see that prefix reuse keeps the tokens (bench/prefix_probe.py).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

from dflash_doctor.bench.baseline import verdict_lines
from dflash_doctor.bench.cell_ops import add_repeat, measure_cells, sweep_result
from dflash_doctor.bench.matrix import BenchOptions, Matrix, plan_matrix
from dflash_doctor.bench.prefix_probe import PROBE_NEW_TOKENS, compare, probe_op
from dflash_doctor.checks.silent_collapse import collapsed, likely_causes
from dflash_doctor.errors import FactError, UsageError
from dflash_doctor.facts.models import (
    BenchBaseline,
    BenchCell,
    BenchResult,
    HostFacts,
    PrefixProbe,
)
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


def _result(facts: HostFacts, matrix: Matrix, options: BenchOptions) -> BenchResult:
    """The empty result of a sweep: its settings."""
    assert facts.runtime.value is not None
    version = facts.runtime.value.version or facts.sglang_version.value
    return sweep_result(facts.host, matrix, options, sglang_version=version)


def _refuse_traffic(
    transport: Transport, facts: HostFacts, address: tuple[str, int], pid: int | None, yes: bool
) -> None:
    """Refuse a server under traffic, or one that cannot say, unless told `yes`."""
    why: list[str] = []
    busy = traffic(transport, address, pid, why)
    if yes:
        return
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


def _measure(
    transport: Transport,
    address: tuple[str, int],
    pid: int | None,
    matrix: Matrix,
    options: BenchOptions,
    notes: list[str],
    progress: Progress | None = None,
) -> list[BenchCell]:
    """Every cell of the matrix, each `repeats` times, on the server at `address` (its prefix
    cache flushed before each repeat)."""

    def one_repeat(cell: BenchCell, op: dict[str, object], repeat: int) -> None:
        flush, answer = ask_server(
            transport, address, pid, [{"op": "flush"}, op], timeout=options.request_timeout
        )
        add_repeat(cell, answer, repeat)
        if "error" in flush and cell.error is None:
            notes.append(f"cell {cell.context}x{cell.concurrency}: {flush['error']}")

    return measure_cells(matrix, options, notes, one_repeat, progress)


# The probe is two short greedy requests: bounded well below a cell's timeout.
PROBE_TIMEOUT_S = 120.0


def prefix_probe(
    transport: Transport, address: tuple[str, int], pid: int | None, options: BenchOptions
) -> PrefixProbe:
    """The same greedy prompt twice after a flush (bench/prefix_probe.py, DFD173)."""
    new = min(PROBE_NEW_TOKENS, options.max_new_tokens)
    timeout = min(options.request_timeout, PROBE_TIMEOUT_S)
    op = probe_op(new, options.prompts)
    (answer,) = ask_server(transport, address, pid, [op], timeout=timeout)
    return compare(answer, new)


def _plain_server(transport: Transport, address: tuple[str, int]) -> str:
    """The baseline server's release, refusing one that speculates or does not answer."""
    (info,) = ask_server(transport, address, None, [{"op": "info"}])
    body = info.get("body")
    if not isinstance(body, dict):
        raise UsageError(f"baseline server on port {address[1]}: {info.get('error', 'no answer')}")
    algo = body.get("speculative_algorithm")
    if algo:
        raise UsageError(
            f"baseline server on port {address[1]} runs speculative_algorithm={str(algo)[:40]}: "
            "start it without --speculative-algorithm"
        )
    return str(body.get("version") or "unknown")[:40]


def _baseline(
    transport: Transport,
    facts: HostFacts,
    matrix: Matrix,
    options: BenchOptions,
    result: BenchResult,
    progress: Progress | None,
) -> BenchBaseline:
    """The same cells on the user's server without speculation, and where DFLASH is slower.
    Its API key is not sent (pid None): the baseline server is the user's own test server."""
    assert options.baseline_port is not None
    address = (server_address(facts.launch.value)[0], options.baseline_port)
    version = _plain_server(transport, address)
    _refuse_traffic(transport, facts, address, None, options.yes)
    baseline = BenchBaseline(
        source=f"port {address[1]}, SGLang {version}, without --speculative-algorithm",
        cells=_measure(transport, address, None, matrix, options, result.notes, progress),
    )
    result.baseline = baseline
    baseline.verdict = verdict_lines(result)
    return baseline


def _require_speculation(host: str, address: tuple[str, int], cells: list[BenchCell]) -> None:
    """Refuse, in one line, a sweep whose answers carry no speculative fields: SGLang sets
    `spec_verify_ct` in `meta_info` only when a request was verified by a drafter
    (managers/tokenizer_manager.py 0.5.23:3149-3172), so a server started without
    `--speculative-algorithm` answers every request without it. Nothing to measure."""
    answered = [r for c in cells for r in c.ok]
    if answered and not any(r.spec_verify_ct for r in answered):
        raise UsageError(
            f"{host}: the server on port {address[1]} answered {len(answered)} requests without "
            "speculative fields (no spec_verify_ct in meta_info): it runs without "
            "--speculative-algorithm, so there is no acceptance to bench (a plain server is "
            "--baseline-port's)"
        )


def run_matrix(
    transport: Transport,
    facts: HostFacts,
    matrix: Matrix,
    options: BenchOptions,
    pid: int | None,
    progress: Progress | None = None,
) -> BenchResult:
    """Run every cell of the matrix, each `repeats` times, on the host (flushing the prefix
    cache before each), refusing a server under traffic unless --yes; then, with a baseline
    port, the same cells on the server without speculation. A vLLM host is benched through
    its OpenAI API (bench/vllm_run.py)."""
    if facts.engine.value == "vllm":
        from dflash_doctor.bench.vllm_run import run_vllm_matrix  # only vLLM hosts pay for it

        return run_vllm_matrix(transport, facts, matrix, options, progress)
    address = server_address(facts.launch.value)
    if facts.runtime.value is None:
        raise FactError(f"cannot bench: {facts.runtime.error or 'no running server found'}")
    _refuse_traffic(transport, facts, address, pid, options.yes)
    result = _result(facts, matrix, options)
    result.cells = _measure(transport, address, pid, matrix, options, result.notes, progress)
    _require_speculation(facts.host, address, result.cells)
    result.prefix_probe = prefix_probe(transport, address, pid, options)
    verdict = collapsed(result)
    if verdict is not None:
        result.collapse = [verdict, *likely_causes(facts)]
    if options.baseline_port is not None:
        _baseline(transport, facts, matrix, options, result, progress)
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
    runs = 2 if options.baseline_port is not None else 1
    with progress(len(matrix.cells()) * matrix.repeats * runs) as step:
        return run_matrix(transport, facts, matrix, options, pid, step)
