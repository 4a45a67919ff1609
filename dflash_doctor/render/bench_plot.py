"""`bench --plot FILE.png`: accept length against context, one line per concurrency."""

from __future__ import annotations

from typing import Any

from dflash_doctor.errors import UsageError
from dflash_doctor.facts.models import BenchResult


def require_matplotlib() -> None:
    """Fail before a sweep, not after it, when the plot cannot be drawn."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UsageError("--plot needs matplotlib: pip install 'dflash-doctor[plot]'") from None


def write_bench_plot(
    result: BenchResult, path: str, title: str, before: BenchResult | None = None
) -> None:
    require_matplotlib()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    temps = result.temperatures
    fig, axes = plt.subplots(1, len(temps), figsize=(5.2 * len(temps), 4), squeeze=False)
    for ax, temp in zip(axes[0], temps, strict=True):
        for run, style, label in ((before, "--", "before, "), (result, "-", "")):
            if run is None:
                continue
            for conc in run.concurrency:
                cells = [
                    c
                    for c in run.cells
                    if c.concurrency == conc and c.temperature == temp and c.accept_length
                ]
                kw: dict[str, Any] = {"marker": "o", "linestyle": style}
                ax.plot(
                    [c.context for c in cells],
                    [c.accept_length for c in cells],
                    label=f"{label}concurrency {conc}",
                    **kw,
                )
        if result.window:
            ax.axvline(result.window, color="gray", linestyle=":", label=f"window {result.window}")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("context length (tokens)")
        ax.set_ylabel("accept length (tokens per verify step)")
        ax.set_title("greedy" if temp == 0 else f"temperature {temp:g}")
        ax.legend(fontsize=8)
    fig.suptitle(f"{title} (SGLang {result.sglang_version})")
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=90)
    except OSError as e:
        raise UsageError(f"{path}: cannot write plot: {e.strerror or e}") from None
    finally:
        plt.close(fig)
