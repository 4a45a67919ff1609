"""From findings to a plan: the edits, the new launch text or command, the diff. Pure."""

from __future__ import annotations

import difflib
import shlex

from pydantic import BaseModel, ConfigDict, Field

from dflash_doctor.checks.base import CheckResult
from dflash_doctor.facts.models import LaunchArgs
from dflash_doctor.fix.edits import EDITABLE, Edit, edit_argv
from dflash_doctor.fix.launch_sources import source_of
from dflash_doctor.fix.vllm_edits import edit_vllm_argv
from dflash_doctor.launch_edits import VLLM_EDITABLE


class FixPlan(BaseModel):
    """Frozen: a step that changes the plan (the inventory's own launch entry) makes a new one."""

    model_config = ConfigDict(frozen=True)

    host: str
    source: str | None  # the launch file on the host, None when there is none to edit
    launch: LaunchArgs | None
    edits: list[Edit] = Field(default_factory=list)
    manual: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    check_ids: list[str] = Field(default_factory=list)
    old_text: str | None = None
    new_text: str | None = None
    new_argv: list[str] | None = None

    @property
    def changes(self) -> bool:
        if self.new_text is not None:
            return self.new_text != self.old_text
        return bool(self.new_argv) and self.launch is not None and self.new_argv != self.launch.argv

    def diff(self) -> str:
        if self.old_text is None or self.new_text is None or self.source is None:
            return ""
        return "".join(
            difflib.unified_diff(
                self.old_text.splitlines(keepends=True),
                self.new_text.splitlines(keepends=True),
                fromfile=f"a{self.source}" if self.source.startswith("/") else f"a/{self.source}",
                tofile=f"b{self.source}" if self.source.startswith("/") else f"b/{self.source}",
            )
        )

    @property
    def new_command(self) -> str | None:
        return shlex.join(self.new_argv) if self.new_argv else None


def _collect(
    results: list[CheckResult], editable: tuple[str, ...] = EDITABLE
) -> tuple[list[Edit], list[str], list[str], list[str]]:
    edits: list[Edit] = []
    manual: list[str] = []
    notes: list[str] = []
    ids: list[str] = []
    seen: dict[str, Edit] = {}
    for result in results:
        for finding in result.findings:
            if finding.suppressed is not None:
                continue
            for fix in finding.fixes:
                if fix.action not in editable or fix.flag is None:
                    line = f"{finding.check_id}: {fix.describe()}"
                    if line not in manual:
                        manual.append(line)
                    continue
                edit = Edit.of(fix)
                if fix.note and f"{finding.check_id}: {fix.note}" not in notes:
                    # What the edit also does (e.g. the full layers a window clamps): say it.
                    notes.append(f"{finding.check_id}: {fix.note}")
                key = edit.flag
                if finding.check_id not in ids:
                    ids.append(finding.check_id)  # re-checked after the change
                if key in seen:
                    if seen[key] != edit:
                        notes.append(
                            f"{finding.check_id} also wants {fix.describe()}; kept "
                            f"{seen[key].action} {seen[key].flag} {seen[key].value}"
                        )
                    continue
                seen[key] = edit
                edits.append(edit)
    return edits, manual, notes, ids


def _editable(
    engine: str | None, source_launch: LaunchArgs | None, running: LaunchArgs | None
) -> tuple[str, ...]:
    """The fix actions `fix` makes here. On vLLM: every one in a script or unit; the keys only
    in a compose service (its `environment:` is not edited: fix/vllm_edits.py) and in an
    inventory's `launch:` command (`running` of kind "argv"); none on a bare process."""
    if engine != "vllm":
        return EDITABLE
    if source_launch is not None and source_launch.kind != "compose":
        return VLLM_EDITABLE
    if source_launch is not None or (running is not None and running.kind == "argv"):
        return tuple(a for a in VLLM_EDITABLE if a != "set_env")
    return ()


def plan_fixes(
    host: str,
    results: list[CheckResult],
    *,
    source: str | None,
    source_text: str | None,
    source_launch: LaunchArgs | None,
    running: LaunchArgs | None,
    engine: str | None = None,
) -> FixPlan:
    """Plan the change: edit `source_text` (the launch file) or, without one, the argv.
    `engine` "vllm": the vLLM edits (fix/vllm_edits.py) on a vLLM script or unit; a vLLM
    server with no launch file to edit gets them as manual steps."""
    vllm = engine == "vllm"
    editable = _editable(engine, source_launch, running)
    edits, manual, notes, ids = _collect(results, editable)
    if vllm and not editable and manual:
        notes.append("no vLLM launch file to edit: give --launch FILE (its script or unit)")
    old_text = new_text = None
    new_argv = None
    planned = edit_vllm_argv if vllm else edit_argv
    if source is not None and source_text is not None and source_launch is not None:
        old_text = source_text
        if not edits:
            new_text = source_text
        else:
            new_text = source_of(source_launch).edit(source_text, source_launch, edits)
        new_argv = planned(source_launch.argv, edits)
    elif running is not None:
        new_argv = planned(running.argv, edits)

    return FixPlan(
        host=host,
        source=source,
        launch=source_launch or running,
        edits=edits,
        manual=manual,
        notes=notes,
        check_ids=ids,
        old_text=old_text,
        new_text=new_text,
        new_argv=new_argv,
    )
