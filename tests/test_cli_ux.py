"""What a new user meets first: --version, refused bad input, the catalog and findings at 80
columns (CI logs), the exact fix command, and one rule for where check and gate write."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from dflash_doctor import __version__
from dflash_doctor.checks import CATALOG
from dflash_doctor.demo import demo_host
from dflash_doctor.pipeline import check_host
from dflash_doctor.render.terminal import render_terminal
from dflash_doctor.report import build_report
from tests.conftest import FIXTURE_HOSTS
from tests.test_readme import run


def test_version_option_and_command() -> None:
    p = run("--version")
    assert p.returncode == 0 and p.stdout.strip() == f"dflash-doctor {__version__}"
    assert run("version").stdout.strip() == __version__


@pytest.mark.parametrize(
    "args",
    [
        ("check", "--demo", "--sglang-version", "banana"),
        ("gate", "--sglang-version", "banana", "README.md"),
        ("fix", "--demo", "--sglang-version", "banana"),
    ],
)
def test_a_version_that_is_no_version_is_refused_in_one_line(args: tuple[str, ...]) -> None:
    p = run(*args, columns=40)
    assert p.returncode == 2
    assert p.stdout == ""
    assert p.stderr.splitlines() == [
        "dflash-doctor: error: --sglang-version 'banana': not a version (e.g. 0.5.13, 0.5.23)"
    ]


def test_catalog_is_not_truncated_at_80_columns() -> None:
    p = run("checks")
    assert p.returncode == 0
    assert "…" not in p.stdout and "..." not in p.stdout
    from dflash_doctor.checks import CATALOG

    flat = " ".join(p.stdout.split())
    for check in CATALOG.values():
        assert f"{check.id} {check.severity.value} {check.name}" in flat
        assert " ".join(check.summary.split()) in flat


def _render(report_hosts: list, width: int = 80) -> str:  # type: ignore[type-arg]
    buf = io.StringIO()
    render_terminal(build_report(report_hosts), Console(file=buf, width=width, color_system=None))
    return buf.getvalue()


@pytest.mark.parametrize("host", ["seed", "v0511", "v0513", "v0523"])
def test_findings_at_80_columns_keep_titles_and_places_whole(host: str) -> None:
    """Titles are not cut at the border, `file:line` is never folded mid-word, and impact
    rows are words (no snake_case keys)."""
    from dflash_doctor.hosts import load_recorded_host

    spec = demo_host() if host == "seed" else load_recorded_host(str(FIXTURE_HOSTS / host))
    report = check_host(spec)
    out = _render([report])
    lines = [ln.strip("│ ").rstrip() for ln in out.splitlines()]
    # Rows fit 80 columns, but a path longer than that stays whole on its own row.
    assert all(len(ln) <= 80 or " " not in ln.strip() for ln in out.splitlines())
    assert not [ln for ln in out.splitlines() if ln != ln.rstrip()]  # no padded rows
    assert "…" not in out
    flat = " ".join(" ".join(lines).split())
    for f in report.findings:
        assert f.title in flat, f.title  # whole, wrapped at words at most
        for e in f.evidence:
            if e.file is not None and len(e.file) < 70:
                where = f"{e.file}:{e.line}" if e.line is not None else e.file
                assert where in lines, where
        for key in f.impact:
            assert not re.search(rf"^\s*{re.escape(key)}:", out, flags=re.M) or " " in key


def test_check_names_the_exact_fix_command_and_it_runs() -> None:
    p = run("check", "--host-dir", str(FIXTURE_HOSTS / "v0523"), columns=200)
    want = f"dflash-doctor fix --host-dir {FIXTURE_HOSTS / 'v0523'} --apply"
    assert want in p.stdout
    # the same command without --apply is the dry run: it shows the diff of that file
    dry = run("fix", "--host-dir", str(FIXTURE_HOSTS / "v0523"), columns=200)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    launch = re.search(r"edits (\S+)", p.stdout)
    assert launch is not None and f"+++ b{launch.group(1).split(':')[0]}" in dry.stdout


def test_no_fix_command_when_nothing_is_automated() -> None:
    p = run("check", "--host-dir", str(FIXTURE_HOSTS / "tuned"), columns=200)
    assert p.returncode == 0 and "To fix:" not in p.stdout
    report = json.loads(run("check", "--demo", "--format", "json").stdout)
    assert report["hosts"][0]["fix_command"] == "dflash-doctor fix --demo --apply"
    assert report["hosts"][0]["fix_file"] == "/etc/sglang/launch.sh:8-22"  # the command


def test_check_and_gate_write_their_report_by_one_rule(tmp_path: Path) -> None:
    script = next((FIXTURE_HOSTS / "v0523").rglob("*.sh"))
    # The models the script names, from the recorded host's Hugging Face cache: a gate
    # without them cannot judge the launch (exit 2, tests/test_gate_inputs.py).
    hub = FIXTURE_HOSTS / "v0523/data/hf/hub"
    drafter = next((hub / "models--z-lab--Qwen3-4B-DFlash-b16").rglob("config.json")).parent
    target = next((hub / "models--Qwen--Qwen3-8B").rglob("config.json")).parent
    gate_args: tuple[str, ...] = ("gate", str(script), "--sglang-version", "0.5.23")
    gate_args += ("--drafter", str(drafter), "--target", str(target))
    for args in (("check", "--demo"), gate_args):
        # text + --output: the terminal report on stdout, JSON in the file
        out = tmp_path / "r.json"
        p = run(*args, "--output", str(out))
        assert "Evidence" in p.stdout and json.loads(out.read_text())["schema_version"] == 1
        # json, no --output: JSON on stdout
        p = run(*args, "--format", "json")
        assert json.loads(p.stdout)["schema_version"] == 1
        # json + --output: the file has it, stdout stays clean, the terminal report on stderr
        out.unlink()
        p = run(*args, "--format", "json", "--output", str(out))
        assert p.stdout == "" and "Evidence" in p.stderr
        assert json.loads(out.read_text())["schema_version"] == 1


def test_check_names_a_pending_relaunch_after_fix_wrote_the_file(tmp_path: Path) -> None:
    """`fix --apply` on a recorded host writes the launch file only; the recorded process
    still runs the old command. `check` then names the pending relaunch rather than telling
    the user to run `fix --apply`, which has nothing left to write (and says so)."""
    import shutil

    from tests.conftest import DEMO_HOST

    host = tmp_path / "seed"
    shutil.copytree(DEMO_HOST, host)
    before = run("check", "--host-dir", str(host), columns=200)
    assert "To fix: dflash-doctor fix --host-dir" in before.stdout
    assert "Pending relaunch" not in before.stdout
    applied = run("fix", "--host-dir", str(host), "--apply", "--yes", columns=200)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    after = run("check", "--host-dir", str(host), columns=200)
    assert after.returncode == 1  # the running server is still served wrong
    assert "To fix:" not in after.stdout
    assert (
        "Pending relaunch: /etc/sglang/launch.sh already has this change, but the running "
        "server (process 4242) was started before it" in after.stdout
    )
    assert "nothing to change" in run("fix", "--host-dir", str(host), columns=200).stdout
    report = json.loads(run("check", "--host-dir", str(host), "--format", "json").stdout)
    assert report["hosts"][0]["fix_command"] is None
    assert report["hosts"][0]["pending_relaunch"].startswith("/etc/sglang/launch.sh already")


def test_an_unreadable_fact_is_said_once() -> None:
    """The reason a fact could not be read is printed once (`could not read drafter: ...`);
    the checks it skips are listed together and point there, as does the option's note."""
    p = run("check", "--demo", "--drafter", "/nonexistent", columns=1000)
    assert p.returncode == 2
    lines = [ln for ln in p.stdout.splitlines() if "no such file or directory" in ln]
    assert len(lines) == 1 and lines[0].startswith("could not read drafter: ")
    skipped = [ln for ln in p.stdout.splitlines() if "needs drafter" in ln]
    assert len(skipped) == 1 and "DFD102, " in skipped[0] and "DFD131" in skipped[0]
    # every SGLang check that needs the drafter, and only those, in one line (the vLLM
    # checks do not apply to this SGLang host: they are listed as not applicable first)
    needing = sorted(i for i, c in CATALOG.items() if "drafter" in c.needs and c.engine == "sglang")
    assert skipped[0].startswith(f"could not judge ({len(needing)}): DFD102, ")
    assert skipped[0].split(": ")[1].split(", ") == needing
    assert skipped[0].endswith("needs drafter (could not read drafter, above)")
    assert "--drafter /nonexistent could not be read (see drafter above)" in p.stdout
    # the JSON report keeps every result's own reason
    report = json.loads(
        run("check", "--demo", "--drafter", "/nonexistent", "--format", "json").stdout
    )
    reasons = [r["reason"] for r in report["hosts"][0]["results"] if r["check_id"] == "DFD102"]
    assert reasons[0].startswith("needs drafter: ") and "no such file" in reasons[0]


def test_long_paths_are_never_broken_and_rows_never_padded(tmp_path: Path) -> None:
    """A path in a line stays whole however narrow the terminal (rich would fold it
    mid-word), rows end without spaces, and a gate's host line says the file once."""
    import shutil

    deep = tmp_path / ("d" * 30) / ("e" * 30)
    shutil.copytree(FIXTURE_HOSTS.parent / "checks/DFD111/clean", deep)
    shutil.copytree(FIXTURE_HOSTS.parent / "checks/_shared/kimi-k2.6", deep / "target")
    launch, missing = deep / "launch.sh", deep / "no-such-drafter-directory"
    p = run(
        "gate", str(launch), "--sglang-version", "0.5.23", "--target", str(deep / "target"),
        "--drafter", str(missing), columns=60,
    )  # fmt: skip
    assert p.returncode == 2, p.stdout + p.stderr  # the --drafter given could not be read
    out = p.stdout
    assert len(f"{missing}/config.json:") > 60
    assert f"{missing}/config.json:" in out.split()  # whole, as one word
    # the host (the rule's line names it) is not said again before the path
    assert f"could not read drafter: {missing}/config.json:" in " ".join(out.split())
    assert not [ln for ln in out.splitlines() if ln != ln.rstrip()]
    assert all(len(ln) <= 60 or " " not in ln.strip() for ln in out.splitlines())
    # the host line: the launch file (the gate's host name) once, then its version
    assert out.splitlines()[1:3] == [str(launch), "SGLang 0.5.23"]
