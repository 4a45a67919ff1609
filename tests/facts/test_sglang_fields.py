"""The one table of SGLang's fields (facts/sglang_args.SGLANG_FIELDS) and what derives from it."""

from __future__ import annotations

import ast

from dflash_doctor.checks.launch_file_not_what_runs import COMPARED, WINDOW_KEYS
from dflash_doctor.facts import sglang_options as so
from dflash_doctor.facts.launch import FLAG_BY_NAME, LAUNCH_FIELDS
from dflash_doctor.facts.models import LaunchArgs
from dflash_doctor.facts.server_log import SERVER_ARGS_KEYS
from dflash_doctor.on_host.sglang_args import KEYS, SGLANG_FIELDS
from dflash_doctor.sglang_versions import WINDOW_FLAGS
from dflash_doctor.shipped import script_source
from tests.conftest import REPO


def test_each_row_names_a_real_option_and_its_dest() -> None:
    """Every flag is an option of some release whose dest is the row's key (or, for the
    releases that renamed a dest, of the row that fills the same field)."""
    for key, row in SGLANG_FIELDS.items():
        dests = {
            so.option_map(release)[row.flag].dest
            for release in so.releases()
            if row.flag in so.option_map(release)
        }
        assert key in dests, (key, row.flag, dests)


def test_the_fallback_parser_fills_the_same_field() -> None:
    for key, row in SGLANG_FIELDS.items():
        if row.field is not None:
            assert FLAG_BY_NAME[row.flag].dest == row.field, key
            assert row.field in LaunchArgs.model_fields, key


def test_derived_tables() -> None:
    assert tuple(SGLANG_FIELDS) == KEYS
    assert {k: r.field for k, r in SGLANG_FIELDS.items() if r.field} == LAUNCH_FIELDS
    assert {k for k, r in SGLANG_FIELDS.items() if r.logged} == SERVER_ARGS_KEYS
    assert {"speculative_draft_window_size", "tp_size"} <= SERVER_ARGS_KEYS
    assert [c[0] for c in COMPARED] == [k for k, r in SGLANG_FIELDS.items() if r.compared]
    assert all(field in LaunchArgs.model_fields for _, field, _ in COMPARED)
    assert WINDOW_KEYS == ("speculative_draft_window_size", "speculative_dflash_draft_window_size")
    assert {SGLANG_FIELDS[k].flag for k in WINDOW_KEYS} == set(WINDOW_FLAGS)


def field_name_copies(source: str) -> list[int]:
    """Lines of literal collections naming three or more of the table's keys (directly, or
    as the first item of each row of a tuple table): copies that drift from the table."""
    names = set(SGLANG_FIELDS)
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Tuple | ast.List | ast.Set | ast.Dict):
            continue
        items = node.keys if isinstance(node, ast.Dict) else node.elts
        heads = [e.elts[0] if isinstance(e, ast.Tuple) and e.elts else e for e in items]
        found = {e.value for e in heads if isinstance(e, ast.Constant) and e.value in names}
        if len(found) >= 3:
            lines.append(node.lineno)
    return lines


def test_copy_scanner_finds_the_shapes_of_the_old_copies() -> None:
    assert field_name_copies("K = frozenset({'page_size', 'tp_size', 'model_path'})") == [1]
    assert field_name_copies("M = {'page_size': 'a', 'tp_size': 'b', 'model_path': 'c'}") == [1]
    rows = "C = (('page_size', 'p', '--p'), ('tp_size', 't', '--t'), ('model_path', 'm', '--m'))"
    assert field_name_copies(rows) == [1]
    assert field_name_copies("X = ('page_size', 'tp_size', 'other')") == []


def test_no_other_module_keeps_a_copy_of_the_field_names() -> None:
    copies = [
        f"{path.relative_to(REPO)}:{line}"
        for path in sorted((REPO / "dflash_doctor").rglob("*.py"))
        if "demo_hosts" not in path.parts and path.name != "sglang_args.py"
        for line in field_name_copies(path.read_text())
    ]
    assert copies == [], "derive these from facts/sglang_args.SGLANG_FIELDS"


def test_the_shipped_script_is_still_self_contained() -> None:
    tree = ast.parse(script_source("on_host/sglang_args.py"))
    imported = {
        (n.module or "") if isinstance(n, ast.ImportFrom) else a.name
        for n in ast.walk(tree)
        if isinstance(n, ast.Import | ast.ImportFrom)
        for a in n.names
    }
    assert not any(name.startswith("dflash_doctor") for name in imported), imported
