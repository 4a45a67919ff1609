"""DFD121: `SGLANG_SIMULATE_ACC_LEN` fakes the accept length the server reports."""

from __future__ import annotations

from dflash_doctor.checks.base import Finding, Fix, Severity, check
from dflash_doctor.checks.views import (
    env_evidence,
    env_value,
    require_dflash,
    require_environ,
    version_evidence,
    version_facts,
)
from dflash_doctor.facts.environment import env_float
from dflash_doctor.facts.models import HostFacts
from dflash_doctor.sglang_versions import Version, format_version

SIMULATE_ENV = "SGLANG_SIMULATE_ACC_LEN"
# DFLASH forces its accept length when SIMULATE_ACC_LEN > 0 from 0.5.17
# (speculative/dflash_worker_v2.py 0.5.17:1810, 0.5.23:2268; dflash_utils.py 0.5.17:611
# "Forces the DFlash acceptance length (SGLANG_SIMULATE_ACC_LEN benchmark knob)").
# 0.5.11-0.5.16 define it (srt/environ.py 0.5.11:206 EnvFloat(-1)) but no DFLASH file reads it.
SIMULATE_HONOURED_SINCE: Version = (0, 5, 17)


@check("DFD121", "simulated-acceptance", Severity.ERROR, needs=("environ",))
def simulated_acceptance(facts: HostFacts) -> list[Finding]:
    """`SGLANG_SIMULATE_ACC_LEN` is set: the accept length is faked, not measured.

    **What it finds.** The server process runs with `SGLANG_SIMULATE_ACC_LEN` above 0.
    It is a benchmark knob: from 0.5.17 the DFLASH worker overrides what the target
    accepted with a drawn length around this mean (`SGLANG_SIMULATE_ACC_METHOD`).

    **Why it hurts.** The accept lengths in the log and in `/metrics`, and the speed, are
    the simulation's, not the drafter's; with the default token mode the committed tokens
    are not the target's verified ones either. On a serving host that is an outage of
    correctness hidden behind good numbers.

    **Example.** `SGLANG_SIMULATE_ACC_LEN=3.5` left in a systemd unit after a benchmark.

    **How to fix.** Remove the variable from the server's environment and relaunch.

    **Fix safety.** Safe: it changes nothing but the simulation; expect the measured
    accept length to differ from the faked one.

    **Versions.** Honoured by DFLASH from 0.5.17 (error): speculative/dflash_worker_v2.py
    0.5.17:1810, 0.5.23:2268 forces the accept length (speculative/dflash_utils.py
    0.5.17:611). 0.5.11-0.5.16 define it (`srt/environ.py` 0.5.11:206) but no DFLASH file
    reads it (info: it takes effect on upgrade).
    """
    require_dflash(facts)
    require_environ(facts)
    _, value = env_value(facts, SIMULATE_ENV)
    number = env_float(value)
    if number is None or number <= 0:
        return []
    vf = version_facts(facts)
    evidence = [env_evidence(facts, SIMULATE_ENV, value)]
    _, method = env_value(facts, "SGLANG_SIMULATE_ACC_METHOD")
    if method is not None:
        evidence.append(env_evidence(facts, "SGLANG_SIMULATE_ACC_METHOD", method))
    fix = Fix(action="manual", note=f"unset {SIMULATE_ENV} in the server's environment")
    if vf is not None and vf.version < SIMULATE_HONOURED_SINCE:
        evidence.append(version_evidence(facts))
        return [
            simulated_acceptance.finding(
                severity=Severity.INFO,
                title=f"{SIMULATE_ENV} is set; this SGLang ignores it for DFLASH",
                message=(
                    f"SGLang {vf.label} does not read {SIMULATE_ENV} in DFLASH; from "
                    f"{format_version(SIMULATE_HONOURED_SINCE)} it fakes the accept length."
                ),
                evidence=evidence,
                fixes=[fix],
            )
        ]
    if vf is None:
        evidence.append(version_evidence(facts))
    return [
        simulated_acceptance.finding(
            title=f"Accept length is simulated ({SIMULATE_ENV}={value})",
            message=(
                f"DFLASH forces a drawn accept length around {number:g} instead of what "
                "the target verified: reported acceptance and speed are not real"
                + ("" if vf is not None else " (from SGLang 0.5.17; the version is unknown)")
                + "."
            ),
            evidence=evidence,
            impact={"simulated_accept_len": number},
            fixes=[fix],
        )
    ]
