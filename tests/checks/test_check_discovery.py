"""Checks are found by listing the package: a new check is its module and fixtures alone, a
module in checks/ that registers nothing fails here instead of sitting dead, and one that
registers two rules fails too (a check is one small file named after its rule)."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

from dflash_doctor import checks
from dflash_doctor.checks import CATALOG, CHECK_MODULES, SUPPORT


def test_every_check_module_registers_a_check() -> None:
    registered = {c.func.__module__.rsplit(".", 1)[-1] for c in CATALOG.values()}
    silent = sorted(set(CHECK_MODULES) - registered)
    assert silent == [], f"modules in checks/ that register no check: {silent}"


def test_every_check_module_registers_one_rule() -> None:
    per_module = Counter(c.func.__module__.rsplit(".", 1)[-1] for c in CATALOG.values())
    crowded = {m: n for m, n in per_module.items() if n > 1}
    assert crowded == {}, f"modules in checks/ that hold more than one rule: {crowded}"


def test_support_modules_register_none_and_exist() -> None:
    names = {m.name for m in pkgutil.iter_modules(checks.__path__)}
    assert names >= SUPPORT
    assert not {c.func.__module__.rsplit(".", 1)[-1] for c in CATALOG.values()} & SUPPORT


def test_a_new_module_is_found_without_a_list(tmp_path: Path) -> None:
    """A copy of the package with one more check file: its check is in the catalog, and a
    module with no @check is named by the test above's rule."""
    import shutil

    pkg = tmp_path / "dflash_doctor"
    shutil.copytree(Path(checks.__file__).parents[1], pkg)
    (pkg / "checks" / "zz_new_rule.py").write_text(
        "from dflash_doctor.checks.base import Severity, check\n"
        "@check('DFD999', 'new-rule', Severity.INFO)\n"
        "def new_rule(facts):\n"
        "    '''A new rule.'''\n"
        "    return []\n"
    )
    (pkg / "checks" / "zz_dead.py").write_text("X = 1\n")
    code = (
        "from dflash_doctor.checks import CATALOG, CHECK_MODULES\n"
        "registered = {c.func.__module__.rsplit('.', 1)[-1] for c in CATALOG.values()}\n"
        "print('DFD999' in CATALOG, sorted(set(CHECK_MODULES) - registered))\n"
    )
    got = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert got.stdout.split() == ["True", "['zz_dead']"], got.stderr[-600:]
