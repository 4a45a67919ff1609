from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dflash_doctor import pipeline
from dflash_doctor.gather import gather
from dflash_doctor.hosts import HostSpec, load_recorded_host
from dflash_doctor.pipeline import check_host
from dflash_doctor.transport.open import open_transport
from tests.conftest import DEMO_HOST, FIXTURE_HOSTS
from tests.fakes import FakeHost, fails


def gather_dir(path: Path, **over: object):  # type: ignore[no-untyped-def]
    spec = load_recorded_host(str(path)).model_copy(update=over)
    return gather(spec, open_transport(spec))


@pytest.fixture
def seed_copy(tmp_path: Path) -> Path:
    dst = tmp_path / "seed"
    shutil.copytree(DEMO_HOST, dst)
    return dst


def test_seed_facts() -> None:
    f = gather_dir(DEMO_HOST)
    assert f.sglang_version.value == "0.5.13"
    assert f.sglang_version.source and f.sglang_version.source.endswith("sglang-0.5.13.dist-info")
    # the installed srt/models/dflash.py beside the dist-info is read (never imported): the
    # 0.5.13 file never reads layer_types (dflash.py 0.5.13:116-122)
    code = f.sglang_code.value
    assert code is not None and not code.honours_layer_types
    assert code.path.endswith("site-packages/sglang/srt/models/dflash.py")
    assert f.gpus.value is not None and len(f.gpus.value) == 8
    assert f.launch.value is not None and f.launch.value.source == "process 4242"
    assert (
        f.drafter.value is not None
        and f.drafter.value.path == "/models/Kimi-K2.6-DFlash/config.json"
    )
    # the target was found in the HF cache through HF_HOME from the process environment
    assert (
        f.target.value is not None
        and "models--moonshotai--Kimi-K2.6/snapshots" in f.target.value.path
    )
    assert f.log.value is not None and f.log.value.dflash_init is not None


def test_no_secret_from_environ_or_cmdline_reaches_facts() -> None:
    dumped = gather_dir(DEMO_HOST).model_dump_json()
    assert "hf_FAKE" not in dumped and "sk-fixture" not in dumped


def test_launch_file_used_without_process() -> None:
    f = gather_dir(FIXTURE_HOSTS / "v0513")
    assert f.launch.value is not None and f.launch.value.kind == "systemd"
    assert f.drafter.value is not None and f.drafter.value.num_hidden_layers == 5


@pytest.mark.parametrize(
    ("rel", "data", "fact", "message"),
    [
        (
            "models/Kimi-K2.6-DFlash/config.json",
            b'{"num_hidden_layers": 6,',
            "drafter",
            "malformed JSON",
        ),
        ("models/Kimi-K2.6-DFlash/config.json", b"\x00\x01\x02\xff", "drafter", "not UTF-8"),
        (
            "models/Kimi-K2.6-DFlash/config.json",
            b'{"hidden_size": 1}',
            "drafter",
            "missing required key",
        ),
        (
            "proc/4242/cmdline",
            b"python\x00-m\x00sglang.launch_server\x00--tp-size\x00",
            "launch",
            "expected one argument",
        ),
        (
            "opt/sglang/venv/lib/python3.11/site-packages/sglang-0.5.13.dist-info",
            None,
            "sglang_version",
            "SGLang version not found",
        ),
        ("_captured/nvidia-smi.csv", b"garbage\n", "gpus", "unexpected nvidia-smi row"),
    ],
)
def test_hostile_files_name_host_and_file(
    seed_copy: Path, rel: str, data: bytes | None, fact: str, message: str
) -> None:
    target = seed_copy / rel
    if data is None:
        shutil.rmtree(target)
    else:
        target.write_bytes(data)
    f = gather_dir(seed_copy)
    got = getattr(f, fact)
    assert got.value is None
    assert message in (got.error or "")
    assert (got.error or "").startswith("seed")  # names the host ...
    if fact in ("drafter", "gpus", "launch"):
        assert rel.split("/")[-1] in (got.error or "")  # ... and the file


def test_binary_log_still_gathers(seed_copy: Path) -> None:
    log = seed_copy / "var/log/sglang/server.log"
    log.write_bytes(b"\xff\x00" * 50000 + log.read_bytes() + b"\x00\x01tail")
    f = gather_dir(seed_copy)
    assert f.log.value is not None and f.log.value.dflash_init is not None


def test_missing_log_is_a_reason_not_a_crash(seed_copy: Path) -> None:
    (seed_copy / "var/log/sglang/server.log").unlink()
    report = check_host(load_recorded_host(str(seed_copy)))
    assert any("server.log" in e for e in report.fact_errors)
    # DFD103 still runs on the launch facts
    dfd103 = next(r for r in report.results if r.check_id == "DFD103")
    assert dfd103.status == "failed"


def test_missing_drafter_skips_checks_that_need_it(seed_copy: Path) -> None:
    shutil.rmtree(seed_copy / "models")
    report = check_host(load_recorded_host(str(seed_copy)))
    dfd103 = next(r for r in report.results if r.check_id == "DFD103")
    assert dfd103.status == "skipped" and "config.json" in (dfd103.reason or "")


def test_hf_repo_not_in_cache(seed_copy: Path) -> None:
    shutil.rmtree(seed_copy / "data/hf/hub/models--moonshotai--Kimi-K2.6")
    f = gather_dir(seed_copy)
    assert "not in the Hugging Face cache" in (f.target.error or "")


def test_declared_version_overrides_and_is_validated() -> None:
    declared = gather_dir(DEMO_HOST, sglang_version="0.5.23")
    assert declared.sglang_version.value == "0.5.23"
    # the installed dflash.py (0.5.13's, dflash.py 0.5.13:116-122) still decides behaviour
    assert declared.sglang_code.value is not None
    assert not declared.sglang_code.value.honours_layer_types
    bad = gather_dir(DEMO_HOST, sglang_version="latest")
    assert "not a version" in (bad.sglang_version.error or "")


def test_live_local_host_without_server(monkeypatch: pytest.MonkeyPatch) -> None:
    # A live local host that runs no SGLang server: every fact is a reason, nothing crashes.
    # The host is the fake one (its process table empty, no GPUs, no launch file), not this
    # machine, whose own SGLang processes (an inference host's) would change the answer.
    host = FakeHost(host="local", remote=False, kind="local", commands={("pgrep",): fails()})
    monkeypatch.setattr(pipeline, "open_transport", lambda spec, ssh=None: host)
    report = check_host(HostSpec.of(name="local"))
    assert report.reachable, report.error
    assert report.results and all(r.status == "skipped" for r in report.results)
    assert any("launch" in e for e in report.fact_errors)
    assert any(q.startswith("run pgrep") for q in host.asked)  # the server was looked for


def test_recorded_host_spec_errors(tmp_path: Path) -> None:
    """A bad host.yaml is that host's one-line error (issue 10 item 5), not the run's."""
    for text, why in (
        ("launch_file: [unclosed\n", "cannot read host settings"),
        ("no_such_setting: 1\n", "no_such_setting"),
        ("root: /\n", "root cannot be set"),  # was a TypeError traceback
        ("name: x\n", "name cannot be set"),
        ("- a\n", "must be a mapping"),
    ):
        (tmp_path / "host.yaml").write_text(text)
        spec = load_recorded_host(str(tmp_path))
        assert spec.invalid is not None and "host.yaml" in spec.invalid and why in spec.invalid
        report = check_host(spec)
        assert report.error == spec.invalid and not report.results


def test_unreadable_sglang_source_falls_back_to_the_version(seed_copy: Path) -> None:
    site = seed_copy / "opt/sglang/venv/lib/python3.11/site-packages"
    (site / "sglang/srt/models/dflash.py").unlink()
    f = gather_dir(seed_copy)
    assert f.sglang_code.value is None and "dflash.py" in (f.sglang_code.error or "")
    report = check_host(load_recorded_host(str(seed_copy)))
    dfd103 = next(r for r in report.results if r.check_id == "DFD103")
    assert "version table: SGLang 0.5.13" in dfd103.findings[0].message
