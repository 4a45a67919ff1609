"""Where a server's launch lives, one record per kind: how it is parsed, edited, relaunched
and described, in one place (before, five modules each switched on the kind and drifted: a
systemd drop-in was restarted by its unit's name but described by the drop-in's file name).

Kinds: `script` (a shell launch script), `systemd` (a unit or a drop-in), `compose` (a compose
file's service), `argv` (the inventory's or host.yaml's own `launch:` entry) and `process`
(a bare process: only its command line, no file to edit). Which kinds are files and how
each is described live in launch_edits.py (the check path reads them without importing
fix/). A container's launch (fix/containers.py) is a source too: a compose-managed one is
ComposeService with its project's own `up`; `register(kind, factory)` adds a kind.

Relaunch is data: the argv lists to run after the write (each through `sudo -n` when the host
says so), or None for "stop the running server and start the script detached", which
`fix/apply.py` does itself (it watches the session it started).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from dflash_doctor.errors import FactError
from dflash_doctor.facts.launch import (
    MAX_LAUNCH_BYTES,
    launch_file_kind,
    parse_compose,
    parse_script,
    parse_systemd_unit,
)
from dflash_doctor.facts.models import LaunchArgs
from dflash_doctor.facts.shell import Reader, decode
from dflash_doctor.facts.vllm_launch import (
    command_words,
    parse_vllm_compose,
    parse_vllm_script,
    parse_vllm_systemd_unit,
    runs_vllm,
)
from dflash_doctor.fix.edits import (
    Edit,
    edit_argv,
    edit_compose,
    edit_inventory_launch,
    edit_shell,
    edit_words,
)
from dflash_doctor.fix.vllm_edits import (
    compose_argv,
    edit_vllm_compose,
    edit_vllm_text,
    proved_vllm_argv,
)
from dflash_doctor.fix.word_edits import quote_shell, read_inline, read_script, read_unit
from dflash_doctor.inventory import MAX_INVENTORY_BYTES

# Re-exported: which kinds are files and how each is described live below `check` and `fix`.
from dflash_doctor.launch_edits import (
    compose_up,
    describe_kind,
    systemd_restart,
)
from dflash_doctor.launch_edits import file_backed as file_backed
from dflash_doctor.launch_edits import unit_name as unit_name

if TYPE_CHECKING:
    from dflash_doctor.hosts import HostSpec
    from dflash_doctor.transport.base import Transport


class LaunchSource(Protocol):
    """One kind of launch source. `file_backed`: the launch is a file on the host that `fix`
    edits; `managed`: something other than the doctor restarts it (systemd, compose), so a
    relaunch is that manager's command and there is no process of ours to stop first."""

    kind: str
    file_backed: bool
    managed: bool

    def parse(
        self, data: bytes, *, source: str, path: str, service: str | None, read: Reader | None
    ) -> LaunchArgs:
        """The launch in `data` (the file's bytes), with flag lines for edits and evidence."""
        ...

    def edit(self, text: str, launch: LaunchArgs, edits: list[Edit]) -> str:
        """The file's new text with `edits` made; every other line kept."""
        ...

    def relaunch(self, source: str, service: str | None) -> list[list[str]] | None:
        """The commands that restart the server from `source`; None: stop and start it."""
        ...

    def describe(self, source: str, service: str | None) -> str:
        """What `fix --apply` does after the write, in words (the relaunch as a command)."""
        ...


class _NoFile:
    """Shared by the kinds without a launch file on the host."""

    kind: str
    file_backed = False
    managed = False

    def parse(
        self, data: bytes, *, source: str, path: str, service: str | None, read: Reader | None
    ) -> LaunchArgs:
        raise FactError(f"a {self.kind} launch has no file to parse")

    def edit(self, text: str, launch: LaunchArgs, edits: list[Edit]) -> str:
        raise FactError(f"cannot edit a {self.kind} launch source")

    def relaunch(self, source: str, service: str | None) -> list[list[str]] | None:
        return None

    def describe(self, source: str, service: str | None) -> str:
        return describe_kind(self.kind, source, service)


class Script:
    """A shell launch script: edited in place; relaunched by stopping the server the doctor
    found and starting the script detached (fix/apply.py)."""

    kind = "script"
    file_backed = True
    managed = False

    def parse(
        self, data: bytes, *, source: str, path: str, service: str | None, read: Reader | None
    ) -> LaunchArgs:
        return parse_script(data, source=source, read=read, path=path)

    def edit(self, text: str, launch: LaunchArgs, edits: list[Edit]) -> str:
        return edit_shell(text, launch, edits)

    def relaunch(self, source: str, service: str | None) -> list[list[str]] | None:
        return None

    def describe(self, source: str, service: str | None) -> str:
        return describe_kind(self.kind, source, service)


class SystemdUnit:
    """A systemd unit file or drop-in: the last `ExecStart=` of [Service] is edited; systemd
    restarts the unit (after daemon-reload, as the file changed)."""

    kind = "systemd"
    file_backed = True
    managed = True

    def parse(
        self, data: bytes, *, source: str, path: str, service: str | None, read: Reader | None
    ) -> LaunchArgs:
        return parse_systemd_unit(data, source=source, read=read)

    def edit(self, text: str, launch: LaunchArgs, edits: list[Edit]) -> str:
        return edit_shell(text, launch, edits)

    def relaunch(self, source: str, service: str | None) -> list[list[str]] | None:
        return systemd_restart(source)

    def describe(self, source: str, service: str | None) -> str:
        return describe_kind(self.kind, source, service)


class ComposeService:
    """A docker compose file's service: its `command:` list is edited; compose recreates it."""

    kind = "compose"
    file_backed = True
    managed = True

    def parse(
        self, data: bytes, *, source: str, path: str, service: str | None, read: Reader | None
    ) -> LaunchArgs:
        return parse_compose(data, source=source, service=service)

    def edit(self, text: str, launch: LaunchArgs, edits: list[Edit]) -> str:
        return edit_compose(text, edits)

    def relaunch(self, source: str, service: str | None) -> list[list[str]] | None:
        return [compose_up(source, service)]

    def describe(self, source: str, service: str | None) -> str:
        return describe_kind(self.kind, source, service)


def vllm_launch_args(data: bytes, *, source: str, kind: str) -> LaunchArgs:
    """A vLLM launch script or unit as the fix loop carries a launch: its server command's
    words as its runner reads them (fix/word_edits.py with vLLM's command test), which is
    what an edit is planned on and proved against; vLLM's own reading (facts/vllm_launch.py)
    must accept it too."""
    text = decode(data, "launch file", MAX_LAUNCH_BYTES)
    if kind == "systemd":
        parse_vllm_systemd_unit(data, source=source)
        words = read_unit(text, runs_vllm).words
    else:
        parse_vllm_script(data, source=source)
        words = read_script(text, runs_vllm).words
    return LaunchArgs(source=source, kind="systemd" if kind == "systemd" else "script", argv=words)


class _VllmWords:
    """A script or unit whose command runs vLLM's server: read by vLLM's parser, edited by
    fix/vllm_edits.py (the relaunch is the script's or unit's own)."""

    kind: str

    def parse(
        self, data: bytes, *, source: str, path: str, service: str | None, read: Reader | None
    ) -> LaunchArgs:
        return vllm_launch_args(data, source=source, kind=self.kind)

    def edit(self, text: str, launch: LaunchArgs, edits: list[Edit]) -> str:
        return edit_vllm_text(text, self.kind, edits)


class VllmScript(_VllmWords, Script):
    """A shell script that runs vLLM's server, relaunched as any script is."""


class VllmUnit(_VllmWords, SystemdUnit):
    """A systemd unit whose `ExecStart=` runs vLLM's server, restarted by systemd."""


class VllmCompose(ComposeService):
    """A compose service whose `entrypoint` + `command` run vLLM's server: its `command:`
    edited by fix/vllm_edits.py (through the YAML node edit), recreated by compose."""

    def parse(
        self, data: bytes, *, source: str, path: str, service: str | None, read: Reader | None
    ) -> LaunchArgs:
        parse_vllm_compose(data, source=source, service=service)  # vLLM's reading accepts it
        text = decode(data, "compose file", MAX_LAUNCH_BYTES)
        return LaunchArgs(source=source, kind="compose", argv=compose_argv(text, service)[1])

    def edit(self, text: str, launch: LaunchArgs, edits: list[Edit]) -> str:
        return edit_vllm_compose(text, edits)


def runs_vllm_launch(launch: LaunchArgs | None) -> bool:
    """Whether a launch the fix loop carries runs vLLM's server."""
    return launch is not None and runs_vllm(launch.argv)


def source_of(launch: LaunchArgs) -> LaunchSource:
    """The launch source of a parsed launch: its kind's, the vLLM variant for a vLLM
    script or unit."""
    if launch.kind in _VLLM and runs_vllm(launch.argv):
        return _VLLM[launch.kind]()
    return source_for(launch.kind)


class InventoryEntry(_NoFile):
    """The `launch:` entry of an inventory host: the inventory file (on this machine) is
    rewritten, the host is never relaunched (it runs what the inventory says later)."""

    kind = "argv"

    def rewrite(
        self, spec: HostSpec, edits: list[Edit], here: Transport, launch: LaunchArgs | None = None
    ) -> dict[str, Any]:
        """The plan's fields as an edit of the inventory file (`source`, `old_text`,
        `new_text`, `new_argv`, `edits`, `manual`), made from the entry's unredacted words
        (the parsed launch hides secrets: never write those back). `here`: this machine's
        files, where the inventory is read (and later written).

        Edited in place like a script: a string entry changes only the words an edit names,
        every other word keeps its spelling; flags the release's parser does not know
        (`launch.unknown_args`: `--hf-token`, a wrapper's own flags) are kept with their
        values, and their removal is left to the user (issue 22 item 10)."""
        given, inventory = spec.hints.launch, spec.fix.inventory_file
        if given is None or inventory is None:
            raise FactError(f"host {spec.name}: no inventory `launch:` entry to edit")
        edits, manual = keep_unknown_flags(edits, launch)
        line: str | None = None
        try:
            if runs_vllm(command_words(given)):
                line, new_argv = vllm_inventory_command(given, edits)
            elif isinstance(given, str):
                line = edit_words(given, edits, read_inline, quote_shell) if edits else given
                new_argv = shlex.split(line)
            else:
                new_argv = edit_argv(list(given), edits)
        except (ValueError, FactError) as e:
            raise FactError(f"{inventory}: host {spec.name} launch: {e}") from None
        data = here.read_file(inventory, max_bytes=MAX_INVENTORY_BYTES)
        try:
            old_text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise FactError(f"{inventory}: inventory is not UTF-8 text") from None
        return {
            "edits": edits,
            "manual": manual,
            "new_argv": new_argv,
            "source": inventory,
            "old_text": old_text,
            "new_text": edit_inventory_launch(old_text, spec.name, new_argv, line=line),
        }


def vllm_inventory_command(
    given: str | list[str], edits: list[Edit]
) -> tuple[str | None, list[str]]:
    """A vLLM `launch:` command with the key edits made: a string edited as a one-line
    script (fix/vllm_edits.py: every other word keeps its spelling, the result proved by
    vLLM's reading), a list word by word (then proved the same way)."""
    if isinstance(given, str):
        line = edit_vllm_text(given + "\n", "script", edits).removesuffix("\n") if edits else given
        return line, command_words(line)
    return None, proved_vllm_argv(given, edits)


def keep_unknown_flags(
    edits: list[Edit], launch: LaunchArgs | None
) -> tuple[list[Edit], list[str]]:
    """`edits` without the removals of flags the release's parser does not know, and those
    removals as lines for the user: an inventory's `launch:` may feed a wrapper that reads
    them (`--hf-token`), which only its author knows."""
    unknown = {u.split("=", 1)[0] for u in (launch.unknown_args if launch else [])}
    kept = [e for e in edits if not (e.action == "remove_flag" and e.flag in unknown)]
    manual = [
        f"DFD110: remove {e.flag} if SGLang itself reads this command (kept: the release's "
        "parser does not know it, a wrapper may)"
        for e in edits
        if e not in kept
    ]
    return kept, manual


class BareProcess(_NoFile):
    """A server found only as a process: its command line is known, no file holds it."""

    kind = "process"


_FACTORIES: dict[str, Callable[[], LaunchSource]] = {
    "script": Script,
    "systemd": SystemdUnit,
    "compose": ComposeService,
    "argv": InventoryEntry,
    "process": BareProcess,
}


_VLLM: dict[str, Callable[[], LaunchSource]] = {
    "script": VllmScript,
    "systemd": VllmUnit,
    "compose": VllmCompose,
}


def register(kind: str, factory: Callable[[], LaunchSource]) -> None:
    """Add (or replace) the launch source of `kind`: how container launches join the table."""
    _FACTORIES[kind] = factory


def source_for(kind: str) -> LaunchSource:
    """The launch source of a parsed launch's `kind`."""
    factory = _FACTORIES.get(kind)
    if factory is None:
        raise FactError(f"no launch source of kind {kind!r}")
    return factory()


def parse_file(
    data: bytes,
    *,
    source: str,
    path: str,
    service: str | None = None,
    read: Reader | None = None,
    engine: str | None = None,
) -> LaunchArgs:
    """A launch file of whichever kind its name and text say (facts.launch.launch_file_kind);
    `engine` "vllm": a vLLM script, unit or compose service."""
    name = launch_file_kind(path, data)
    if engine == "vllm":
        if name not in _VLLM:
            raise FactError(f"{source}: vLLM launches in {name} files are not edited yet")
        return _VLLM[name]().parse(data, source=source, path=path, service=service, read=read)
    kind = source_for(name)
    return kind.parse(data, source=source, path=path, service=service, read=read)
