"""The vocabulary of checks: severities, evidence, fixes, findings, results, the registry.

Results are frozen: policy (waivers, baselines) makes new findings with `model_copy` rather
than editing what a check returned, so a result can be shared by renderers and re-judged
without one step's change leaking into another's view. Checks build findings only through
their own `Check.finding`, which fills in the check id and its catalog severity.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from dflash_doctor.defaults import Severity as Severity
from dflash_doctor.facts.models import HostFacts
from dflash_doctor.facts.vllm_models import Engine


class Evidence(BaseModel):
    """One observed fact that a finding rests on, pointing at where it was seen."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["config", "flag", "log", "version", "derived"]
    text: str
    file: str | None = None
    line: int | None = None
    key: str | None = None


# `set_key`, `remove_key`, `rename_key`: one key of a JSON option, named by vLLM's own dotted
# spelling (`--speculative-config.num_speculative_tokens`; `value`: the JSON value, or the
# new key's name); `set_env`: the variable `flag` set to `value` where the launch sets it.
FixAction = Literal[
    "set_flag",
    "remove_flag",
    "replace_flag",
    "upgrade_sglang",
    "manual",
    "set_key",
    "remove_key",
    "rename_key",
    "set_env",
]


class Fix(BaseModel):
    """A structured change to how the server is launched (planned and applied by `fix`)."""

    model_config = ConfigDict(frozen=True)

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
        if self.action in ("set_key", "remove_key", "rename_key") and self.flag:
            option, _, key = self.flag.partition(".")
            if self.action == "remove_key":
                return f"remove {key} from {option}"
            verb = f"set {key} to" if self.action == "set_key" else f"rename {key} to"
            return f"{verb} {self.value} in {option}"
        if self.action == "set_env":
            return f"set {self.flag}={self.value} where the launch sets it"
        if self.action == "upgrade_sglang":
            return f"upgrade SGLang to {self.value} or newer"
        return self.note or "manual change"


class Finding(BaseModel):
    model_config = ConfigDict(frozen=True)

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
    model_config = ConfigDict(frozen=True)

    check_id: str
    name: str
    severity: Severity
    status: ResultStatus
    reason: str | None = None
    findings: list[Finding] = Field(default_factory=list)
    # A skip's kind (runner.py): True, the check applies but could not judge (an input it
    # needs is missing or unusable: --fail-on-skip fails on it); False, it does not apply
    # here (no trigger, or a fact this kind of host never has). None: a report written
    # before the field (report.wanted_facts reads its reason then).
    unjudged: bool | None = None


class Skip(Exception):
    """Raised by a check that does not apply to these facts; the message is the reason."""


class Unjudged(Skip):
    """Raised by a check that applies but cannot judge: an input it needs is missing or
    unusable (the SGLang version, a config); the message names it. Fails --fail-on-skip."""


FactName = Literal[
    "sglang_version",
    "gpus",
    "launch",
    "drafter",
    "target",
    "log",
    "environ",
    "vllm_launch",
    "vllm_version",
]
CheckFunc = Callable[[HostFacts], list[Finding]]


@dataclass(frozen=True)
class Check:
    id: str
    name: str
    severity: Severity
    func: CheckFunc
    needs: tuple[FactName, ...]
    needs_any: tuple[FactName, ...]
    # The engine whose servers the check judges; it is skipped, as not applying, on others.
    engine: Engine = "sglang"

    @property
    def doc(self) -> str:
        return inspect.cleandoc(self.func.__doc__ or "")

    @property
    def summary(self) -> str:
        return self.doc.splitlines()[0] if self.doc else self.name

    def __call__(self, facts: HostFacts) -> list[Finding]:
        return self.func(facts)

    def finding(
        self,
        *,
        title: str,
        message: str,
        severity: Severity | None = None,
        evidence: list[Evidence] | None = None,
        impact: dict[str, float | int | str] | None = None,
        fixes: list[Fix] | None = None,
    ) -> Finding:
        """A finding of this check: its id always, its catalog severity unless the check
        grades this case otherwise (a milder form of the same fault)."""
        return Finding(
            check_id=self.id,
            severity=self.severity if severity is None else severity,
            title=title,
            message=message,
            evidence=list(evidence or []),
            impact=dict(impact or {}),
            fixes=list(fixes or []),
        )


REGISTRY: dict[str, Check] = {}


def check(
    check_id: str,
    name: str,
    severity: Severity,
    *,
    needs: tuple[FactName, ...] = (),
    needs_any: tuple[FactName, ...] = (),
    engine: Engine = "sglang",
) -> Callable[[CheckFunc], Check]:
    """Register a check. Its docstring is its documentation page (`dflash-doctor explain`).

    The decorated name becomes the `Check`: still callable on facts, and the check's
    findings are made with `<name>.finding(...)`."""

    def register(func: CheckFunc) -> Check:
        if check_id in REGISTRY:
            raise ValueError(f"duplicate check id {check_id}")
        if not func.__doc__:
            raise ValueError(f"check {check_id} has no documentation")
        made = Check(check_id, name, severity, func, needs, needs_any, engine)
        REGISTRY[check_id] = made
        return made

    return register
