"""DFD142: relaxed speculative accept thresholds (at launch or at runtime): lossy acceptance."""

from __future__ import annotations

from dflash_doctor.checks.base import Finding, Fix, Severity, check
from dflash_doctor.checks.views import running_server, runtime_evidence
from dflash_doctor.facts.models import HostFacts

KEYS = ("speculative_accept_threshold_single", "speculative_accept_threshold_acc")
FLAGS = {k: "--" + k.replace("_", "-") for k in KEYS}


def _num(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


@check("DFD142", "lossy-accept-threshold", Severity.WARNING)
def lossy_accept_threshold(facts: HostFacts) -> list[Finding]:
    """Draft tokens are accepted more loosely than the target's own distribution allows.

    **What it finds.** `speculative_accept_threshold_single` or `_acc` is not 1.0 in a
    scheduler's state: set at launch, or changed at runtime through `/set_internal_state`
    (a scheduler value that differs from the launch value in `/server_info`).

    **Why it hurts.** With both at 1.0, DFlash's sampling verification accepts a draft
    token with exactly the target's probability, so outputs follow the target model.
    Below 1.0 a draft token is accepted when its target probability exceeds the threshold,
    or with `min(1, p / threshold_acc)`: accept length rises, and the outputs no longer
    follow the target's distribution (lossy). A runtime change is in no launch file, is
    lost on restart, and resets the acceptance statistics, so it also hides in dashboards.

    **Example.** `curl -X POST :30000/set_internal_state -d '{"server_args":
    {"speculative_accept_threshold_single": 0.6}}'`; `/server_info` then shows 1.0 at
    the top level and 0.6 in `internal_states[0]`.

    **How to fix.** Set both back to 1.0 (`/set_internal_state`, or drop the launch flags)
    unless lossy acceptance is intended and documented.

    **Fix safety.** Restoring 1.0 only makes acceptance exact again (accept length may fall).

    **Versions.** The thresholds default to 1.0 (`srt/server_args.py` 0.5.11:524-525,
    0.5.14:1484-1491) and are read by DFlash's sampling verify
    (`srt/speculative/dflash_utils.py` 0.5.11:511-515, 0.5.23:941-943; greedy verify does
    not use them). `/set_internal_state` allows these keys and `pp_max_micro_batch_size`
    (`srt/managers/scheduler.py` 0.5.11:3396-3433), from 0.5.16 also
    `dspark_force_budget_frac` and `dspark_clear_info_records` (`srt/managers/scheduler.py`
    0.5.16:3922-3932; `managers/scheduler_components/internal_state.py` 0.5.23:168-185),
    changing the
    schedulers' args, which `get_internal_state` reports (`srt/managers/scheduler.py`
    0.5.11:3370-3394; `scheduler_components/internal_state.py` 0.5.23:45-66) while the top
    level of `/server_info` keeps the launch values (the tokenizer's ServerArgs).
    """
    runtime = running_server(facts)
    findings: list[Finding] = []
    changed, launched = [], []
    for key in KEYS:
        at_launch = _num(runtime.args.get(key))
        for rank, state in enumerate(runtime.internal_states):
            now = _num(state.get(key))
            if now is None:
                continue
            if at_launch is not None and now != at_launch:
                changed.append((key, rank, at_launch, now))
            elif now != 1.0:
                launched.append((key, rank, now))
    if changed:
        evidence = [runtime_evidence(runtime, f"{k}={a!r} (launch)") for k, _, a, _ in changed]
        evidence += [
            runtime_evidence(runtime, f"internal_states[{r}].{k}={n!r}") for k, r, _, n in changed
        ]
        body = {k: 1.0 for k in {c[0] for c in changed}}
        findings.append(
            lossy_accept_threshold.finding(
                title="accept thresholds changed at runtime: acceptance is lossy",
                message=(
                    "The scheduler's "
                    + ", ".join(f"{k} is {n:g} (launched with {a:g})" for k, _, a, n in changed)
                    + ": changed at runtime with /set_internal_state. Sampled requests now "
                    "accept draft tokens the target would not have produced (lossy), the "
                    "change is in no launch file and is lost on restart."
                ),
                evidence=evidence,
                fixes=[
                    Fix(
                        action="manual",
                        note=f'POST /set_internal_state {{"server_args": {body}}} '
                        "(or restart the server)".replace("'", '"'),
                    )
                ],
            )
        )
    if launched:
        keys = sorted({k for k, _, _ in launched})
        findings.append(
            lossy_accept_threshold.finding(
                title="relaxed accept thresholds: acceptance is lossy",
                message=(
                    "The server runs with "
                    + ", ".join(f"{k}={n:g}" for k, _, n in launched)
                    + ": sampled requests accept draft tokens the target would not have "
                    "produced, so outputs no longer follow the target model (lossy)."
                ),
                evidence=[
                    runtime_evidence(runtime, f"internal_states[{r}].{k}={n!r}")
                    for k, r, n in launched
                ],
                fixes=[Fix(action="remove_flag", flag=FLAGS[k]) for k in keys],
            )
        )
    return findings
