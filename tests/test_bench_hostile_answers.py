"""Issue 22: `bench` on answers it cannot measure (a server without speculation, huge
numbers) ends in one clear line with a documented exit code, and no control character
from a host (a bench error body, a merged report's fix hint) reaches the terminal."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest
from rich.console import Console

from dflash_doctor.bench.cell_ops import add_repeat
from dflash_doctor.bench.run import _require_speculation
from dflash_doctor.errors import UsageError
from dflash_doctor.facts.bench_stats import cell_interval
from dflash_doctor.facts.models import BenchCell, BenchResult
from dflash_doctor.on_host.server_http import request_row
from dflash_doctor.render.bench import render_bench
from tests.conftest import DEMO_HOST, REPO

ESC = "\x1b]0;owned\x07\x1b[2J"


def _cell(meta: Mapping[str, object], wall: object = 1.0) -> BenchCell:
    cell = BenchCell(context=1024, concurrency=2, temperature=0.0, max_new_tokens=32)
    for repeat in range(2):
        rows = [
            request_row(dict(meta), 0.5),
            request_row(dict(meta), 0.6),
        ]  # the host client's own rows
        add_repeat(cell, {"wall_s": wall, "requests": rows}, repeat)
    return cell


def _result(cells: list[BenchCell], notes: list[str] | None = None) -> BenchResult:
    return BenchResult(
        host="h", sglang_version="0.5.23", window=None, seed="1", vocab=100, contexts=[1024],
        concurrency=[2], temperatures=[0.0], max_new_tokens=32, prompts=["x"], repeats=2,
        tokens_sent=10, cells=cells, notes=notes or [],
    )  # fmt: skip


def test_a_server_without_speculation_is_one_line() -> None:
    # SGLang's meta_info without a drafter (tokenizer_manager.py 0.5.23:3149-3172 sets no
    # spec_* key): the stand-in's plain_meta shape.
    plain = {"prompt_tokens": 10, "completion_tokens": 32, "cached_tokens": 0, "e2e_latency": 0.1}
    with pytest.raises(UsageError, match=r"without speculative fields .*--speculative-algorithm"):
        _require_speculation("h", ("127.0.0.1", 30000), [_cell(plain)])
    spec = {**plain, "spec_verify_ct": 8, "spec_accept_length": 4.0}
    _require_speculation("h", ("127.0.0.1", 30000), [_cell(spec)])  # measured: goes on


def test_huge_numbers_are_malformed_rows_not_overflows() -> None:
    huge = {"completion_tokens": 10**400, "spec_verify_ct": 10**30, "spec_accept_length": 1e308}
    cell = _cell(huge, wall=10**400)
    assert all(r.error == "malformed answer" for r in cell.requests)
    assert cell.repeat_wall_s == [0.0, 0.0]
    assert cell_interval(cell) is None
    out = io.StringIO()
    render_bench(_result([cell]), Console(file=out, width=100))
    assert "fail" in out.getvalue()


def test_bench_error_bodies_reach_the_terminal_clean() -> None:
    cell = BenchCell(context=1024, concurrency=1, temperature=0.0, max_new_tokens=8)
    add_repeat(cell, {"error": f"/generate: HTTP 500 {ESC}"}, 0)
    out = io.StringIO()
    result = _result([cell], notes=[f"cell 1024x1: {ESC}"])
    render_bench(result, Console(file=out, width=100, force_terminal=False))
    assert "\x1b" not in out.getvalue() and "\x07" not in out.getvalue()


def test_report_merge_fix_hints_reach_the_terminal_clean(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    run = [sys.executable, "-m", "dflash_doctor"]
    p = subprocess.run(
        [*run, "check", "--host-dir", str(DEMO_HOST), "--format", "json"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    doc = json.loads(p.stdout)
    host = doc["hosts"][0]
    host["fix_command"] = f"dflash-doctor fix {ESC}--apply"
    host["fix_file"] = f"/etc/{ESC}launch.sh"
    host["pending_relaunch"] = f"relaunch {ESC}"
    host["results"][0]["check_id"] = f"DFD1{ESC}"
    (tmp_path / "a.json").write_text(json.dumps(doc))
    # the streamed one-line-per-host report, and the per-host detail (--hosts) with the hint
    for extra in ([], ["--hosts"]):
        p = subprocess.run(
            [*run, "report", "merge", str(tmp_path / "a.json"), *extra],
            capture_output=True, text=True, env=env, timeout=120,
        )  # fmt: skip
        if extra:
            assert "To fix: dflash-doctor fix" in p.stdout, p.stdout + p.stderr
        assert "\x1b" not in p.stdout + p.stderr and "\x07" not in p.stdout, extra
