"""The probe report: a table per context length and bars of divergence and memory."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from dflash_doctor.probes.models import ProbeResult

MIB = 1024 * 1024
BAR = 30


def _bar(value: float, top: float, style: str) -> Text:
    n = 0 if top <= 0 else round(BAR * value / top)
    return Text("█" * n + " " * (BAR - n), style=style)


def render_probe(host: str, result: ProbeResult, console: Console) -> None:
    console.rule(Text(f"{host}  attention probe on {result.device} ({result.weights} weights)"))
    if result.refused:
        console.print(Text(f"refused: {result.refused}", style="yellow"))
        return
    if result.shape is not None:
        s = result.shape
        console.print(
            f"{s.layers} layers ({len(result.sliding_layers)} sliding, window {s.window}), "
            f"{s.heads} heads / {s.kv_heads} kv heads per GPU x {s.head_dim}, "
            f"block {result.block_size}, {result.dtype}"
        )
    table = Table(
        "context",
        "in window",
        "rel L2",
        "cosine",
        "top-1 agree",
        "draft KV full",
        "draft KV windowed",
        "time full / windowed",
        box=None,
    )
    for c in result.contexts:
        kv_full = f"{c.kv.full_bytes_measured / MIB:.1f} MiB" if c.kv else "-"
        kv_win = f"{c.kv.windowed_bytes_measured / MIB:.1f} MiB" if c.kv else "-"
        table.add_row(
            str(c.context),
            "yes" if c.window_covers_context else "no",
            f"{c.output.rel_l2:.3g}",
            f"{c.output.cosine:.6f}",
            f"{c.top1_agreement:.2f}",
            kv_full,
            kv_win,
            f"{c.time_full_s:.3f} / {c.time_windowed_s:.3f} s",
        )
    console.print(table)
    top_div = max((c.output.rel_l2 for c in result.contexts), default=0.0)
    top_kv = max((c.kv.full_bytes_measured for c in result.contexts if c.kv), default=0)
    console.print(Text("divergence (rel L2 of the output, full vs windowed)", style="bold"))
    for c in result.contexts:
        console.print(Text(f"{c.context:>8} ").append(_bar(c.output.rel_l2, top_div, "red")))
    if top_kv:
        console.print(
            Text("draft KV per request per GPU: full (red) vs windowed (green)", style="bold")
        )
        for c in result.contexts:
            if c.kv:
                console.print(
                    Text(f"{c.context:>8} ").append(_bar(c.kv.full_bytes_measured, top_kv, "red"))
                )
                console.print(
                    Text(" " * 9).append(_bar(c.kv.windowed_bytes_measured, top_kv, "green"))
                )
    for skipped in result.skipped_contexts:
        console.print(Text(f"skipped context {skipped.context}: {skipped.reason}", style="dim"))
    if result.self_check is not None:
        sc = result.self_check
        style = "green" if sc.passed else "bold red"
        console.print(
            Text(
                f"self-check: {sc.contexts_below_window} context(s) inside the window agree to "
                f"{sc.max_diff_below_window} (tolerance {sc.tolerance}): "
                + ("passed" if sc.passed else "FAILED"),
                style=style,
            )
        )
