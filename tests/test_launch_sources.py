"""One launch source per kind (fix/launch_sources.py): parse, edit, relaunch and describe of
each, on real files: a recorded host's systemd unit and a drop-in, a compose file, a shell
script, an inventory."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from dflash_doctor.errors import FactError
from dflash_doctor.facts.models import LaunchArgs
from dflash_doctor.fix.apply import Applier, describe_relaunch
from dflash_doctor.fix.edits import Edit
from dflash_doctor.fix.launch_sources import (
    BareProcess,
    ComposeService,
    InventoryEntry,
    LaunchSource,
    Script,
    SystemdUnit,
    file_backed,
    parse_file,
    register,
    source_for,
    unit_name,
)
from dflash_doctor.hosts import HostSpec
from dflash_doctor.inventory import load_inventory
from dflash_doctor.transport.local import LocalTransport
from dflash_doctor.transport.open import open_here
from tests.conftest import DEMO_HOST, FIXTURE_HOSTS

UNIT = FIXTURE_HOSTS / "v0513/etc/systemd/system/sglang.service"
WINDOW = Edit("set_flag", "--speculative-dflash-draft-window-size", "2048")
COMPOSE = (
    "services:\n  web:\n    image: nginx\n  sglang:\n    image: lmsysorg/sglang:v0.5.13\n"
    "    command:\n      - python3\n      - -m\n      - sglang.launch_server\n"
    "      - --model-path\n      - Qwen/Qwen3-8B\n"
    "      - --speculative-dflash-draft-window-size\n      - '4096'\n"
)


def drop_in(tmp_path: Path) -> Path:
    """The v0513 unit's text as a drop-in that carries ExecStart (systemd.unit(5))."""
    directory = tmp_path / "etc/systemd/system/sglang.service.d"
    directory.mkdir(parents=True)
    path = directory / "override.conf"
    # A drop-in resets ExecStart= with an empty line before setting its own.
    path.write_text(UNIT.read_text().replace("[Service]\n", "[Service]\nExecStart=\n"))
    return path


def test_each_kind_has_its_source() -> None:
    for kind, cls in (
        ("script", Script),
        ("systemd", SystemdUnit),
        ("compose", ComposeService),
        ("argv", InventoryEntry),
        ("process", BareProcess),
    ):
        source = source_for(kind)
        assert isinstance(source, cls) and source.kind == kind
    assert [k for k in ("script", "systemd", "compose", "argv", "process") if
            source_for(k).file_backed] == ["script", "systemd", "compose"]  # fmt: skip
    with pytest.raises(FactError, match="no launch source of kind 'podman'"):
        source_for("podman")


def test_script_parse_edit_relaunch_describe() -> None:
    path = DEMO_HOST / "etc/sglang/launch.sh"
    text = path.read_text()
    launch = parse_file(text.encode(), source=str(path), path=str(path))
    assert launch.kind == "script" and file_backed(launch)
    src = source_for(launch.kind)
    out = src.edit(text, launch, [Edit("set_flag", "--speculative-draft-window-size", "2048")])
    assert parse_file(out.encode(), source="s", path=str(path)).draft_window_size == 2048
    assert src.relaunch(str(path), None) is None  # fix/apply.py stops and starts it
    assert not src.managed
    assert src.describe("/etc/sglang/launch.sh", None).startswith(
        "stop the running server, start /etc/sglang/launch.sh detached"
    )


def test_systemd_unit_parse_edit_relaunch_describe() -> None:
    text = UNIT.read_text()
    launch = parse_file(text.encode(), source=str(UNIT), path=str(UNIT))
    src = source_for(launch.kind)
    assert isinstance(src, SystemdUnit) and src.managed
    out = src.edit(text, launch, [Edit("remove_flag", "--speculative-num-draft-tokens")])
    again = src.parse(out.encode(), source="u", path=str(UNIT), service=None, read=None)
    assert again.num_draft_tokens is None and "Restart=on-failure" in out
    assert src.relaunch(str(UNIT), None) == [
        ["systemctl", "daemon-reload"],
        ["systemctl", "restart", "--", "sglang.service"],
    ]
    assert src.describe(str(UNIT), None) == (
        "systemctl daemon-reload && systemctl restart sglang.service"
    )


def test_systemd_drop_in_names_its_unit_everywhere(tmp_path: Path) -> None:
    path = drop_in(tmp_path)
    text = path.read_text()
    launch = parse_file(text.encode(), source=str(path), path=str(path))
    assert launch.kind == "systemd" and launch.draft_window_size == 4096
    assert unit_name(str(path)) == "sglang.service"
    src = source_for("systemd")
    # The restart and its description name the same unit (they drifted: the description
    # said `systemctl restart override.conf`).
    assert src.relaunch(str(path), None) == [
        ["systemctl", "daemon-reload"],
        ["systemctl", "restart", "--", "sglang.service"],
    ]
    said = describe_relaunch(HostSpec.of("h"), launch, str(path), None)
    assert said == "systemctl daemon-reload && systemctl restart sglang.service"
    assert "override.conf" not in said
    out = src.edit(text, launch, [WINDOW])
    assert parse_file(out.encode(), source="d", path=str(path)).draft_window_size == 2048
    # a .conf that is no drop-in, and a bare `.d` directory, are their own names
    assert unit_name("/etc/sglang/sglang.conf") == "sglang.conf"
    assert unit_name("/x/.d/a.conf") == "a.conf"


def test_applier_relaunches_a_drop_in_by_its_unit(tmp_path: Path) -> None:
    """fix/apply.py runs the source's relaunch commands: systemctl (a recording stand-in on
    PATH: this test runs no init system) is asked to restart sglang.service."""
    path = drop_in(tmp_path)
    launch = parse_file(path.read_bytes(), source=str(path), path=str(path))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    systemctl = bin_dir / "systemctl"
    systemctl.write_text(f'#!/bin/sh\necho "$*" >> {calls}\n')
    systemctl.chmod(systemctl.stat().st_mode | stat.S_IXUSR)
    old_path = os.environ["PATH"]
    os.environ["PATH"] = f"{bin_dir}:{old_path}"
    try:
        a = Applier(HostSpec.of("h"), LocalTransport("h"), health_timeout=5)
        a.relaunch(launch, str(path), pid=None, log=None)
    finally:
        os.environ["PATH"] = old_path
    assert calls.read_text().splitlines() == ["daemon-reload", "restart -- sglang.service"]
    assert a.stopped is None and a.started_session is None  # nothing of ours was stopped


def test_compose_service_parse_edit_relaunch_describe(tmp_path: Path) -> None:
    path = tmp_path / "docker-compose.yml"
    path.write_text(COMPOSE)
    launch = parse_file(path.read_bytes(), source=str(path), path=str(path), service="sglang")
    src = source_for(launch.kind)
    assert isinstance(src, ComposeService) and launch.draft_window_size == 4096
    out = src.edit(COMPOSE, launch, [WINDOW])
    again = src.parse(out.encode(), source="c", path=str(path), service="sglang", read=None)
    assert again.draft_window_size == 2048 and "image: nginx" in out
    up = ["docker", "compose", "-f", str(path), "up", "-d", "--force-recreate"]
    assert src.relaunch(str(path), "sglang") == [[*up, "sglang"]]
    assert src.relaunch(str(path), None) == [up]
    # described as it is run, service included
    assert src.describe(str(path), "sglang").endswith("up -d --force-recreate sglang")
    spec = HostSpec.of("h", compose_service="sglang")
    assert describe_relaunch(spec, launch, str(path), None) == src.describe(str(path), "sglang")


def test_inventory_entry_rewrites_the_inventory(tmp_path: Path) -> None:
    path = tmp_path / "inventory.yaml"
    path.write_text(
        "hosts:\n  gpu-a1:\n    launch: python -m sglang.launch_server --model-path m "
        "--api-key sk-real-000000000000\n  gpu-a2: {}\n"
    )
    (spec, _) = load_inventory(str(path)).specs()
    src = source_for("argv")
    assert isinstance(src, InventoryEntry) and not src.file_backed
    here = open_here("local")
    update = src.rewrite(spec, [Edit("set_flag", "--page-size", "64")], here)
    assert update["source"] == str(path) and update["old_text"] == path.read_text()
    assert "--page-size 64" in update["new_text"]
    assert "sk-real-000000000000" in update["new_text"]  # written unredacted, as it was
    assert "gpu-a2: {}" in update["new_text"]
    with pytest.raises(FactError, match="no inventory"):
        src.rewrite(HostSpec.of("x"), [], here)


def test_bare_process_has_nothing_to_edit() -> None:
    src = source_for("process")
    launch = LaunchArgs(source="process 4242", kind="process", argv=["python"])
    assert not file_backed(launch) and not file_backed(None)
    with pytest.raises(FactError, match="cannot edit a process launch source"):
        src.edit("", launch, [WINDOW])
    assert src.relaunch("x", None) is None
    assert src.describe("x", None).startswith("no launch file")


def test_register_adds_a_kind() -> None:
    class Podman(BareProcess):
        kind = "podman-test"

        def describe(self, source: str, service: str | None) -> str:
            return f"podman restart {source}"

    def factory() -> LaunchSource:
        return Podman()

    register("podman-test", factory)
    try:
        assert source_for("podman-test").describe("c1", None) == "podman restart c1"
    finally:
        from dflash_doctor.fix import launch_sources

        del launch_sources._FACTORIES["podman-test"]


def test_check_path_table_agrees_with_the_sources() -> None:
    """`check` reads which kinds are files and how each relaunches from launch_edits.py (it
    never imports fix/): that table and the sources `fix` runs are one."""
    from typing import get_args

    from dflash_doctor.facts.models import LaunchKind
    from dflash_doctor.launch_edits import FILE_BACKED_KINDS, describe_kind

    for kind in get_args(LaunchKind):
        src = source_for(kind)
        assert src.file_backed == (kind in FILE_BACKED_KINDS), kind
        assert src.describe("/srv/launch", "sglang") == describe_kind(kind, "/srv/launch", "sglang")
