"""`probe --plot FILE.png`: divergence and draft KV against context length (matplotlib)."""

from __future__ import annotations

from dflash_doctor.errors import UsageError
from dflash_doctor.probes.models import ProbeResult

MIB = 1024 * 1024


def write_plot(result: ProbeResult, path: str, title: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError("--plot needs matplotlib: pip install 'dflash-doctor[plot]'") from None
    xs = [c.context for c in result.contexts]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    ax1.plot(
        xs,
        [c.output.rel_l2 for c in result.contexts],
        "o-",
        color="tab:red",
        label="rel L2, output",
    )
    ax1.plot(
        xs,
        [1 - c.top1_agreement for c in result.contexts],
        "s--",
        color="tab:purple",
        label="1 - top-1 agreement",
    )
    window = result.shape.window if result.shape else None
    for ax in (ax1, ax2):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("context length (tokens)")
        if window:
            ax.axvline(window, color="gray", linestyle=":", label=f"window {window}")
    ax1.set_title("full context vs trained window")
    ax1.legend()
    kv = [c for c in result.contexts if c.kv is not None]
    ax2.plot(
        [c.context for c in kv],
        [c.kv.full_bytes_measured / MIB for c in kv if c.kv],
        "o-",
        color="tab:red",
        label="full history",
    )
    ax2.plot(
        [c.context for c in kv],
        [c.kv.windowed_bytes_measured / MIB for c in kv if c.kv],
        "o-",
        color="tab:green",
        label="windowed",
    )
    ax2.set_ylabel("draft KV per request per GPU (MiB)")
    ax2.set_title("draft KV cache")
    ax2.legend()
    fig.suptitle(f"{title} ({result.device}, {result.weights} weights)")
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110)
    except OSError as e:
        raise UsageError(f"{path}: cannot write plot: {e.strerror or e}") from None
    finally:
        plt.close(fig)
