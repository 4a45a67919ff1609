"""What to run next for a host's findings: the exact `dflash-doctor fix` command. Pure.

The command is built from how the user named the host (`--demo`, `--host-dir DIR`, an SSH
target, `-I FILE --limit NAME`) and the per-host overrides they gave, so pasting it fixes
the same host `check` looked at. Renderers print it; they decide nothing.
"""

from __future__ import annotations

import shlex

from dflash_doctor.checks.base import Finding
from dflash_doctor.facts.models import HostFacts, LaunchArgs
from dflash_doctor.launch_edits import EDITABLE, VLLM_EDITABLE, Edit, edit_argv, file_backed

# Fix actions `dflash-doctor fix` edits into the launch source (SGLang's flags; a vLLM
# launch's `--speculative-config` keys and variables).
_AUTOMATED = EDITABLE
_ANY_ENGINE: tuple[str, ...] = (*EDITABLE, *VLLM_EDITABLE)


def automated(findings: list[Finding], facts: HostFacts | None = None) -> bool:
    """Whether `fix --apply` has anything to change for these findings. A vLLM launch's
    edits count only where a launch file holds them (a bare process has no file to edit)."""
    vllm = facts.vllm_launch.value if facts is not None else None
    editable = _ANY_ENGINE if vllm is not None and vllm.kind != "process" else _AUTOMATED
    return any(
        fix.action in editable
        for f in findings
        if f.suppressed is None
        for fix in f.fixes
        if fix.flag is not None
    )


def fix_command(how: list[str], overrides: list[tuple[str, str | None]]) -> str:
    """`dflash-doctor fix <how the host was named> [-i KEY --pid N --launch F ...] --apply`,
    shell-quoted; an option may repeat (`-i`), an unset one (None) is left out."""
    argv = ["dflash-doctor", "fix", *how]
    for option, value in overrides:
        if value is not None:
            argv += [option, value]
    return shlex.join([*argv, "--apply"])


def launch_place(launch_file: str | None, launch: LaunchArgs | None) -> str | None:
    """The launch file to change, with the command's lines where they are known."""
    if launch is not None and file_backed(launch):
        if launch.command_lines is not None:
            first, last = launch.command_lines
            return f"{launch.source}:{first}" + (f"-{last}" if last != first else "")
        return launch.source
    return launch_file


def _edits(findings: list[Finding]) -> list[Edit]:
    return [
        Edit.of(fix)
        for f in findings
        if f.suppressed is None
        for fix in f.fixes
        if fix.action in _AUTOMATED and fix.flag is not None
    ]


def pending_relaunch(findings: list[Finding], facts: HostFacts) -> str | None:
    """Why `fix --apply` has nothing left to write although the running server has findings:
    the launch file already holds every automated fix, the process was started before it.
    None when that is not the case (then `fix_command` applies)."""
    running, source = facts.launch.value, facts.launch_file.value
    edits = _edits(findings)
    if running is None or source is None or not edits:
        return None
    if edit_argv(source.argv, edits) != source.argv or edit_argv(running.argv, edits) == (
        running.argv
    ):
        return None
    return (
        f"{source.source} already has this change, but the running server ({running.source}) "
        "was started before it: relaunch the server to apply it"
    )
