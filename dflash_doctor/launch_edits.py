"""What an edit of a launch is, and how each kind of launch comes back after one: pure data
and functions, below both `check` (its next-step hint, next_step.py) and `fix` (which edits
and relaunches). `check` never imports `fix/` to print its hint (issue 27 item 4).

Kinds (facts.models.LaunchKind): `script`, `systemd` and `compose` are files on the host that
`fix` edits; `argv` (an inventory's `launch:` entry) and `process` (a bare process) are not.
"""

from __future__ import annotations

import posixpath
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeGuard

from dflash_doctor.checks.base import Fix
from dflash_doctor.facts.models import LaunchArgs

if TYPE_CHECKING:
    from dflash_doctor.hosts import HostSpec

# The fix actions `dflash-doctor fix` edits into a launch; every other one is a manual step.
EDITABLE = ("set_flag", "remove_flag", "replace_flag")
# The ones it edits into a vLLM launch (fix/vllm_edits.py): a `--speculative-config` key, a
# variable the server starts with.
VLLM_EDITABLE = ("set_key", "remove_key", "rename_key", "set_env")
# The launch kinds whose launch is a file on the host that `fix` edits in place.
FILE_BACKED_KINDS = frozenset({"script", "systemd", "compose"})


@dataclass(frozen=True)
class Edit:
    """One change of a launch command: set, remove or replace one flag."""

    action: str
    flag: str
    value: str | None = None
    replaces: str | None = None

    @classmethod
    def of(cls, fix: Fix) -> Edit:
        """The edit a check's fix asks for (an editable one: it names a flag)."""
        assert fix.flag is not None
        return cls(fix.action, fix.flag, fix.value, fix.replaces)


def edit_argv(argv: list[str], edits: list[Edit]) -> list[str]:
    """The new command line: `argv` with `edits` made, in order."""
    out = list(argv)

    def locate(flag: str) -> int | None:
        for i, a in enumerate(out):
            if a == flag or a.startswith(flag + "="):
                return i
        return None

    for e in edits:
        target = e.replaces if e.action == "replace_flag" and e.replaces else e.flag
        i = locate(target)
        if e.action == "remove_flag":
            if i is not None:
                has_value = (
                    "=" not in out[i] and i + 1 < len(out) and not out[i + 1].startswith("-")
                )
                del out[i : i + (2 if has_value else 1)]
            continue
        if i is None:
            out += [e.flag] + ([e.value] if e.value is not None else [])
            continue
        if "=" in out[i]:
            out[i] = (
                f"{e.flag}={e.value}" if e.value is not None else e.flag + out[i][len(target) :]
            )
        else:
            out[i] = e.flag
            if e.value is not None:
                if i + 1 < len(out) and not out[i + 1].startswith("-"):
                    out[i + 1] = e.value
                else:
                    out.insert(i + 1, e.value)
    return out


def file_backed(launch: LaunchArgs | None) -> TypeGuard[LaunchArgs]:
    """Whether `launch` came from a file on the host that `fix` edits."""
    return launch is not None and launch.kind in FILE_BACKED_KINDS


def unit_name(source: str) -> str:
    """The systemd unit a unit file or drop-in belongs to.

    A drop-in `/etc/systemd/system/sglang.service.d/override.conf` configures `sglang.service`
    (systemd.unit(5), "drop-in" directories `NAME.d/`): restarting or naming `override.conf`
    would be wrong.
    """
    parent = posixpath.basename(posixpath.dirname(source.rstrip("/")))
    if source.endswith(".conf") and parent.endswith(".d") and len(parent) > 2:
        return parent[: -len(".d")]
    return posixpath.basename(source)


def systemd_restart(source: str) -> list[list[str]]:
    """The commands that restart the unit of a unit file or drop-in after its edit."""
    return [["systemctl", "daemon-reload"], ["systemctl", "restart", "--", unit_name(source)]]


def compose_up(source: str, service: str | None) -> list[str]:
    """The command that recreates a compose file's service after its edit."""
    argv = ["docker", "compose", "-f", source, "up", "-d", "--force-recreate"]
    return argv + ([service] if service else [])


def describe_kind(kind: str, source: str, service: str | None) -> str:
    """What `fix --apply` does after writing a launch of `kind`, in words (the relaunch as a
    command): the same commands fix/launch_sources.py runs."""
    if kind == "script":
        return f"stop the running server, start {source} detached, wait for /health, re-check"
    if kind == "systemd":
        return f"systemctl daemon-reload && systemctl restart {unit_name(source)}"
    if kind == "compose":
        return shlex.join(compose_up(source, service))
    return "no launch file: restart the server with the new command yourself"


def describe_relaunch(
    spec: HostSpec, launch: LaunchArgs | None, source: str | None, refused: str | None
) -> str:
    """What `fix --apply` does after the write; `refused`: the transport's relaunch_refused."""
    if refused is not None:
        return "nothing is relaunched (offline or recorded host): only the file is written"
    if spec.fix.relaunch:
        return f"run the configured relaunch command: {spec.fix.relaunch}"
    if launch is None or source is None:
        return "no launch file: restart the server with the new command yourself"
    return describe_kind(launch.kind, source, spec.hints.compose_service)
