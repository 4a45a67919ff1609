"""No new function over 60 lines in the package; the allow-list of today's only shrinks."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from tests.conftest import REPO


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "long_functions", REPO / "scripts" / "long_functions.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_new_long_function_and_no_stale_entry() -> None:
    script = _script()
    new, stale = script.compare(script.long_functions(), script.read_allowed())
    assert not new, f"split these (at most 60 lines a function): {new}"
    assert not stale, (
        f"no longer over 60 lines: {stale}: run python3 scripts/long_functions.py --write"
    )


def test_scan_measures_methods_nested_functions_and_skips_short_ones(tmp_path: Path) -> None:
    script = _script()
    package = tmp_path / "pkg"
    package.mkdir()

    def lines(indent: str, n: int) -> str:
        return "".join(f"{indent}x{i} = {i}\n" for i in range(n))

    (package / "m.py").write_text(
        "def short():\n    return 1\n\n"
        + "def exactly_sixty():\n"
        + lines("    ", 59)
        + "\nclass C:\n    def long(self):\n"
        + lines("        ", 60)
        + "        def inner():\n"
        + lines("            ", 61)
    )
    found = script.long_functions(package)
    assert found == {"pkg/m.py::C.long": 122, "pkg/m.py::C.long.inner": 61}


def test_a_signature_and_docstring_do_not_count_a_body_does(tmp_path: Path) -> None:
    # A command's parameters are its options: 70 of them and a short body is not long.
    script = _script()
    package = tmp_path / "pkg"
    package.mkdir()
    params = "".join(f"    p{i}: int = {i},\n" for i in range(70))
    doc = '    """Doc.\n' + "\n" * 70 + '    """\n'
    (package / "m.py").write_text(
        f"def command(\n{params}) -> None:\n{doc}    return None\n\n"
        + "def long():\n"
        + doc
        + "    # a comment is code's\n"
        + "".join(f"    x{i} = {i}\n" for i in range(60))
    )
    assert script.long_functions(package) == {"pkg/m.py::long": 61}


def test_compare_reports_new_and_stale(tmp_path: Path) -> None:
    script = _script()
    found = {"a.py::f": 70, "a.py::g": 61}
    assert script.compare(found, {"a.py::f", "a.py::gone"}) == (
        ["a.py::g (61 lines)"],
        ["a.py::gone"],
    )
    allowed = tmp_path / "allowed.txt"
    script.write_allowed(found, allowed)
    assert script.read_allowed(allowed) == set(found)
