"""DFD166: prefill/decode disaggregation with DFLASH on a release whose decode side crashes."""

from __future__ import annotations

from dflash_doctor.checks.base import Evidence, Finding, Fix, Severity, Unjudged, check
from dflash_doctor.checks.views import (
    crashed_in_latest_start,
    flag_evidence,
    log_evidence,
    require_dflash,
    version_evidence,
)
from dflash_doctor.facts.dflash_family import (
    Answer,
    answer,
    first_release_where,
    is_family_algorithm,
)
from dflash_doctor.facts.models import HostFacts

FLAG = "--disaggregation-mode"
CRASH = "crash_pd_no_draft_input"
RADIX_FLAG = "--disaggregation-decode-enable-radix-cache"
PYTHON_TEXT = "'NoneType' object has no attribute 'prepare_for_decode'"


def _mode(facts: HostFacts) -> tuple[str, Evidence] | None:
    """The disaggregation mode the launch (else the log's dump) sets; None when unset."""
    launch = facts.launch.value
    if launch is not None:
        mode = launch.disaggregation_mode
        if mode and mode != "null":
            return mode, flag_evidence(launch, FLAG, f"{FLAG} {mode}")
        return None
    log = facts.log.value
    if log is not None and log.server_args is not None:
        mode = log.server_args_fields.get("disaggregation_mode")
        if mode and mode not in ("null", "None"):
            text = f"server_args disaggregation_mode={mode}"
            return mode, log_evidence(log, log.server_args.line, text)
    return None


def _algorithm(facts: HostFacts) -> str:
    """The DFlash-family algorithm the server runs (DFLASH or DSPARK); Skip otherwise."""
    launch = facts.launch.value
    log = facts.log.value
    algo = launch.speculative_algorithm if launch is not None else None
    if launch is None and log is not None:
        algo = log.server_args_fields.get("speculative_algorithm")
    if algo is None and launch is None and log is not None and log.dflash_init is not None:
        algo = "DFLASH"
    if algo is None or not is_family_algorithm(algo, facts.sglang_version.value):
        require_dflash(facts)  # names the server as the DFLASH checks do
        raise Unjudged("no speculative algorithm known for this server (no launch, no logged args)")
    return algo.upper()


@check("DFD166", "disaggregation-dflash", Severity.ERROR)
def disaggregation_dflash(facts: HostFacts) -> list[Finding]:
    """Prefill/decode disaggregation with DFLASH on a release whose decode server crashes.

    **What it finds.** The launch sets `--disaggregation-mode prefill` or `decode` with
    `--speculative-algorithm DFLASH` on a release before 0.5.20, or the log holds the
    decode-side crash of those releases. Which releases serve it is read from each
    release's `build_disagg_draft_input` (`data/dflash_family.json`,
    `scripts/gen_dflash_family.py`): the decode server builds a DFLASH draft input for a
    request that arrives from the prefill server only from 0.5.20. The family's other
    member is judged the same way: DSPARK is served from 0.5.17 (0.5.16 crashes alike).
    A decode server launched with `--disaggregation-decode-enable-radix-cache` is refused
    at start-up in every release (`... is incompatible with speculative decoding
    (--speculative-algorithm DFLASH)`; DSPARK is let through from 0.5.21), read from the
    release's own test.

    **Why it hurts.** SGLang accepts the launch (no release refuses the pair at parse
    time) and both servers start; the first request that reaches the decode server kills
    its scheduler. 0.5.11-0.5.13.post1 raise `DFLASH decode requires DFlashDraftInput state
    on the running batch.`; 0.5.14-0.5.19 ask the batch's missing draft input to prepare
    for decode: `'NoneType' object has no attribute 'prepare_for_decode'`
    (sgl-project/sglang#36140), Python's own text, so the log catalog cannot name it.

    **Example.** `--disaggregation-mode decode --speculative-algorithm DFLASH` on 0.5.19:
    the server comes up healthy and dies on the first request handed over by the
    prefill server.

    **How to fix.** Upgrade SGLang to 0.5.20 or newer on both servers, or serve DFLASH
    without disaggregation. On 0.5.23 with Mooncake, keep the prefill and decode TP sizes
    equal when context or TP sharing is on: the transfer refuses a peer otherwise.

    **Fix safety.** An upgrade changes more than this; re-run the whole check after it.
    Dropping disaggregation moves prefill onto the decode servers' GPUs.

    **Versions.** No DFLASH draft input on the decode side: the EAGLE-only branch of
    `disaggregation/decode_schedule_batch_mixin.py` 0.5.11:136, then
    `speculative/spec_info.py` 0.5.13:131-146, 0.5.19:187-207 (EAGLE and DSPARK only).
    The crash: `speculative/dflash_worker.py` 0.5.11:1186-1191, 0.5.13:1173-1178;
    `managers/schedule_batch.py` 0.5.14:2620-2621; `speculative/spec_utils.py`
    0.5.15:680-681, 0.5.19:1052-1053. Served: `speculative/spec_info.py` 0.5.20:214-220,
    0.5.23:222-228; DSPARK `speculative/spec_info.py` 0.5.17:187-194, its crash on 0.5.16
    `speculative/spec_utils.py` 0.5.16:836-837. The radix cache refusal: `srt/server_args.py`
    0.5.11:3751-3756; `arg_groups/pd_disaggregation_hook.py` 0.5.13:41-46, 0.5.21:97-102;
    `arg_groups/speculative_hook.py` 0.5.23:164-173. Mooncake's TP rule:
    `disaggregation/mooncake/conn.py` 0.5.23:948-961.
    """
    algo = _algorithm(facts)
    log = facts.log.value
    crashed = log is not None and crashed_in_latest_start(log, CRASH)
    mode = _mode(facts)
    if mode is None and not crashed:
        if facts.launch.value is None and log is None:
            raise Unjudged("needs the launch command or the server log")
        return []
    found = answer("disaggregation", facts.sglang_version.value)
    if found is None:
        version = facts.sglang_version.value
        raise Unjudged(
            f"no disaggregation data for SGLang {version}" if version else "SGLang version unknown"
        )
    findings = []
    if crashed or algo not in found.value["algorithms"]:
        findings.append(_crash_finding(facts, algo, mode, found))
    radix = _radix_refusal(facts, algo, mode)
    if radix is not None:
        findings.append(radix)
    return findings


def _crash_finding(
    facts: HostFacts, algo: str, mode: tuple[str, Evidence] | None, found: Answer
) -> Finding:
    """The decode server's crash on a release that builds no draft input for `algo`."""
    evidence = [version_evidence(facts)]
    if mode is not None:
        evidence.append(mode[1])
    log = facts.log.value
    if log is not None and crashed_in_latest_start(log, CRASH):
        event = log.crashes[CRASH]
        evidence.append(log_evidence(log, event.last.line, event.last.text))
    crash_text = (
        "DFLASH decode requires DFlashDraftInput state on the running batch."
        if found.value.get("crash") == "sglang"
        else PYTHON_TEXT
    )
    where = found.value.get("crash_site", "the log")
    served_from = first_release_where(
        "disaggregation", lambda entry: algo in entry["algorithms"], found.release
    )
    fixes = [Fix(action="upgrade_sglang", value=served_from)] if served_from else []
    fixes.append(Fix(action="manual", note=f"or serve {algo} without {FLAG}"))
    later = f" SGLang {served_from} and newer serve it." if served_from else ""
    return disaggregation_dflash.finding(
        title=f"SGLang {facts.sglang_version.value} crashes {algo} on the decode server "
        "of a PD split",
        message=(
            f"The decode server of SGLang {found.release} builds no {algo} draft input "
            "for a request handed over by the prefill server, so the first such request "
            f"kills its scheduler (`{crash_text}`, read at {where}).{later}"
        ),
        evidence=evidence,
        fixes=fixes,
    )


def _radix_refusal(
    facts: HostFacts, algo: str, mode: tuple[str, Evidence] | None
) -> Finding | None:
    """A PD decode server's radix cache, which SGLang refuses with `algo` at start-up."""
    launch = facts.launch.value
    present = launch.flags_present + launch.other_flags if launch is not None else []
    refused = answer("decode_radix", facts.sglang_version.value)
    if (
        launch is None
        or mode is None
        or mode[0] != "decode"
        or RADIX_FLAG not in present
        or refused is None
        or algo in refused.value["algorithms"]
    ):
        return None
    return disaggregation_dflash.finding(
        title=f"SGLang refuses {RADIX_FLAG} on a {algo} decode server",
        message=(
            f"SGLang {refused.release} refuses to start: `{RADIX_FLAG} is incompatible with "
            f"speculative decoding (--speculative-algorithm {algo})` "
            f"({refused.value['site']})."
        ),
        evidence=[version_evidence(facts), mode[1], flag_evidence(launch, RADIX_FLAG, RADIX_FLAG)],
        fixes=[Fix(action="remove_flag", flag=RADIX_FLAG)],
    )
