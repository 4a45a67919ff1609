"""Every live check has a `fires` and a `clean` fixture, run through the real CLI.

`fixtures/checks/<ID>/{fires,clean}/` holds one case each (fixtures/checks/README.md):
a `gate.args` file (the `dflash-doctor gate` arguments, paths relative to the case folder)
with the launch files and model configs it names, or a recorded host tree (`host.yaml`)
for checks that need what only a host shows (its log, GPUs, the server's environment).
The case runs through the command a user types, with `--select ID --format json`:
Checks on what the running server answers over HTTP (`/server_info`) have a third kind:
`live.yaml` starts the stand-in SGLang (fixtures/fake_sglang) with the given flags and
environment (`env`; from a venv holding `sglang-X.dist-info` when it names an
`installed_version`), may change its state through `/set_internal_state`, and runs
`check local --pid PID` on it; `engine: vllm` starts the stand-in vLLM (fixtures/fake_vllm)
instead and sends it `completions` first.
`fires` must report the check failed with a finding of that id, `clean` must report it
passed: not skipped, since a skipped check proves nothing about being clean.

Adding a check is its module plus these two folders; the test discovers them.
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from dflash_doctor.checks import CATALOG
from dflash_doctor.cli import app
from fixtures.sshd import free_port
from tests.conftest import REPO

CASES_ROOT = REPO / "fixtures" / "checks"
# model configs several cases use as they are: a case names `../../_shared/NAME` in its
# `gate.args` or `live.yaml` instead of holding a copy (fixtures/checks/README.md)
SHARED = CASES_ROOT / "_shared"
FAKE_SGLANG = REPO / "fixtures" / "fake_sglang"
FAKE_VLLM = REPO / "fixtures" / "fake_vllm"
KINDS = ("fires", "clean")


def gate_args(case: Path) -> list[str]:
    """The arguments in `gate.args`: words split as a shell would, never run by one."""
    return shlex.split((case / "gate.args").read_text(), comments=True)


def filled(words: list[Any], case: Path, port: int) -> list[str]:
    return [str(w).replace("{case}", str(case)).replace("{port}", str(port)) for w in words]


def answers(url: str, body: bytes | None = None) -> bool:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=body), timeout=2) as r:
            status: int = r.status
            return 200 <= status < 300
    except OSError:
        return False


def installed_python(venv: Path, version: str) -> str:
    """A real venv whose site-packages holds `sglang-VERSION.dist-info`, as after a `pip
    install` of that release: the server started from it runs the stand-in of the
    `sglang_version` it was started as, so the installed and the running release differ."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (site,) = (venv / "lib").glob("python3*/site-packages")
    info = site / f"sglang-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: sglang\nVersion: {version}\n")
    return str(venv / "bin" / "python3")


@contextlib.contextmanager
def stand_in(case: Path, log: Path) -> Iterator[list[str]]:
    """Start the stand-in server a `live.yaml` describes; yield the `check` arguments for it."""
    spec = yaml.safe_load((case / "live.yaml").read_text())
    port = free_port()
    # `engine: vllm` starts the stand-in vLLM (fixtures/fake_vllm) of `vllm_version`.
    vllm = spec.get("engine") == "vllm"
    fake, module = (FAKE_VLLM, "vllm.entrypoints.openai.api_server") if vllm else (
        FAKE_SGLANG, "sglang.launch_server")  # fmt: skip
    release = ("FAKE_VLLM_VERSION", spec["vllm_version"]) if vllm else (
        "FAKE_SGLANG_VERSION", spec["sglang_version"])  # fmt: skip
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(fake),
        release[0]: str(release[1]),
        # the server process's own environment, as a unit or a shell would give it
        **{str(k): str(v) for k, v in (spec.get("env") or {}).items()},
    }
    python = sys.executable
    if "installed_version" in spec:
        python = installed_python(log.parent / "venv", str(spec["installed_version"]))
    with log.open("wb") as out:
        server = subprocess.Popen(
            [python, "-m", module, *filled(spec["serve"], case, port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=case,
        )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60  # generous: the machine may be loaded
        while not answers(f"{url}/health"):
            assert server.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        if "set_internal_state" in spec:
            body = json.dumps({"server_args": spec["set_internal_state"]}).encode()
            assert answers(f"{url}/set_internal_state", body), log.read_text()
        for completion in spec.get("completions") or []:  # traffic for the live counters
            assert answers(f"{url}/v1/completions", json.dumps(completion).encode()), (
                log.read_text()
            )
        extra = filled(spec.get("check", []), case, port)
        yield ["check", "local", "--pid", str(server.pid), *extra]
    finally:
        server.terminate()
        server.wait(timeout=30)


@contextlib.contextmanager
def command(case: Path, home: Path) -> Iterator[list[str]]:
    if (case / "gate.args").is_file():
        yield ["gate", *gate_args(case)]
    elif (case / "host.yaml").is_file():
        yield ["check", "--host-dir", str(case)]
    elif (case / "live.yaml").is_file():
        with stand_in(case, home / "server.log") as args:
            yield args
    else:
        raise AssertionError(f"{case}: no gate.args, host.yaml or live.yaml")


def run_case(
    check_id: str, case: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    # gate resolves its file arguments from the working directory, as in a repository's CI;
    # an empty HOME and HF cache keep this machine's own models out of every case.
    monkeypatch.chdir(case)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("HF_HOME", str(home / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    tail = ["--select", check_id, "--format", "json", "--fail-on", "info"]
    with command(case, home) as args:
        result = CliRunner().invoke(app, [*args, *tail])
    assert result.exit_code in (0, 1), f"{case}: exit {result.exit_code}\n{result.output}"
    report: dict[str, Any] = json.loads(result.stdout)
    (host,) = report["hosts"]
    (checked,) = [r for r in host["results"] if r["check_id"] == check_id]
    return checked  # type: ignore[no-any-return]


def case_folders() -> list[Path]:
    """The per-check folders: every folder but `_shared`."""
    return sorted(p for p in CASES_ROOT.iterdir() if p.is_dir() and p != SHARED)


def cases() -> list[Any]:
    found = []
    for folder in case_folders():
        found += [
            pytest.param(folder.name, kind, id=f"{folder.name}-{kind}")
            for kind in KINDS
            if (folder / kind).is_dir()
        ]
    return found


@pytest.mark.parametrize(("check_id", "kind"), cases())
def test_check_fixture(
    check_id: str, kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checked = run_case(check_id, CASES_ROOT / check_id / kind, tmp_path, monkeypatch)
    said = checked["reason"] or [f"{f['title']}: {f['message']}" for f in checked["findings"]]
    if kind == "fires":
        assert checked["status"] == "failed", said
        assert {f["check_id"] for f in checked["findings"]} == {check_id}
    else:
        assert checked["status"] == "passed", said
        assert checked["findings"] == []


def test_every_check_has_a_fires_and_a_clean_fixture() -> None:
    missing = [
        f"{check_id}/{kind}"
        for check_id in CATALOG
        for kind in KINDS
        if not (CASES_ROOT / check_id / kind).is_dir()
    ]
    assert not missing, f"checks without fixtures under fixtures/checks: {missing}"


def test_no_fixture_folder_outlives_its_check() -> None:
    folders = {p.name for p in case_folders()}
    assert folders <= set(CATALOG), f"not checks of the catalog: {sorted(folders - set(CATALOG))}"
    for folder in folders:
        extra = {p.name for p in (CASES_ROOT / folder).iterdir()} - set(KINDS)
        assert not extra, f"fixtures/checks/{folder}: unexpected {sorted(extra)}"


def test_every_shared_config_is_named_by_a_case() -> None:
    named = {
        name
        for folder in case_folders()
        for spec in folder.glob("*/*")
        if spec.name in ("gate.args", "live.yaml")
        for name in re.findall(r"\.\./\.\./_shared/([\w.-]+)", spec.read_text())
    }
    shared = {p.name for p in SHARED.iterdir()}
    unused, missing = sorted(shared - named), sorted(named - shared)
    assert not unused and not missing, f"_shared: unused {unused}, missing {missing}"
    assert all((SHARED / name / "config.json").is_file() for name in shared)


def test_the_running_release_judges_the_window_not_the_installed_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 21 item 4, end to end: the stand-in runs 0.5.13 (every draft layer full:
    models/dflash.py 0.5.13:116-122) while 0.5.14 (honours layer_types, 0.5.14:44-66) is
    installed beside its Python. The sliding drafter is served wider than trained now, so
    DFD103 fires, judged by the running release; DFD112 names the drift."""
    checked = run_case("DFD103", CASES_ROOT / "DFD112" / "fires", tmp_path, monkeypatch)
    assert checked["status"] == "failed", checked["reason"]
    (finding,) = checked["findings"]
    assert "as the running server reports it" in finding["message"], finding["message"]
    assert "0.5.14 is installed but not running" in finding["message"]
