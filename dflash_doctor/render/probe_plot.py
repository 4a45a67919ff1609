"""`probe --plot FILE.png`: divergence, top-1 agreement and draft reads against context."""

from __future__ import annotations

import os
from typing import Any

from dflash_doctor.errors import UsageError
from dflash_doctor.facts.probe_result import ProbeResult

MIB = 1024 * 1024
# Series differ by line style and marker as well as colour (Okabe-Ito, colour-blind safe),
# so they read the same in greyscale and to a red-green colour-blind reader.
STYLES = (
    {"color": "#D55E00", "linestyle": "-", "marker": "o"},
    {"color": "#0072B2", "linestyle": "--", "marker": "s"},
    {"color": "#009E73", "linestyle": ":", "marker": "^"},
    {"color": "#CC79A7", "linestyle": "-.", "marker": "D"},
)
REFERENCE_STYLE = {"color": "black", "linestyle": "-.", "marker": "x"}


def require_plot(path: str) -> None:
    """Fail before the probe runs when the plot could not be drawn or written."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UsageError("--plot needs matplotlib: pip install 'dflash-doctor[plot]'") from None
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UsageError(f"{path}: cannot write plot: no such directory {folder}")


def write_plot(result: ProbeResult, path: str, title: str) -> None:
    require_plot(path)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    compared = [s.name for s in result.scenarios if s.name != result.reference]
    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(15, 4.4))
    _plot_comparisons(result, compared, ax1, ax2)
    _plot_reads(result, compared, ax3)
    window = result.shape.window if result.shape else None
    for ax in (ax1, ax2, ax3):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("context length (tokens)")
        if window:
            ax.axvline(
                window, color="gray", linestyle=(0, (1, 3)), label=f"trained window {window}"
            )
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    ax1.set_title("output divergence from trained (rel L2)")
    ax2.set_title(f"top-1 agreement with trained ({result.agreement_tokens} tokens, 95% CI)")
    ax2.set_ylim(-0.02, 1.02)
    ax3.set_title("draft attention reads per step")
    ax3.set_ylabel("MiB per request per GPU")
    fig.suptitle(f"{title} ({result.device}, {result.weights} weights)")
    labels = "; ".join(f"{s.name}: {s.label}" for s in result.scenarios)
    fig.text(0.01, 0.01, labels, fontsize=7, wrap=True)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    try:
        fig.savefig(path, dpi=110)
    except OSError as e:
        raise UsageError(f"{path}: cannot write plot: {e.strerror or e}") from None
    finally:
        plt.close(fig)


def _plot_comparisons(result: ProbeResult, compared: list[str], ax1: Any, ax2: Any) -> None:
    """Divergence (ax1) and top-1 agreement with its 95% interval (ax2) per scenario."""
    for k, name in enumerate(compared):
        style: dict[str, Any] = STYLES[k % len(STYLES)]
        points = [(c.context, c.comparison(name)) for c in result.contexts]
        rows = [(x, cmp) for x, cmp in points if cmp is not None]
        xs = [x for x, _ in rows]
        ax1.plot(xs, [cmp.output.rel_l2 for _, cmp in rows], label=name, **style)
        ax2.errorbar(
            xs,
            [cmp.top1_agreement for _, cmp in rows],
            yerr=[
                [cmp.top1_agreement - cmp.top1_ci95[0] for _, cmp in rows],
                [cmp.top1_ci95[1] - cmp.top1_agreement for _, cmp in rows],
            ],
            capsize=3,
            label=name,
            **style,
        )


def _plot_reads(result: ProbeResult, compared: list[str], ax3: Any) -> None:
    """Draft attention reads per step, the reference scenario included."""
    for sc in result.scenarios:
        style = (
            REFERENCE_STYLE
            if sc.name == result.reference
            else STYLES[compared.index(sc.name) % len(STYLES)]
        )
        runs = [(c.context, c.run_of(sc.name)) for c in result.contexts]
        ax3.plot(
            [x for x, r in runs if r],
            [r.read_bytes / MIB for _, r in runs if r],
            label=sc.name,
            **style,
        )
