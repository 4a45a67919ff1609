"""The files that run on hosts run under the oldest Python each must serve.

`ast.parse(..., feature_version=(3, 8))` (tests/transport/test_prefetch.py) checks only the
grammar: `zip(..., strict=True)` parses on 3.8 and dies there at run time. vermin knows the
stdlib's per-version API (keyword arguments included) and runs on every machine; where a
real interpreter of the floor's version is installed (pyenv on the project's machines), the
log filter runs under it too, on a log long enough to take its compaction path, and the
bundle gathers recorded hosts under it with the answer this interpreter gives. Every module
of on_host/ is on HOST_SCRIPTS, so none escapes these runs.
"""

from __future__ import annotations

import ast
import glob
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dflash_doctor import shipped
from dflash_doctor.on_host import log_filter

PACKAGE = Path(shipped.__file__).parent


def _vermin(target: tuple[int, int], files: list[str]) -> subprocess.CompletedProcess[str]:
    code = "import sys; from vermin.main import main; sys.exit(main())"
    argv = [sys.executable, "-c", code, f"-t={target[0]}.{target[1]}-", "--no-tips"]
    return subprocess.run(
        [*argv, "--violations", "-q", *files], capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("floor", sorted(set(shipped.HOST_SCRIPTS.values())))
def test_host_scripts_need_no_newer_python_than_their_floor(floor: tuple[int, int]) -> None:
    files = [str(PACKAGE / p) for p, f in shipped.HOST_SCRIPTS.items() if f == floor]
    got = _vermin(floor, files)
    assert got.returncode == 0, got.stdout + got.stderr


def test_vermin_finds_a_runtime_only_feature(tmp_path: Path) -> None:
    """The check above can fail: a 3.10 keyword that 3.8's grammar accepts is found."""
    bad = tmp_path / "bad.py"
    bad.write_text("pairs = list(zip([1], [2], strict=True))\n")
    got = _vermin((3, 8), [str(bad)])
    assert got.returncode != 0 and "zip(strict)" in got.stdout


def test_every_shipped_script_is_listed() -> None:
    """Whatever the package reads with script_source() is in HOST_SCRIPTS (else it raises)."""
    called = set()
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        called |= set(re.findall(r'script_source\(\s*"([^"]+)"', text))
    for name in ("LOG_FILTER_SCRIPT", "LOG_FILTER", "BUNDLE_SCRIPT"):
        for path in PACKAGE.rglob("*.py"):
            m = re.search(rf'^{name} = "([^"]+)"', path.read_text(encoding="utf-8"), re.M)
            if m:
                called.add(m.group(1))
    from dflash_doctor.prefetch_plan import BUNDLE_MODULES

    called |= set(BUNDLE_MODULES.values())
    assert called and called <= set(shipped.HOST_SCRIPTS), called - set(shipped.HOST_SCRIPTS)
    with pytest.raises(KeyError):
        shipped.script_source("cli.py")


def test_host_scripts_are_the_on_host_package() -> None:
    """HOST_SCRIPTS is the one list: every module in on_host/ is on it (so it runs under its
    floor below), and nothing on it lives elsewhere."""
    package = PACKAGE / "on_host"
    found = {f"on_host/{p.name}" for p in package.glob("*.py") if p.name != "__init__.py"}
    assert found == set(shipped.HOST_SCRIPTS), (
        f"in on_host/ but not in HOST_SCRIPTS: {sorted(found - set(shipped.HOST_SCRIPTS))}; "
        f"in HOST_SCRIPTS but not in on_host/: {sorted(set(shipped.HOST_SCRIPTS) - found)}"
    )
    assert not [p for p in package.iterdir() if p.is_dir() and p.name != "__pycache__"]
    # Shipped as text and run alone: none may import the package (nor a sibling).
    for script in sorted(found):
        tree = ast.parse((PACKAGE / script).read_text(encoding="utf-8"))
        names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        froms = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        names += ["." if n.level else str(n.module) for n in froms]
        assert not [n for n in names if n.startswith(("dflash_doctor", "."))], script


def _interpreter(version: tuple[int, int]) -> str | None:
    name = f"python{version[0]}.{version[1]}"
    pyenv = sorted(glob.glob(str(Path.home() / f".pyenv/versions/{version[0]}.{version[1]}.*")))
    for candidate in [*(f"{p}/bin/{name}" for p in pyenv), shutil.which(name)]:
        if candidate and Path(candidate).is_file():
            return candidate
    return None


def test_log_filter_compacts_its_series_under_python_3_8(tmp_path: Path) -> None:
    """More decode lines than MAX_SERIES points hold: the series halves (the path that used
    `zip(strict=True)`), and 3.8's records equal this interpreter's."""
    python = _interpreter(shipped.HOST_SCRIPTS["on_host/log_filter.py"])
    if python is None:
        pytest.skip("no Python 3.8 interpreter here (vermin above still checks the floor)")
    line = (
        "[2026-11-30 10:00:00 TP0] Decode batch, #running-req: 1, #token: 9, token usage: "
        "0.10, accept len: 3.00, accept rate: 0.20, cuda graph: True, gen throughput "
        "(token/s): 9.00, #queue-req: 0\n"
    )
    log = tmp_path / "server.log"
    log.write_text("x server_args=ServerArgs(speculative_algorithm='DFLASH')\n" + line * 2000)
    argv = [str(PACKAGE / "on_host/log_filter.py"), str(log)]
    old = subprocess.run([python, "-I", *argv], capture_output=True, timeout=120)
    new = subprocess.run([sys.executable, "-I", *argv], capture_output=True, timeout=120)
    assert old.returncode == 0, old.stderr.decode(errors="replace")[-800:]
    assert old.stdout == new.stdout
    points = [r for r in old.stdout.splitlines() if r.startswith(b"P\t")]
    assert 0 < len(points) < log_filter.MAX_SERIES < 2000


@pytest.mark.parametrize("script", sorted(shipped.HOST_SCRIPTS))
def test_host_script_module_code_runs_under_its_floor(script: str) -> None:
    """Each file's module-level code (imports, aliases evaluated at import, constants) runs
    under a real interpreter of its floor: what vermin cannot see (`Callable[...]` from
    collections.abc, subscripted at import, fails only when run)."""
    python = _interpreter(shipped.HOST_SCRIPTS[script])
    if python is None:
        pytest.skip("no interpreter of this floor here (vermin above still checks it)")
    code = (
        "import sys; p = sys.argv[1]; "
        "exec(compile(open(p).read(), p, 'exec'), {'__name__': 'host_module'})"
    )
    got = subprocess.run(
        [python, "-I", "-c", code, str(PACKAGE / script)], capture_output=True, timeout=60
    )
    err = got.stderr.decode(errors="replace")
    if got.returncode and "No module named 'torch'" in err:
        pytest.skip("the probe imports torch at module level; no torch for this interpreter")
    assert got.returncode == 0, err[-800:]


@pytest.mark.parametrize("tree", ["demo", "v0523"])
def test_the_bundle_answers_alike_under_its_floor(tree: str) -> None:
    """The whole bundle (not only its module code) over a recorded host, under a real
    interpreter of its floor: its config, the finders' plan included, arrives as JSON, and
    the answer is byte for byte this interpreter's (timings and the interpreter aside)."""
    from dflash_doctor.hosts import load_recorded_host
    from dflash_doctor.pipeline import open_transport
    from dflash_doctor.prefetch_plan import bundle_config
    from dflash_doctor.transport.recorded import RecordedTransport
    from tests.conftest import DEMO_HOST, FIXTURE_HOSTS

    python = _interpreter(shipped.HOST_SCRIPTS["on_host/bundle_script.py"])
    if python is None:
        pytest.skip("no interpreter of this floor here (vermin above still checks it)")
    spec = load_recorded_host(str(DEMO_HOST if tree == "demo" else FIXTURE_HOSTS / tree))
    transport = open_transport(spec)
    assert isinstance(transport, RecordedTransport)
    config = transport.bundle_settings(bundle_config(spec))
    argv = [str(PACKAGE / "on_host/bundle_script.py"), json.dumps(config)]
    answers = []
    for interpreter in (python, sys.executable):
        got = subprocess.run([interpreter, "-I", "-S", *argv], capture_output=True, timeout=120)
        assert got.returncode == 0, got.stderr.decode(errors="replace")[-800:]
        answer = json.loads(got.stdout)
        for key in ("python", "seconds"):
            answer.pop(key)
        for run in answer["runs"]:
            run.pop("seconds", None)
        answers.append(answer)
    assert answers[0]["files"] and answers[0] == answers[1]
