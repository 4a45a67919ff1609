"""The probe report: per context, each scenario against trained, and draft attention reads."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from dflash_doctor.facts.probe_result import HostProbe, ProbeResult

MIB = 1024 * 1024
BAR = 30
# Each compared scenario's bars get their own glyph, so they differ without colour too.
GLYPHS = ("█", "▒", "░", "▓")


def _bar(value: float, top: float, glyph: str, style: str) -> Text:
    """A bar of `value` against `top`, in a glyph that tells its scenario apart."""
    n = 0 if top <= 0 else round(BAR * value / top)
    return Text(glyph * n + " " * (BAR - n), style=style)


def render_probe(probe: HostProbe, console: Console) -> None:
    """The probe report: shape, per-context table, divergence bars, self-check."""
    result = probe.result
    console.rule(
        Text(f"{probe.host}  attention probe on {result.device} ({result.weights} weights)")
    )
    if result.refused:
        console.print(Text(f"refused: {result.refused}", style="yellow"))
        return
    if result.shape is not None:
        console.print(_shape_line(result))
    for sc in result.scenarios:
        console.print(Text(f"  {sc.name}: {sc.label}", style="dim"))
    compared = [s.name for s in result.scenarios if s.name != result.reference]
    console.print(_table(result, compared))
    console.print(
        Text(
            "reads/step: K/V bytes one draft step reads per request per GPU; draft KV: what "
            "one request holds per GPU, one draft slot per target token in every SGLang "
            "release (the draft window does not shrink it)",
            style="dim",
        )
    )
    _divergence_bars(result, compared, console)
    for skipped in result.skipped_contexts:
        console.print(Text(f"skipped context {skipped.context}: {skipped.reason}", style="dim"))
    if result.self_check is not None:
        console.print(_self_check_line(result))


def _shape_line(result: ProbeResult) -> Text:
    """The drafter shard the probe measured."""
    s = result.shape
    assert s is not None
    window = f", trained window {s.window}" if s.window else ""
    return Text(
        f"{s.layers} layers ({len(result.sliding_layers)} sliding{window}); one GPU's "
        f"shard under TP {result.tp_size}: {s.heads} of {s.heads_total} heads, "
        f"{s.kv_heads} of {s.kv_heads_total} KV heads x {s.head_dim}; block "
        f"{result.block_size}, {result.dtype}; top-1 over {result.agreement_tokens} "
        "draft tokens"
    )


def _table(result: ProbeResult, compared: list[str]) -> Table:
    """Per context: each compared scenario against the reference, reads per step, draft KV."""
    table = Table("context", box=None)
    for name in compared:
        table.add_column(f"{name}: rel L2")
        table.add_column(f"{name}: top-1 (95% CI)")
    for sc in result.scenarios:
        table.add_column(f"{sc.name}: reads/step")
    table.add_column("draft KV")
    for c in result.contexts:
        row = [str(c.context)]
        for name in compared:
            cmp = c.comparison(name)
            if cmp is None:
                row += ["-", "-"]
                continue
            same = " (same spans)" if cmp.same_spans else ""
            lo, hi = cmp.top1_ci95
            row += [
                f"{cmp.output.rel_l2:.3g}{same}",
                f"{cmp.top1_agreement:.2f} ({lo:.2f}-{hi:.2f})",
            ]
        for sc in result.scenarios:
            run = c.run_of(sc.name)
            row.append(f"{run.read_bytes / MIB:.2f} MiB" if run else "-")
        row.append(f"{c.draft_kv_bytes / MIB:.1f} MiB")
        table.add_row(*row)
    return table


def _divergence_bars(result: ProbeResult, compared: list[str], console: Console) -> None:
    """Bars of each scenario's output divergence per context."""
    top_div = max((cmp.output.rel_l2 for c in result.contexts for cmp in c.compared), default=0.0)
    if top_div <= 0:
        return
    console.print(Text("divergence from trained (rel L2 of the output)", style="bold"))
    for c in result.contexts:
        for k, name in enumerate(compared):
            cmp = c.comparison(name)
            if cmp is None:
                continue
            glyph = GLYPHS[k % len(GLYPHS)]
            label = f"{c.context:>8} {name:<9} " if k == 0 else f"{'':>8} {name:<9} "
            console.print(
                Text(label)
                .append(_bar(cmp.output.rel_l2, top_div, glyph, "red" if k == 0 else "blue"))
                .append(f" {cmp.output.rel_l2:.3g}")
            )


def _self_check_line(result: ProbeResult) -> Text:
    """Whether scenarios with the trained spans agree with the reference."""
    sc_ = result.self_check
    assert sc_ is not None
    if sc_.passed is None:
        return Text("self-check: no scenario had the trained spans", style="dim")
    return Text(
        f"self-check: {sc_.same_span_comparisons} comparison(s) with the trained "
        f"spans agree to {sc_.max_diff_same_spans} (tolerance {sc_.tolerance}): "
        + ("passed" if sc_.passed else "FAILED"),
        style="green" if sc_.passed else "bold red",
    )
