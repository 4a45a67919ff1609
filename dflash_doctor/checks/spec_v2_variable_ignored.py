"""DFD122: `SGLANG_ENABLE_SPEC_V2` set on an SGLang that no longer reads it."""

from __future__ import annotations

from dflash_doctor.checks.base import Finding, Fix, Severity, Unjudged, check
from dflash_doctor.checks.views import (
    env_evidence,
    env_value,
    require_dflash,
    require_environ,
    version_evidence,
    version_facts,
)
from dflash_doctor.facts.environment import env_bool
from dflash_doctor.facts.models import HostFacts
from dflash_doctor.sglang_versions import Version

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
    require_environ(facts)
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
