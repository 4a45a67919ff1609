"""DFD165: `--speculative-adaptive` with a DFlash-family algorithm does nothing."""

from __future__ import annotations

from dflash_doctor.checks.base import Evidence, Finding, Fix, Severity, Unjudged, check
from dflash_doctor.checks.views import flag_evidence, log_evidence
from dflash_doctor.facts.dflash_family import answer, is_family_algorithm
from dflash_doctor.facts.models import HostFacts

FLAG = "--speculative-adaptive"
EVENT = "adaptive_disabled"


def _served(facts: HostFacts) -> tuple[str, list[str]] | None:
    """(release that answered, algorithms `--speculative-adaptive` serves there)."""
    found = answer("adaptive", facts.sglang_version.value)
    return (found.release, list(found.value["algorithms"])) if found is not None else None


def _from_launch(facts: HostFacts) -> tuple[str, list[Evidence]] | None:
    launch = facts.launch.value
    if launch is None or not launch.speculative_adaptive:
        return None
    algo = (launch.speculative_algorithm or "").upper()
    served = _served(facts)
    if not is_family_algorithm(algo, facts.sglang_version.value):
        return None
    if served is not None and algo in served[1]:
        return None
    note = f" ({served[0]} serves it for {'/'.join(served[1])} only)" if served else ""
    return algo, [flag_evidence(launch, FLAG, f"{FLAG} with --speculative-algorithm {algo}{note}")]


def _from_log(facts: HostFacts) -> tuple[str, list[Evidence]] | None:
    log = facts.log.value
    event = log.events.get(EVENT) if log is not None else None
    if log is None or event is None:
        return None
    algo = event.last.text.split("speculative_algorithm=", 1)[-1].split(" ", 1)[0].upper()
    if not is_family_algorithm(algo, facts.sglang_version.value):
        return None
    return algo, [log_evidence(log, event.last.line, event.last.text)]


@check("DFD165", "adaptive-ignored", Severity.WARNING)
def adaptive_ignored(facts: HostFacts) -> list[Finding]:
    """`--speculative-adaptive` is set, but SGLang turns it off for DFLASH (and DSPARK).

    **What it finds.** The launch passes `--speculative-adaptive` with a DFlash-family
    algorithm, or the server log holds SGLang's start-up line
    `speculative_adaptive disabled: speculative_algorithm=DFLASH (only EAGLE/EAGLE3 are
    supported). Falling back to static speculative params.` Which algorithms adaptive
    serves is read from each release's `adaptive_unsupported_reason`
    (`data/dflash_family.json`, `scripts/gen_dflash_family.py`): EAGLE and EAGLE3 in
    every release 0.5.11-0.5.23.

    **Why it hurts.** Nothing breaks, and nothing adapts: the flag promises a draft length
    tuned to the measured acceptance, and the server runs static parameters. Adaptive
    tunes `speculative_num_steps` between candidate step counts; DFLASH has no such knob
    (it forces `speculative_num_steps` to 1 and drafts one block per step), so the sizing
    the operator meant to hand to SGLang is left undone.

    **Example.** `--speculative-algorithm DFLASH --speculative-adaptive` on 0.5.23: the log
    says `speculative_adaptive disabled: speculative_algorithm=DFLASH (only EAGLE/EAGLE3
    are supported)`, and every request drafts the drafter's full block.

    **How to fix.** Remove `--speculative-adaptive`. Size what DFLASH does read instead:
    the block (`--speculative-num-draft-tokens`, equal to the drafter's trained
    `block_size`, DFD105), the draft window for long contexts (DFD103), and the batch the
    server runs at (`--max-running-requests`, `--cuda-graph-max-bs`, DFD151); then measure
    the accept length with `check --bench`.

    **Fix safety.** Removing the flag changes nothing the server does: SGLang already
    ignores it for this algorithm.

    **Versions.** All releases. The test: `speculative/adaptive_spec_params.py`
    0.5.11:20-24, 0.5.23:61-65; the line and the fallback: `srt/server_args.py`
    0.5.11:3619-3630, `arg_groups/speculative_hook.py` 0.5.23:1374-1389. DFLASH's own
    step count: `srt/server_args.py` 0.5.11:3339-3347, `arg_groups/speculative_hook.py`
    0.5.23:334-349.
    """
    found = _from_log(facts) or _from_launch(facts)
    if found is None:
        if facts.launch.value is None and facts.log.value is None:
            raise Unjudged("needs the launch command or the server log")
        return []
    algo, evidence = found
    return [
        adaptive_ignored.finding(
            title=f"--speculative-adaptive does nothing with {algo}",
            message=(
                f"SGLang turns --speculative-adaptive off for {algo} at start-up (only "
                "EAGLE/EAGLE3 are supported) and runs static speculative parameters. "
                "Adaptive tunes speculative_num_steps, which the DFlash family does not "
                "step (DFLASH fixes it at 1); size the "
                "block (--speculative-num-draft-tokens = the drafter's block_size), the "
                "draft window and --max-running-requests instead, then measure with "
                "check --bench."
            ),
            evidence=evidence,
            fixes=[Fix(action="remove_flag", flag=FLAG)],
        )
    ]
