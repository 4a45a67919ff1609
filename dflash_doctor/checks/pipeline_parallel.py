"""DFD124: pipeline parallelism with DFLASH, which no release supports."""

from __future__ import annotations

from dflash_doctor.checks.base import Evidence, Finding, Fix, Severity, Skip, check
from dflash_doctor.checks.views import flag_evidence, log_evidence, require_dflash
from dflash_doctor.facts.models import HostFacts

# "Currently DFLASH speculative decoding only supports pp_size == 1." in every release:
# 0.5.11 server_args.py:3327, 0.5.13 arg_groups/speculative_hook.py:141, 0.5.23 :321.
PP_REFUSAL = "Currently DFLASH speculative decoding only supports pp_size == 1."


@check("DFD124", "dflash-pipeline-parallel", Severity.ERROR, needs_any=("launch", "log"))
def pipeline_parallel(facts: HostFacts) -> list[Finding]:
    """Pipeline parallelism (`--pp-size` above 1) with DFLASH, which no release supports.

    **What it finds.** `--pp-size` (`--pipeline-parallel-size`) above 1 in the launch, or
    `pp_size` above 1 in the logged server args.

    **Why it hurts.** SGLang stops at startup with `Currently DFLASH speculative decoding
    only supports pp_size == 1.`: a relaunch leaves the host without a server.

    **Example.** `--tp-size 4 --pp-size 2` on 8 GPUs.

    **How to fix.** Remove `--pp-size`; spread the model with `--tp-size` instead.

    **Fix safety.** Removing PP needs the model to fit in the TP group's memory; raise
    `--tp-size` to the GPUs PP used.

    **Versions.** Every release 0.5.11-0.5.23 refuses it: `srt/server_args.py` 0.5.11:3327,
    then `arg_groups/speculative_hook.py` 0.5.13:141, 0.5.23:321.
    """
    require_dflash(facts)
    launch = facts.launch.value
    evidence: list[Evidence] = []
    pp = 1
    pp_flag = "--pp-size"
    if launch is not None:
        pp = launch.pp_size
        pp_flag = next(
            (f for f in ("--pp-size", "--pipeline-parallel-size") if f in launch.flags_present),
            "--pp-size",
        )
        evidence.append(flag_evidence(launch, pp_flag, f"{pp_flag} {pp}"))
    else:
        log = facts.log.value
        assert log is not None
        raw = log.server_args_fields.get("pp_size")
        if raw is None or not raw.isdigit() or log.server_args is None:
            raise Skip("the log's server args do not show pp_size")
        pp = int(raw)
        evidence.append(log_evidence(log, log.server_args.line, f"server_args pp_size={pp}"))
    if pp <= 1:
        return []
    return [
        pipeline_parallel.finding(
            title=f"DFLASH with pipeline parallelism (pp_size={pp})",
            message=f"SGLang refuses to start: `{PP_REFUSAL}`",
            evidence=evidence,
            fixes=[
                Fix(action="remove_flag", flag=pp_flag),
                Fix(action="manual", note=f"raise --tp-size to cover the {pp}x GPUs PP used"),
            ],
        )
    ]
