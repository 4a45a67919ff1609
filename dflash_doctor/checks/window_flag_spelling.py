"""DFD104: the draft window flag in a spelling the host's SGLang does not accept.

Served and trained spans per layer come from `dflash_doctor.spans`, which cites SGLang's
file:line for each rule.
"""

from __future__ import annotations

from dflash_doctor.checks.base import Finding, Fix, Severity, Skip, Unjudged, check
from dflash_doctor.checks.views import (
    flag_evidence,
    require_dflash,
    version_evidence,
    version_facts,
    window_flag_unwanted,
)
from dflash_doctor.facts.models import HostFacts, LaunchArgs
from dflash_doctor.sglang_versions import (
    VersionFacts,
)


@check(
    "DFD104",
    "draft-window-flag-spelling",
    Severity.ERROR,
    needs=("launch",),
)
def window_flag_spelling(facts: HostFacts) -> list[Finding]:
    """The draft window flag is spelled in a way the host's SGLang does not accept.

    **What it finds.** The window flag was renamed: 0.5.11 accepts only
    `--speculative-dflash-draft-window-size`; 0.5.12 and newer accept
    `--speculative-draft-window-size` (0.5.12 takes both names); 0.5.13-0.5.19 still accept
    the old spelling as a deprecated alias, and 0.5.20 removed it. Where the host's SGLang
    is importable, its own parser says which spellings it accepts; otherwise the version
    decides.

    **Why it hurts.** An unknown flag makes `sglang.launch_server` exit at startup
    (`unrecognized arguments`), so a launch file with the wrong spelling never serves; a
    deprecated spelling works today and breaks on the next upgrade (a warning).

    **Example.** `--speculative-dflash-draft-window-size 2048` on SGLang 0.5.23.

    **How to fix.** Replace the flag with the spelling the host's version accepts (the
    finding names it), keeping the value; where the served spans say the window only
    harms (DFD102/DFD130: 0.5.14+, or a drafter with no sliding layer), remove it instead.

    **Fix safety.** A rename keeps what the server runs; a removal is what DFD130 asks.

    **Versions.** 0.5.11: old spelling only (`srt/server_args.py` 0.5.11:5418); 0.5.12:
    both names of one option (`srt/server_args.py` 0.5.12:5873-5874); 0.5.13-0.5.19: the old
    one a deprecated alias that still sets the window (`srt/server_args.py`
    0.5.13:5921-5928, 0.5.19:3911-3918; `arg_groups/argparse_actions.py` 0.5.13:70-82);
    0.5.20+: new only, a field with no alias (`arg_groups/fields/spec.py` 0.5.20:161,
    0.5.23:165).
    """
    require_dflash(facts)
    launch = facts.launch.value
    assert launch is not None
    vf = version_facts(facts)
    accepted, label = _accepted_window_flags(facts, launch, vf)
    deprecated = list(vf.deprecated_window_flags) if vf is not None else []
    used = launch.draft_window_flag
    if used is None:
        raise Skip("no draft window flag is set")
    preferred = next((f for f in accepted if f not in deprecated), None)
    value = str(launch.draft_window_size) if launch.draft_window_size is not None else None
    evidence = [flag_evidence(launch, used, f"{used} {value}")]
    if facts.sglang_version.value is not None:
        evidence.append(version_evidence(facts))
    # Where the served spans say this flag should go (DFD102/DFD130), renaming it would fix
    # the spelling and keep the harm. One cause, one fix: remove it.
    preferred_fix = Fix(action="remove_flag", flag=used) if window_flag_unwanted(facts) else None
    if used not in accepted:
        fix = preferred_fix or (
            Fix(action="replace_flag", flag=preferred, value=value, replaces=used)
            if preferred
            else Fix(action="upgrade_sglang", value="0.5.11")
        )
        return [
            window_flag_spelling.finding(
                title=f"{label} does not accept {used}",
                message=(
                    f"{used} is not a flag of {label}; the server would exit at "
                    "startup with 'unrecognized arguments'"
                    + (f". This version spells it {preferred}." if preferred else ".")
                ),
                evidence=evidence,
                fixes=[fix],
            )
        ]
    if used in deprecated and preferred:
        return [
            window_flag_spelling.finding(
                severity=Severity.WARNING,
                title=f"{used} is deprecated in {label}",
                message=(
                    f"{used} is a deprecated alias of {preferred} in {label} and is "
                    "removed in 0.5.20."
                ),
                evidence=evidence,
                fixes=[
                    preferred_fix
                    or Fix(action="replace_flag", flag=preferred, value=value, replaces=used)
                ],
            )
        ]
    return []


def _accepted_window_flags(
    facts: HostFacts, launch: LaunchArgs, vf: VersionFacts | None
) -> tuple[list[str], str]:
    """The window flags the host's SGLang accepts, and who says so (its parser, else the table)."""
    if launch.accepted_window_flags is not None:
        # Only a parser SGLang itself ran on the host is "its own"; a replay is the option
        # data of that release (facts/launch.py replay_launch), no host was asked.
        who = "its own parser" if launch.parser == "sglang" else "its parser, replayed from data"
        return launch.accepted_window_flags, f"SGLang {launch.parser_version} ({who})"
    if vf is not None:
        return list(vf.window_flags), f"SGLang {vf.label}"
    why = facts.sglang_version.error or facts.sglang_version.value
    raise Unjudged(f"SGLang version unknown or not understood: {why}")
