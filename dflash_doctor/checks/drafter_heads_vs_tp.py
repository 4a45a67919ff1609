"""DFD126: the drafter's attention heads cannot be split over the server's TP size."""

from __future__ import annotations

from dflash_doctor.checks.base import Evidence, Finding, Fix, Severity, Unjudged, check
from dflash_doctor.checks.views import (
    config_evidence,
    drafter,
    flag_evidence,
    log_evidence,
    require_dflash,
)
from dflash_doctor.facts.models import HostFacts


def _tp_size(facts: HostFacts) -> tuple[int, Evidence]:
    """The TP size the drafter is split over: the launch's, else the logged server args'."""
    launch = facts.launch.value
    if launch is not None:
        flag = next(
            (
                f
                for f in ("--tp-size", "--tensor-parallel-size", "--tp")
                if f in launch.flags_present
            ),
            "--tp-size",
        )
        return launch.tp_size, flag_evidence(launch, flag, f"tp_size={launch.tp_size}")
    log = facts.log.value
    if log is not None and log.server_args is not None:
        raw = log.server_args_fields.get("tp_size")
        if raw is not None and raw.isdigit():
            return int(raw), log_evidence(log, log.server_args.line, f"server_args tp_size={raw}")
    raise Unjudged("the TP size is unknown (no launch command, no logged server args)")


@check(
    "DFD126",
    "drafter-heads-vs-tp",
    Severity.ERROR,
    needs=("drafter",),
    needs_any=("launch", "log"),
)
def drafter_heads_vs_tp(facts: HostFacts) -> list[Finding]:
    """The drafter's attention heads cannot be split over the server's TP size.

    **What it finds.** The draft model runs with the target's TP size, and
    `DFlashAttention` shards its heads over it: `num_attention_heads` must be divisible by
    the TP size, and `num_key_value_heads` divisible by it (or, when smaller, divide it).

    **Why it hurts.** Loading the drafter fails with an assertion (`DFlashAttention
    requires total_num_heads divisible by tp_size. ...`): the server never comes up.

    **Example.** A drafter with 20 heads and 4 KV heads served at `--tp-size 8`.

    **How to fix.** Serve at a TP size that divides the drafter's head counts, or use a
    drafter built for this TP size.

    **Fix safety.** A different TP size changes memory per GPU and throughput; it is a
    manual change.

    **Versions.** Every release 0.5.11-0.5.23 asserts it (`srt/models/dflash.py`
    0.5.11:51-65, 0.5.23:215-228).
    """
    require_dflash(facts)
    cfg = drafter(facts)
    tp, tp_ev = _tp_size(facts)
    problems: list[tuple[str, str]] = []
    # srt/models/dflash.py 0.5.11:51-54 (0.5.23:215-218)
    if cfg.num_attention_heads % tp:
        problems.append(
            (
                "num_attention_heads",
                f"DFlashAttention requires total_num_heads divisible by tp_size. "
                f"total_num_heads={cfg.num_attention_heads}, tp_size={tp}.",
            )
        )
    kv = cfg.num_key_value_heads
    # srt/models/dflash.py 0.5.11:56-65 (0.5.23:220-228)
    if kv >= tp and kv % tp:
        problems.append(
            (
                "num_key_value_heads",
                "DFlashAttention requires total_num_kv_heads divisible by tp_size when >= "
                f"tp_size. total_num_kv_heads={kv}, tp_size={tp}.",
            )
        )
    elif kv < tp and tp % kv:
        problems.append(
            (
                "num_key_value_heads",
                "DFlashAttention requires tp_size divisible by total_num_kv_heads when "
                f"total_num_kv_heads < tp_size. total_num_kv_heads={kv}, tp_size={tp}.",
            )
        )
    return [
        drafter_heads_vs_tp.finding(
            title=f"Drafter {key} cannot be split over tp_size={tp}",
            message=f"Loading the drafter fails: `{text}`",
            evidence=[
                config_evidence(
                    cfg,
                    key,
                    f"{key}={cfg.num_attention_heads if key == 'num_attention_heads' else kv}",
                ),
                tp_ev,
            ],
            fixes=[
                Fix(action="manual", note="serve at a TP size that divides the drafter's heads")
            ],
        )
        for key, text in problems
    ]
