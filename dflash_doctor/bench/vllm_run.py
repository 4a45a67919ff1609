"""The bench against a vLLM server, through its OpenAI API (`/v1/completions`).

The same matrix, prompts, repeats and statistics as SGLang's (bench/run.py); what differs
is where acceptance comes from. SGLang answers each request with its own verify count
(`meta_info.spec_verify_ct`); vLLM's CompletionResponse carries none unless the server was
started with `--per-request-spec-decode-metrics` (0.29.0 on, default `none`:
vllm/config/observability.py 0.34.0:52; the response's `metrics`,
vllm/entrypoints/openai/completion/protocol.py 0.34.0:722). So each repeat of a cell is
bracketed on the host by two scrapes of `/metrics` in the same client run, and its
acceptance is the counters' increase, `1 + accepted / drafts`, as vLLM's own
`vllm bench serve` takes it (vllm/benchmarks/serve.py 0.34.0:210-271, 996, 1131-1171;
the formula vllm/v1/spec_decode/metrics.py 0.34.0:113-114).

The counters are the server's: a delta covers every request it served in that window, the
bench's and anyone else's. The bench refuses a server whose `vllm:num_requests_running` /
`_waiting` gauges show traffic (unless --yes), and notes a repeat where the counters grew
by more drafts than the bench's own tokens can account for (each draft step yields at
least one token, and the first comes from the prefill), or where requests still ran after
it.
"""

from __future__ import annotations

from collections.abc import Callable

from dflash_doctor.bench.baseline import verdict_lines
from dflash_doctor.bench.cell_ops import add_repeat, measure_cells, sweep_result
from dflash_doctor.bench.matrix import BenchOptions, Matrix
from dflash_doctor.checks.silent_collapse import collapsed
from dflash_doctor.checks.vllm_acceptance import collapse_causes
from dflash_doctor.errors import FactError, UsageError
from dflash_doctor.facts.models import BenchBaseline, BenchCell, BenchResult, HostFacts
from dflash_doctor.facts.vllm_launch import unix_socket_line
from dflash_doctor.facts.vllm_launch import vllm_address as launch_address
from dflash_doctor.facts.vllm_metrics import delta, requests_now, spec_decode
from dflash_doctor.facts.vllm_models import VllmSpecDecode
from dflash_doctor.finders.server_api import ask_server
from dflash_doctor.transport.base import Transport

Progress = Callable[[str], None]
Address = tuple[str, int]

WINDOW_NOTE = (
    "acceptance from vLLM's /metrics counters (vllm:spec_decode_*), scraped on the host "
    "before and after each repeat of each cell, one cell after another: a delta counts "
    "every request the server served in that window, not only the bench's"
)
# POST /reset_prefix_cache (vllm/entrypoints/serve/dev/cache/api_router.py 0.34.0:20) is
# registered only in dev mode (vllm/entrypoints/launchers/api_server/routers.py 0.34.0:46-49).
CACHE_NOTE = (
    "vLLM's prefix cache is not flushed between repeats (POST /reset_prefix_cache is "
    "served only with VLLM_SERVER_DEV_MODE=1); a cell at T>0 reuses the greedy cell's "
    "prefill, which changes its latency, not its acceptance"
)


def vllm_address(facts: HostFacts) -> Address:
    """Where the vLLM server is reached on the host (facts/vllm_launch.py vllm_address:
    its `--host` and `--port`); a server on a Unix socket is refused in one line."""
    launch = facts.vllm_launch.value
    address = launch_address(launch)
    if address is None:
        assert launch is not None
        raise UsageError(unix_socket_line(facts.host, launch) + ": nothing to bench through")
    return address


def scrape(
    transport: Transport, address: Address, pid: int | None
) -> tuple[VllmSpecDecode | None, int | None, str | None]:
    """(spec-decode counters, running plus waiting requests, the error) from /metrics."""
    (metrics,) = ask_server(transport, address, pid, [{"op": "vllm_metrics"}])
    try:
        return spec_decode(metrics), requests_now(metrics), None
    except FactError as e:
        return None, None, str(e)


def refuse_busy(host: str, busy: int | None, why: str | None, yes: bool) -> None:
    """Refuse a server under traffic, or one that cannot say, unless told `yes`."""
    if yes:
        return
    if busy is None:
        raise UsageError(
            f"{host}: cannot tell whether the vLLM server serves traffic "
            f"({why or 'no vllm:num_requests_running on /metrics'}): add --yes to bench it anyway"
        )
    if busy > 0:
        raise UsageError(
            f"{host}: the vLLM server is serving traffic ({busy} running or waiting "
            "requests): add --yes to load it anyway (its counters would count them too)"
        )


def _repeat_counters(
    cell: BenchCell, before: dict[str, object], after: dict[str, object], repeat: int
) -> str | None:
    """Append the repeat's counter delta to the cell; a note where it is not the bench's
    alone (or cannot be read)."""
    try:
        old, new = spec_decode(before), spec_decode(after)
        if old is None or new is None:
            raise FactError("/metrics: no spec-decode counters")
        counted = delta(old, new)
    except FactError as e:
        cell.repeat_counters.append(None)
        return f"cell {cell.context}x{cell.concurrency} repeat {repeat + 1}: {e}"
    cell.repeat_counters.append(counted)
    ours = [r for r in cell.ok if r.repeat == repeat]
    # Each draft step yields its bonus token; the first token of each answer is the
    # prefill's: more drafts than that is someone else's traffic.
    room = sum(max((r.completion_tokens or 0) - 1, 0) for r in ours)
    still = requests_now(after)
    if counted.drafts > room or (still or 0) > 0:
        return (
            f"cell {cell.context}x{cell.concurrency} repeat {repeat + 1}: other traffic "
            f"in the window ({counted.drafts} drafts for {room} bench tokens after the "
            f"first, {still or 0} requests still running): its acceptance is not the "
            "bench's alone"
        )
    return None


def measure_vllm(
    transport: Transport,
    address: Address,
    pid: int | None,
    matrix: Matrix,
    options: BenchOptions,
    notes: list[str],
    progress: Progress | None = None,
    counters: bool = True,
) -> list[BenchCell]:
    """Every cell of the matrix, each `repeats` times; with `counters` each repeat
    bracketed by two scrapes of /metrics in one run of the client on the host."""
    scrape_op: list[dict[str, object]] = [{"op": "vllm_metrics"}] if counters else []

    def one_repeat(cell: BenchCell, op: dict[str, object], repeat: int) -> None:
        ops = [*scrape_op, {**op, "op": "vllm_cell"}, *scrape_op]
        answers = ask_server(transport, address, pid, ops, timeout=options.request_timeout)
        add_repeat(cell, answers[len(scrape_op)], repeat)
        if counters:
            other = _repeat_counters(cell, answers[0], answers[-1], repeat)
            if other is not None:
                notes.append(other)

    return measure_cells(matrix, options, notes, one_repeat, progress)


def vllm_result(facts: HostFacts, matrix: Matrix, options: BenchOptions) -> BenchResult:
    """The empty result of a sweep on vLLM: its settings and the notes on what it measures."""
    runtime = facts.vllm_runtime.value
    version = (runtime.version if runtime else None) or facts.vllm_version.value
    notes = (WINDOW_NOTE, CACHE_NOTE)
    return sweep_result(facts.host, matrix, options, notes, engine="vllm", vllm_version=version)


def run_vllm_matrix(
    transport: Transport,
    facts: HostFacts,
    matrix: Matrix,
    options: BenchOptions,
    progress: Progress | None = None,
) -> BenchResult:
    """The sweep on a vLLM host: refuse a busy server or one without spec-decode counters,
    then every cell, then the silent-collapse verdict with vLLM's likely causes."""
    launch = facts.vllm_launch.value
    if launch is None or launch.pid is None:
        raise FactError(
            f"cannot bench: {facts.vllm_launch.error or 'no running vLLM server found'}"
        )
    address = vllm_address(facts)
    counters, busy, why = scrape(transport, address, launch.pid)
    refuse_busy(facts.host, busy, why, options.yes)
    if counters is None:
        raise UsageError(
            f"{facts.host}: the vLLM server on port {address[1]} has no vllm:spec_decode_* "
            f"counters on /metrics ({why or 'none served'}): it runs without "
            "--speculative-config, so there is no acceptance to bench"
        )
    result = vllm_result(facts, matrix, options)
    result.cells = measure_vllm(
        transport, address, launch.pid, matrix, options, result.notes, progress
    )
    verdict = collapsed(result)
    if verdict is not None:
        result.collapse = [verdict, *collapse_causes(facts, launch)]
    if options.baseline_port is not None:
        _baseline(transport, facts, matrix, options, result, progress)
    return result


def _plain_server(transport: Transport, host: str, address: Address, yes: bool) -> str:
    """The baseline vLLM server's release, refusing one that speculates (a server without
    a speculative config registers no spec-decode counters: vllm/v1/spec_decode/metrics.py
    0.34.0:211-213), one that does not answer, or one under traffic."""
    version, metrics = ask_server(
        transport, address, None, [{"op": "version"}, {"op": "vllm_metrics"}]
    )
    if not isinstance(version.get("version"), str):
        raise UsageError(
            f"baseline server on port {address[1]}: {version.get('error', 'no answer')}"
        )
    try:
        speculates = spec_decode(metrics) is not None
    except FactError as e:
        raise UsageError(f"baseline server on port {address[1]}: {e}") from None
    if speculates:
        raise UsageError(
            f"baseline server on port {address[1]} serves vllm:spec_decode_* counters: it runs "
            "with --speculative-config; start it without"
        )
    refuse_busy(host, requests_now(metrics), None, yes)
    return str(version["version"])


def _baseline(
    transport: Transport,
    facts: HostFacts,
    matrix: Matrix,
    options: BenchOptions,
    result: BenchResult,
    progress: Progress | None,
) -> None:
    """The same cells on the user's vLLM server without speculation, and where DFlash is
    slower (bench/baseline.py). Its API key is not sent: it is the user's own test server."""
    assert options.baseline_port is not None
    # The user's plain server on the same host address (loopback where the DFlash server
    # listens on a Unix socket).
    address = (
        (launch_address(facts.vllm_launch.value) or ("127.0.0.1", 0))[0],
        options.baseline_port,
    )
    version = _plain_server(transport, facts.host, address, options.yes)
    result.baseline = BenchBaseline(
        source=f"port {address[1]}, vLLM {version}, without --speculative-config",
        cells=measure_vllm(transport, address, None, matrix, options, result.notes, progress,
                           counters=False),
    )  # fmt: skip
    result.baseline.verdict = verdict_lines(result)
