"""Checks on the launch command as the host's own SGLang parses it."""

from __future__ import annotations

from dflash_doctor.checks.base import Finding, Fix, Severity, Skip, check
from dflash_doctor.checks.views import flag_evidence
from dflash_doctor.facts.models import HostFacts
from dflash_doctor.sglang_versions import WINDOW_FLAGS


@check("DFD110", "sglang-rejects-launch-command", Severity.ERROR, needs=("launch",))
def sglang_rejects_launch(facts: HostFacts) -> list[Finding]:
    """The host's SGLang would refuse this launch command.

    **What it finds.** Parsed with the host's own `ServerArgs.add_cli_args`, the command has
    flags that SGLang does not know (a typo, a flag of another version, an abbreviation
    that is ambiguous in this version), or a value SGLang rejects. Draft window spellings
    are left to DFD104. This check runs only where the host's SGLang could be imported.

    **Why it hurts.** `sglang.launch_server` exits at startup with `unrecognized arguments`
    or a usage error: a relaunch from this launch file leaves the host without a server.

    **How to fix.** Remove or correct the named flags; `python -m sglang.launch_server
    --help` on the host lists what this version accepts.
    """
    launch = facts.launch.value
    assert launch is not None
    if launch.parser != "sglang":
        raise Skip("the host's SGLang could not be imported to parse the command")
    unknown = [u for u in launch.unknown_args if u.split("=", 1)[0] not in WINDOW_FLAGS]
    if launch.sglang_rejects is None and not unknown:
        return []
    reason = launch.sglang_rejects or f"unrecognized arguments: {' '.join(unknown)}"
    evidence = [flag_evidence(launch, u.split("=", 1)[0], u) for u in unknown]
    if launch.sglang_rejects is not None:
        evidence.append(flag_evidence(launch, "", launch.sglang_rejects))
    return [
        Finding(
            check_id="DFD110",
            severity=Severity.ERROR,
            title=f"SGLang {launch.parser_version} rejects the launch command",
            message=f"The host's SGLang parser says: {reason}.",
            evidence=evidence,
            fixes=[Fix(action="remove_flag", flag=u.split("=", 1)[0]) for u in unknown]
            or [Fix(action="manual", note=f"correct the command: {reason}")],
        )
    ]
