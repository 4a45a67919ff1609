"""The vocabulary of checks: severities, evidence, fixes, findings, results, the registry."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field

from dflash_doctor.defaults import Severity as Severity
from dflash_doctor.facts.models import HostFacts


class Evidence(BaseModel):
    """One observed fact that a finding rests on, pointing at where it was seen."""

    kind: Literal["config", "flag", "log", "version", "derived"]
    text: str
    file: str | None = None
    line: int | None = None
    key: str | None = None


FixAction = Literal["set_flag", "remove_flag", "replace_flag", "upgrade_sglang", "manual"]


class Fix(BaseModel):
    """A structured change to how the server is launched (planned and applied by `fix`)."""

    action: FixAction
    flag: str | None = None
    value: str | None = None
    replaces: str | None = None
    note: str | None = None

    def describe(self) -> str:
        if self.action == "set_flag":
            return f"set {self.flag}" + (f" {self.value}" if self.value is not None else "")
        if self.action == "remove_flag":
            return f"remove {self.flag}"
        if self.action == "replace_flag":
            value = f" {self.value}" if self.value is not None else ""
            return f"replace {self.replaces} with {self.flag}{value}"
        if self.action == "upgrade_sglang":
            return f"upgrade SGLang to {self.value} or newer"
        return self.note or "manual change"


class Finding(BaseModel):
    check_id: str
    severity: Severity
    title: str
    message: str
    evidence: list[Evidence] = Field(default_factory=list)
    impact: dict[str, float | int | str] = Field(default_factory=dict)
    fixes: list[Fix] = Field(default_factory=list)
    # Set by policy (waivers, baseline), never by a check: why this finding does not gate.
    suppressed: str | None = None
    waiver: str | None = None


ResultStatus = Literal["passed", "failed", "skipped"]


class CheckResult(BaseModel):
    check_id: str
    name: str
    severity: Severity
    status: ResultStatus
    reason: str | None = None
    findings: list[Finding] = Field(default_factory=list)


class Skip(Exception):
    """Raised by a check that does not apply to these facts; the message is the reason."""


FactName = Literal["sglang_version", "gpus", "launch", "drafter", "target", "log", "environ"]
CheckFunc = Callable[[HostFacts], list[Finding]]


@dataclass(frozen=True)
class Check:
    id: str
    name: str
    severity: Severity
    func: CheckFunc
    needs: tuple[FactName, ...]
    needs_any: tuple[FactName, ...]

    @property
    def doc(self) -> str:
        return inspect.cleandoc(self.func.__doc__ or "")

    @property
    def summary(self) -> str:
        return self.doc.splitlines()[0] if self.doc else self.name


REGISTRY: dict[str, Check] = {}


def check(
    check_id: str,
    name: str,
    severity: Severity,
    *,
    needs: tuple[FactName, ...] = (),
    needs_any: tuple[FactName, ...] = (),
) -> Callable[[CheckFunc], CheckFunc]:
    """Register a check. Its docstring is its documentation page (`dflash-doctor explain`)."""

    def register(func: CheckFunc) -> CheckFunc:
        if check_id in REGISTRY:
            raise ValueError(f"duplicate check id {check_id}")
        if not func.__doc__:
            raise ValueError(f"check {check_id} has no documentation")
        REGISTRY[check_id] = Check(check_id, name, severity, func, needs, needs_any)
        return func

    return register
