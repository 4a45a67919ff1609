"""Checks on environment variables of the server process that fake or change DFLASH."""

from __future__ import annotations

from dflash_doctor.checks.base import Finding, Fix, Severity, Skip, Unjudged, check
from dflash_doctor.checks.views import (
    env_evidence,
    env_value,
    require_dflash,
    version_evidence,
    version_facts,
)
from dflash_doctor.facts.environment import env_bool, env_float
from dflash_doctor.facts.models import HostFacts
from dflash_doctor.sglang_versions import Version, format_version

SIMULATE_ENV = "SGLANG_SIMULATE_ACC_LEN"
# DFLASH forces its accept length when SIMULATE_ACC_LEN > 0 from 0.5.17
# (speculative/dflash_worker_v2.py 0.5.17:1810, 0.5.23:2268; dflash_utils.py 0.5.17:611
# "Forces the DFlash acceptance length (SGLANG_SIMULATE_ACC_LEN benchmark knob)").
# 0.5.11-0.5.16 define it (srt/environ.py 0.5.11:206 EnvFloat(-1)) but no DFLASH file reads it.
SIMULATE_HONOURED_SINCE: Version = (0, 5, 17)

SPEC_V2_ENV = "SGLANG_ENABLE_SPEC_V2"
# 0.5.11-0.5.13: EnvBool(True) (srt/environ.py 0.5.11:459), read for EAGLE/STANDALONE only;
# DFLASH refuses overlap scheduling there (speculative/spec_info.py 0.5.13:170-173).
# 0.5.14-0.5.20: removed; setting it logs "SGLANG_ENABLE_SPEC_V2 has been removed:
# speculative decoding always runs the V2 worker. Use --disable-overlap-schedule to select
# the non-overlap (synchronous) path." (arg_groups/speculative_hook.py 0.5.14:69-74,
# 0.5.20:108-113). 0.5.21-0.5.23: no file reads it; silently ignored.
SPEC_V2_REMOVED: Version = (0, 5, 14)
SPEC_V2_SILENT: Version = (0, 5, 21)
SPEC_V2_WARNING = (
    "SGLANG_ENABLE_SPEC_V2 has been removed: speculative decoding always runs the V2 worker."
)


def _environ_or_skip(facts: HostFacts) -> None:
    if facts.environ.value is None:
        raise Skip(f"the server's environment was not read: {facts.environ.error}")


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
    _environ_or_skip(facts)
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


@check("DFD122", "spec-v2-variable-ignored", Severity.WARNING, needs=("environ", "sglang_version"))
def spec_v2_variable(facts: HostFacts) -> list[Finding]:
    """`SGLANG_ENABLE_SPEC_V2` is set on an SGLang that no longer reads it.

    **What it finds.** The server's environment sets `SGLANG_ENABLE_SPEC_V2`, and the
    host's SGLang is 0.5.14 or newer, where DFLASH always runs the V2 worker.

    **Why it hurts.** `SGLANG_ENABLE_SPEC_V2=0` selected the synchronous (non-overlap)
    path up to 0.5.13 (for EAGLE; DFLASH had no overlap path then); from 0.5.14 DFLASH
    runs the V2 worker with the overlap scheduler and the variable is dropped
    (0.5.14-0.5.20 log `SGLANG_ENABLE_SPEC_V2 has been removed: ...`, 0.5.21+ say
    nothing), so the server overlaps what the operator meant to run synchronously. A true
    value, or a launch that already has `--disable-overlap-schedule`, is merely stale
    (info).

    **Example.** A unit carried over from 0.5.13 with `SGLANG_ENABLE_SPEC_V2=False`.

    **How to fix.** Remove the variable; to keep the synchronous path, add
    `--disable-overlap-schedule`.

    **Fix safety.** Removing it changes nothing on 0.5.14+; `--disable-overlap-schedule`
    restores the old behaviour at some throughput.

    **Versions.** 0.5.11-0.5.13 read it (`srt/environ.py` 0.5.11:459), not for DFLASH,
    which has no overlap path there (speculative/spec_info.py 0.5.13:170-173): passes.
    0.5.14-0.5.20: removed with a warning (`arg_groups/speculative_hook.py` 0.5.14:69-74,
    0.5.20:108-113). 0.5.21-0.5.23: no file reads it, silently ignored.
    """
    require_dflash(facts)
    _environ_or_skip(facts)
    vf = version_facts(facts)
    if vf is None:
        raise Unjudged(f"SGLang version {facts.sglang_version.value!r} is not a version")
    _, value = env_value(facts, SPEC_V2_ENV)
    if value is None or vf.version < SPEC_V2_REMOVED:
        return []
    launch = facts.launch.value
    already_sync = launch is not None and "--disable-overlap-schedule" in (
        launch.other_flags + launch.flags_present
    )
    wanted_sync = env_bool(value) is False and not already_sync
    silent = vf.version >= SPEC_V2_SILENT
    how = "ignores it without a word" if silent else f"ignores it and logs `{SPEC_V2_WARNING}`"
    message = f"SGLang {vf.label} {how}."
    fixes = [Fix(action="manual", note=f"unset {SPEC_V2_ENV} in the server's environment")]
    if wanted_sync:
        message += (
            " The value asks for the synchronous (non-overlap) path, which now needs "
            "--disable-overlap-schedule; the server runs the overlap scheduler instead."
        )
        fixes.append(Fix(action="manual", note="add --disable-overlap-schedule"))
    return [
        spec_v2_variable.finding(
            severity=Severity.WARNING if wanted_sync else Severity.INFO,
            title=f"{SPEC_V2_ENV}={value} has no effect on SGLang {vf.label}",
            message=message,
            evidence=[env_evidence(facts, SPEC_V2_ENV, value), version_evidence(facts)],
            fixes=fixes,
        )
    ]
