"""Checks make findings through their own factory; results are frozen."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from pydantic import ValidationError

from dflash_doctor.checks import CATALOG
from dflash_doctor.checks.base import CheckResult, Evidence, Finding, Fix, Severity
from dflash_doctor.checks.draft_kv_memory import draft_kv_memory
from dflash_doctor.checks.window_flag_spelling import window_flag_spelling
from tests.conftest import REPO

CHECKS_DIR = REPO / "dflash_doctor" / "checks"
# Findings are made from parts here: the factory itself.
MAKERS = {"base.py"}


def hand_built(source: str) -> list[int]:
    """Lines of `source` that build a Finding directly (a call or a pydantic constructor)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == "Finding":
            lines.append(node.lineno)
        elif (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id == "Finding"
        ):
            lines.append(node.lineno)  # Finding.model_validate(...), Finding.model_construct(...)
    return lines


def test_scanner_finds_hand_built_findings() -> None:
    source = (
        "def f(facts):\n"
        "    a = Finding(check_id='DFD1', severity=s, title='t', message='m')\n"
        "    b = Finding.model_construct(check_id='DFD1')\n"
        "    return [f.finding(title='t', message='m')]\n"
    )
    assert hand_built(source) == [2, 3]


@pytest.mark.parametrize(
    "path", sorted(p for p in CHECKS_DIR.glob("*.py") if p.name not in MAKERS), ids=str
)
def test_checks_use_the_factory(path: Path) -> None:
    """A check builds findings with `<check>.finding(...)`, so the id and severity come from
    its registration and cannot drift from the catalog."""
    assert hand_built(path.read_text()) == [], f"{path.name}: use the check's .finding(...)"


def test_factory_fills_in_id_and_severity() -> None:
    f = draft_kv_memory.finding(title="t", message="m")
    assert (f.check_id, f.severity) == ("DFD131", Severity.INFO)
    assert (f.evidence, f.impact, f.fixes) == ([], {}, [])
    milder = window_flag_spelling.finding(title="t", message="m", severity=Severity.WARNING)
    assert (milder.check_id, milder.severity) == ("DFD104", Severity.WARNING)
    assert window_flag_spelling.severity == Severity.ERROR


def test_factory_does_not_share_the_callers_lists() -> None:
    evidence = [Evidence(kind="flag", text="--x 1")]
    f = draft_kv_memory.finding(title="t", message="m", evidence=evidence)
    evidence.append(Evidence(kind="flag", text="--y 2"))
    assert len(f.evidence) == 1


def test_decorated_name_is_the_registered_check() -> None:
    assert CATALOG["DFD131"] is draft_kv_memory
    assert draft_kv_memory.doc.startswith(draft_kv_memory.summary)


@pytest.mark.parametrize(
    "model",
    [
        Finding(check_id="DFD103", severity=Severity.ERROR, title="t", message="m"),
        Evidence(kind="flag", text="--x"),
        Fix(action="set_flag", flag="--x", value="1"),
        CheckResult(check_id="DFD103", name="n", severity=Severity.ERROR, status="passed"),
    ],
    ids=lambda m: type(m).__name__,
)
def test_results_are_frozen(model: Finding | Evidence | Fix | CheckResult) -> None:
    field = next(iter(type(model).model_fields))
    with pytest.raises(ValidationError, match="frozen"):
        setattr(model, field, getattr(model, field))


def test_a_changed_finding_is_a_new_one() -> None:
    f = draft_kv_memory.finding(title="t", message="m")
    waived = f.model_copy(update={"suppressed": "waived: r"})
    assert f.suppressed is None and waived.suppressed == "waived: r"
