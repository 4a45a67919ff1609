"""HostSpec split by reader: flat user keys land in connection / hints / fix; overrides are
validated (a misspelled key or a bad value is a usage error naming the host)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dflash_doctor.errors import TransportError, UsageError
from dflash_doctor.exit_codes import EXIT_USAGE
from dflash_doctor.hosts import (
    Address,
    Connection,
    FixSettings,
    GatherHints,
    HostSpec,
    load_recorded_host,
    parse_address,
)
from dflash_doctor.inventory import load_inventory
from dflash_doctor.transport.ssh_options import parse_target
from tests.conftest import REPO

INVENTORY = """\
defaults:
  user: ubuntu
  log_path: /var/log/sglang/server.log
hosts:
  gpu-a1:
    address: ubuntu@10.0.0.5:2222
    labels: [prod, h200]
    launch_file: /etc/sglang/launch.sh
    relaunch: systemctl restart sglang
    sudo: true
  gpu-a2:
    proxy_jump: bastion.example.com
    pid: 4242
    health_url: http://127.0.0.1:30000/health
groups:
  prod: [gpu-a1, gpu-a2]
"""


def test_inventory_flat_keys_land_in_their_groups(tmp_path: Path) -> None:
    path = tmp_path / "inventory.yaml"
    path.write_text(INVENTORY)
    a1, a2 = load_inventory(str(path)).specs()
    assert a1.connection == Connection(address="ubuntu@10.0.0.5:2222", user="ubuntu")
    assert a1.hints == GatherHints(
        launch_file="/etc/sglang/launch.sh", log_path="/var/log/sglang/server.log"
    )
    assert a1.fix == FixSettings(
        relaunch="systemctl restart sglang", sudo=True, inventory_file=str(path)
    )
    assert a1.labels == ["prod", "h200"] and a1.name == "gpu-a1"
    assert a2.connection.address == "gpu-a2" and a2.connection.proxy_jump == "bastion.example.com"
    assert a2.hints.pid == 4242 and a2.fix.health_url == "http://127.0.0.1:30000/health"
    assert not a2.fix.sudo


def test_host_yaml_flat_keys_land_in_their_groups(tmp_path: Path) -> None:
    (tmp_path / "host.yaml").write_text(
        "pid: 4242\nport: 2200\nrelaunch: ./restart.sh\noffline: true\nhf_home: /data/hf\n"
    )
    spec = load_recorded_host(str(tmp_path))
    assert spec.invalid is None
    assert spec.hints.pid == 4242 and spec.hints.hf_home == "/data/hf"
    assert spec.connection.port == 2200 and spec.fix.relaunch == "./restart.sh"
    assert spec.offline and spec.recorded and spec.root == str(tmp_path)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("prot: 22\n", "prot"),  # misspelled key
        ("port: notaport\n", "port"),
        ("address: 'h:notaport'\n", "bad port"),
        ("pid: 0\n", "pid"),
        ("hints: {pid: 4}\n", "hints"),  # the groups are not user keys: the format stays flat
    ],
)
def test_host_yaml_bad_settings_are_the_hosts_error(tmp_path: Path, text: str, why: str) -> None:
    (tmp_path / "host.yaml").write_text(text)
    spec = load_recorded_host(str(tmp_path))
    assert spec.invalid is not None and why in spec.invalid and "host.yaml" in spec.invalid


def test_inventory_rejects_group_names_and_bad_values(tmp_path: Path) -> None:
    path = tmp_path / "inv.yaml"
    for text, why in (
        ("hosts:\n  a: {connection: {port: 2}}\n", "connection"),
        ("hosts:\n  a: {port: notaport}\n", "port"),
        ("defaults: {relaunh: x}\nhosts:\n  a: {}\n", "relaunh"),
    ):
        path.write_text(text)
        with pytest.raises(UsageError, match=why):
            load_inventory(str(path))


def test_override_validates_and_names_the_host() -> None:
    spec = HostSpec.model_validate({"name": "h", "address": "h", "pid": 7})
    changed = spec.override(port=2222, relaunch="restart", pid=None)
    assert changed.connection.port == 2222 and changed.fix.relaunch == "restart"
    assert changed.hints.pid is None and changed.connection.address == "h"
    assert spec.hints.pid == 7  # the original is untouched (specs are frozen)
    with pytest.raises(UsageError, match=r"host 'h': port"):
        spec.override(port="notaport")
    with pytest.raises(UsageError, match=r"host 'h': prot"):
        spec.override(prot=22)
    with pytest.raises(UsageError, match="bad port"):
        spec.override(address="h:99999")
    # pydantic's model_copy would copy these in unchecked; HostSpec's validates them too
    with pytest.raises(UsageError, match="port"):
        spec.model_copy(update={"port": "notaport"})
    assert spec.model_copy(update={"pid": 8}).hints.pid == 8
    assert spec.settings()["pid"] == 7 and "connection" not in spec.settings()


def test_user_keys_are_flat_and_complete() -> None:
    keys = HostSpec.user_keys()
    assert not {"connection", "hints", "fix"} & set(keys)
    for group in (Connection, GatherHints, FixSettings):
        assert set(group.model_fields) <= set(keys)
    assert len(keys) == len(set(keys))  # no key is read by two groups


def test_parse_address_is_the_one_parser() -> None:
    assert parse_address("bob@h:2222") == Address("bob", "h", 2222)
    assert parse_address("[::1]:22") == Address(None, "::1", 22)
    assert parse_address("alias") == Address(None, "alias", None)
    assert parse_address("a@b@h") == Address("a@b", "h", None)
    for bad in ("h:0", "h:x", "@", "h:65536"):
        with pytest.raises(ValueError):
            parse_address(bad)
    with pytest.raises(TransportError, match="bad port"):
        parse_target("h:notaport")  # the transport's name for it says the same


def test_cli_bad_address_is_a_usage_error() -> None:
    p = subprocess.run(
        [sys.executable, "-m", "dflash_doctor", "check", "h:notaport"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        env={"COLUMNS": "120", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)},
    )
    assert p.returncode == EXIT_USAGE, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "h:notaport" in lines[0] and "bad port" in lines[0]
