"""DFD168: a DFlash-family server (DSPARK, DFlash 2 drafters, the draft sink flag) described."""

from __future__ import annotations

from dataclasses import dataclass, field

from dflash_doctor.checks.base import Evidence, Finding, Fix, Severity, Unjudged, check
from dflash_doctor.checks.views import config_evidence, flag_evidence, startup_release
from dflash_doctor.facts.dflash_family import answer, family_drafter, is_family_algorithm
from dflash_doctor.facts.models import HostFacts, LaunchArgs

WINDOW_FLAG = "--speculative-draft-window-size"
SINK_FLAG = "--speculative-draft-sink-size"
BLOCK_ALIAS = "--speculative-dflash-block-size"
PLAIN_DRAFTER = "DFlashDraftModel"
# What each family member reads, in words; which flags have no effect is decided from the
# release's data (data/dflash_family.json) where the wheels say so.
DSPARK_READS = (
    "DSPARK drafts gamma tokens a step: --speculative-dspark-block-size (else the drafter's "
    "gamma), and --speculative-num-draft-tokens must equal gamma + 1; "
    f"{BLOCK_ALIAS} is DFLASH's alias and does not apply"
)
DFLASH2_READS = (
    "a DFlash 2 drafter runs on the DFLASH worker: the block is dflash_config.block_size "
    "(--speculative-num-draft-tokens must equal it; DFlash 2 drafters are trained at 8, "
    "SGLang's default without one is 16), its candidate selector needs "
    "dflash_config.selector_rank with selector_top_k and takes the top-k through flashinfer "
    "(torch.topk without it, DFD151), and conv_kernel_size goes with conv_group_size"
)


@dataclass
class Served:
    """What the launch serves of the family, and what the finding says about it."""

    algorithm: str
    member: str | None = None  # the family member beyond DFLASH + DFlashDraftModel
    notes: list[str] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)  # flags set that have no effect


def _flag_notes(served: Served, launch: LaunchArgs, version: str | None) -> None:
    """The window and sink flags, judged by the release's own tests of them."""
    window = answer("window", version)
    honoured = window.value["algorithms"] if window is not None else [served.algorithm]
    if launch.draft_window_flag and window is not None and served.algorithm not in honoured:
        served.ignored.append(launch.draft_window_flag)
        served.notes.append(
            f"{launch.draft_window_flag} has no effect with {served.algorithm} "
            f"(SGLang {window.release} honours it for {', '.join(honoured)} only, "
            f"{window.value['site']})"
        )
    sink = answer("sink", version)
    if launch.draft_sink_size is not None and sink is not None and not sink.value["dflash_reads"]:
        served.ignored.append(SINK_FLAG)
        served.notes.append(
            f"{SINK_FLAG} is validated (it needs a window) but no DFlash-family code reads "
            f"it: in SGLang {sink.release} only {', '.join(sink.value['readers'])} do, the "
            "EAGLE/MTP multi-step draft-decode path"
        )
    if served.algorithm != "DFLASH" and launch.dflash_block_size is not None:
        served.ignored.append(BLOCK_ALIAS)  # read in _handle_dflash only
    for flag in served.ignored:
        served.evidence.append(flag_evidence(launch, flag, f"{flag} is set"))


def _served(facts: HostFacts) -> Served | None:
    launch = facts.launch.value
    if launch is None:
        raise Unjudged("needs the launch command")
    version = startup_release(facts)
    algo = (launch.speculative_algorithm or "").upper()
    if not is_family_algorithm(algo, version):
        return None
    served = Served(algorithm=algo)
    if algo != "DFLASH":
        served.member = algo
        served.notes.append(DSPARK_READS)
        served.evidence.append(
            flag_evidence(launch, "--speculative-algorithm", f"--speculative-algorithm {algo}")
        )
    drafter = facts.drafter.value
    found = family_drafter(version, drafter.architectures) if drafter is not None else None
    if drafter is not None and found is not None and found[0] != PLAIN_DRAFTER:
        served.member = f"{found[0]} on {algo}"
        if "DFlash2" in found[0]:
            served.notes.append(DFLASH2_READS)
        else:
            served.notes.append(f"{found[0]} is a DFlash-family drafter ({found[1]}.py)")
        served.evidence.append(
            config_evidence(drafter, "architectures", f"drafter architectures={[found[0]]}")
        )
    _flag_notes(served, launch, version)
    return served if served.notes else None


@check("DFD168", "dflash-family", Severity.INFO)
def dflash_family(facts: HostFacts) -> list[Finding]:
    """The server runs a DFlash-family member other than DFLASH with a DFlash drafter.

    **What it finds.** SGLang's DFlash family (`SpeculativeAlgorithm.is_dflash_family`) is
    DFLASH and, from 0.5.16, DSPARK; its drafters are the classes `models/dflash.py` and
    the `models/*dspark*.py` modules register: DFlash 2 drafters (`DFlash2DraftModel` from
    0.5.19, `DFlash2BeamDraftModel` and `MiniMaxDFlash2DraftModel` in 0.5.23) beside
    `DFlashDraftModel`. Both lists are read from each release's wheel
    (`data/dflash_family.json`, `scripts/gen_dflash_family.py`). The finding says which
    member the launch serves, which flags it reads and which it ignores: the draft window
    flag for algorithms the release's own warning excludes, and
    `--speculative-draft-sink-size` (0.5.21+), which no DFlash-family code reads.
    Other DFLASH checks skip a DSPARK server by name instead of calling it a server that
    "does not use DFLASH".

    **Why it hurts.** A flag the member ignores is a setting the operator believes in:
    a sink or window that shapes nothing, a DFLASH block alias on a DSPARK server.

    **Example.** `--speculative-algorithm DSPARK --speculative-draft-window-size 2048` on
    0.5.23: SGLang logs that the window has no effect, and the drafter attends to the
    whole context.

    **How to fix.** Remove the flags the finding names; size DSPARK with
    `--speculative-dspark-block-size` and a DFlash 2 drafter with
    `--speculative-num-draft-tokens` equal to its `block_size`.

    **Fix safety.** Removing a flag SGLang ignores changes nothing the server does.

    **Versions.** The family: `speculative/spec_info.py` 0.5.16:118-119, 0.5.23:126-127;
    DFlash 2 registered: `models/dflash.py` 0.5.19:1146-1151, 0.5.23:1317-1324; the class
    `models/dflash.py` 0.5.23:1264-1278; the selector's top-k
    `models/dflash.py` 0.5.23:1158-1163, its fields `speculative/dflash_utils.py`
    0.5.23:619-649. DSPARK's sizes: `arg_groups/speculative_hook.py` 0.5.23:806-840. The
    block alias, read by DFLASH's hook only: `arg_groups/speculative_hook.py` 0.5.23:368-387. The
    window warning: `arg_groups/speculative_hook.py` 0.5.16:114-119, 0.5.23:213-219. The
    sink: `arg_groups/speculative_hook.py` 0.5.23:221-235, read only by
    `speculative/spec_utils.py` 0.5.23:323-355.
    """
    served = _served(facts)
    if served is None:
        return []
    fixes = [Fix(action="remove_flag", flag=f) for f in served.ignored]
    parts = [f"{served.member} is a DFlash-family member"] if served.member else []
    if served.ignored:
        parts.append(f"{', '.join(served.ignored)} has no effect with {served.algorithm}")
    return [
        dflash_family.finding(
            title="; ".join(parts),
            message="; ".join(served.notes) + ".",
            severity=Severity.WARNING if served.ignored else None,
            evidence=served.evidence,
            fixes=fixes,
        )
    ]
