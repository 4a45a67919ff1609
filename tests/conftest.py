from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dflash_doctor.facts.launch import parse_argv
from dflash_doctor.facts.model_config import parse_drafter_config, parse_target_config
from dflash_doctor.facts.models import (
    DrafterConfig,
    Fact,
    HostFacts,
    LaunchArgs,
    LogFacts,
    LogLine,
    TargetConfig,
)

REPO = Path(__file__).resolve().parent.parent
FIXTURE_HOSTS = REPO / "fixtures" / "hosts"
DEMO_HOST = REPO / "dflash_doctor" / "demo_hosts" / "seed"
KIMI_DRAFTER = DEMO_HOST / "models/Kimi-K2.6-DFlash/config.json"
QWEN8B_DRAFTER = next(
    (FIXTURE_HOSTS / "v0513/data/hf/hub/models--z-lab--Qwen3-8B-DFlash-b16").rglob("config.json")
)
QWEN4B_DRAFTER = next(
    (FIXTURE_HOSTS / "v0523/data/hf/hub/models--z-lab--Qwen3-4B-DFlash-b16").rglob("config.json")
)
QWEN8B_TARGET = next(
    (FIXTURE_HOSTS / "v0513/data/hf/hub/models--Qwen--Qwen3-8B").rglob("config.json")
)
KIMI_TARGET = next((DEMO_HOST / "data/hf/hub/models--moonshotai--Kimi-K2.6").rglob("config.json"))


def drafter_cfg(path: Path = KIMI_DRAFTER, **changes: Any) -> DrafterConfig:
    obj = json.loads(path.read_text())
    obj.update(changes)
    return parse_drafter_config(json.dumps(obj, indent=2).encode(), str(path))


def target_cfg(path: Path = KIMI_TARGET) -> TargetConfig:
    return parse_target_config(path.read_bytes(), str(path))


def launch(*flags: str) -> LaunchArgs:
    argv = ["/venv/bin/python3", "-m", "sglang.launch_server", "--model-path", "m"]
    argv += ["--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", "d", *flags]
    return parse_argv(argv, source="launch.sh", kind="script")


def init_log(window: int | None, backend: str = "fa3", block: int = 16) -> LogFacts:
    text = (
        f"[2026-11-30 10:00:05 TP0] Initialized DFLASH draft runner. attention_backend={backend}, "
        f"model=DFlashDraftModel, block_size={block}, draft_window_size={window}, "
        f"compact_cache={window is not None}"
    )
    return LogFacts(
        path="/var/log/sglang.log",
        dflash_init=LogLine(line=7, text=text),
        dflash_attention_backend=backend,
        dflash_block_size=block,
        draft_window_size=window,
        compact_cache=window is not None,
    )


def host_facts(
    *,
    drafter: DrafterConfig | None = None,
    target: TargetConfig | None = None,
    launch_args: LaunchArgs | None = None,
    log: LogFacts | None = None,
    version: str | None = "0.5.23",
) -> HostFacts:
    def fact(value: Any, what: str) -> Any:
        return Fact.of(value, what) if value is not None else Fact.missing(f"no {what}")

    return HostFacts(
        host="h",
        sglang_version=fact(version, "version"),
        drafter=fact(drafter, "drafter"),
        target=fact(target, "target"),
        launch=fact(launch_args, "launch"),
        log=fact(log, "log"),
    )


@pytest.fixture
def kimi() -> DrafterConfig:
    return drafter_cfg()


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from fixtures.sshd import find_sshd, start_sshd

    if find_sshd() is None:
        pytest.skip("OpenSSH server not installed; .ci/run installs it")
    server = start_sshd(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()


@pytest.fixture
def ssh_options(sshd):  # type: ignore[no-untyped-def]
    from dflash_doctor.transport.ssh_options import SSHOptions

    return SSHOptions(
        identity_files=(str(sshd.client_key),),
        known_hosts=str(sshd.known_hosts),
        ssh_config=str(sshd.ssh_config),
        interactive=False,
    )


@pytest.fixture
def scratch() -> Iterator[Path]:
    """A root-owned directory every user can reach and only root can write: pytest's
    tmp_path is root's alone, and the host interpreter rules demand no other writer."""
    d = Path("/tmp") / f"dfd-{uuid.uuid4().hex[:8]}"
    d.mkdir(mode=0o755)
    os.chmod(d, 0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d)
