"""Checks on the launch command as the host's own SGLang parses it."""

from __future__ import annotations

from dflash_doctor.checks.base import Finding, Fix, Severity, Unjudged, check
from dflash_doctor.checks.views import flag_evidence
from dflash_doctor.errors import FactError
from dflash_doctor.facts.launch import sglang_args_start
from dflash_doctor.facts.models import HostFacts, LaunchArgs
from dflash_doctor.facts.sglang_options import release_for, renamed_option
from dflash_doctor.sglang_versions import WINDOW_FLAGS


@check("DFD110", "sglang-rejects-launch-command", Severity.ERROR, needs=("launch",))
def sglang_rejects_launch(facts: HostFacts) -> list[Finding]:
    """The host's SGLang would refuse this launch command.

    **What it finds.** Parsed with the host's own `ServerArgs.add_cli_args`, the command has
    flags that SGLang does not know (a typo, a flag of another version, an abbreviation
    that is ambiguous in this version), or a value SGLang rejects. Draft window spellings
    are left to DFD104, options the release renamed or removed to DFD140. Where the host's
    SGLang cannot be imported (`gate`, recorded hosts), its release's parser is replayed from
    the option data generated from the wheels (`facts/sglang_options.py`); the check is
    skipped only when the release is unknown.

    **Why it hurts.** `sglang.launch_server` exits at startup with `unrecognized arguments`
    or a usage error: a relaunch from this launch file leaves the host without a server.

    A value that does not convert to the option's type (`--speculative-num-draft-tokens
    sixteen`) is argparse's `invalid int value` error in every release (the DFlash size
    options are `type=int`: `srt/server_args.py` 0.5.11:5405, `arg_groups/arg_utils.py`
    0.5.23:417), reported even where no parser of the release is known.

    **Example.** `--bogus-flag` on any release: `sglang serve: error: unrecognized
    arguments: --bogus-flag`; a command without `--model-path`: `the following arguments
    are required: --model-path`.

    **How to fix.** Remove or correct the named flags; `python -m sglang.launch_server
    --help` on the host lists what this version accepts.

    **Fix safety.** Manual: the tool cannot know what a typo meant. Renamed options have
    an automatic rewrite (DFD140).

    **Versions.** Every release 0.5.11-0.5.23; the option set per release is
    `dflash_doctor/data/sglang_options.json`, generated from each wheel's
    `ServerArgs.add_cli_args`, parsed as `sglang serve` parses it (`srt/server_args.py`
    0.5.11:7276, 0.5.23:679).
    """
    launch = facts.launch.value
    assert launch is not None
    if launch.parser == "fallback":
        if launch.value_errors:
            return [_value_error_finding(launch)]
        raise Unjudged(
            "no parser of the host's SGLang release (neither importable nor in the data)"
        )
    # Window spellings are DFD104's, renamed or removed options DFD140's (with a rewrite).
    release = release_for(launch.parser_version)[0] if launch.parser_version else None
    unknown = [
        u
        for u in launch.unknown_args
        if u.split("=", 1)[0] not in WINDOW_FLAGS
        and renamed_option(release, u.split("=", 1)[0]) is None
    ]
    if launch.sglang_rejects is not None:
        try:
            argv = launch.argv[sglang_args_start(launch.argv) :]
        except FactError:
            argv = []
        if any(
            a.split("=", 1)[0] in launch.sglang_rejects and renamed_option(release, a) is not None
            for a in argv
            if a.startswith("--")
        ):
            return []  # an option this release renamed or removed: DFD140 rewrites it
    if launch.sglang_rejects is None and not unknown:
        return []
    reason = launch.sglang_rejects or f"unrecognized arguments: {' '.join(unknown)}"
    how = (
        "The host's SGLang parser says"
        if launch.parser == "sglang"
        else f"SGLang {launch.parser_version}'s parser (replayed from its wheel) says"
    )
    evidence = [flag_evidence(launch, u.split("=", 1)[0], u) for u in unknown]
    if launch.sglang_rejects is not None:
        evidence.append(flag_evidence(launch, "", launch.sglang_rejects))
    return [
        sglang_rejects_launch.finding(
            title=f"SGLang {launch.parser_version} rejects the launch command",
            message=f"{how}: {reason}.",
            evidence=evidence,
            fixes=[Fix(action="remove_flag", flag=u.split("=", 1)[0]) for u in unknown]
            or [Fix(action="manual", note=f"correct the command: {reason}")],
        )
    ]


def _value_error_finding(launch: LaunchArgs) -> Finding:
    """Values argparse refuses to convert, where no parser of the release could be replayed:
    every release declares the DFlash size options `type=int`, so the error is the same."""
    reason = "; ".join(launch.value_errors)
    flags = [e.split(":", 1)[0].removeprefix("argument ") for e in launch.value_errors]
    return sglang_rejects_launch.finding(
        title="SGLang rejects the launch command",
        message=f"SGLang's argparse refuses the command at start-up: error: {reason}.",
        evidence=[
            flag_evidence(launch, f, e) for f, e in zip(flags, launch.value_errors, strict=True)
        ],
        fixes=[Fix(action="manual", note=f"correct the command: {reason}")],
    )
