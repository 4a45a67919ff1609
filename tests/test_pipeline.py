"""Whole checks over SSH against the real sshd, in parallel, with a hung host among them."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from dflash_doctor.hosts import load_recorded_host
from dflash_doctor.pipeline import check_host, check_hosts
from fixtures.sshd import start_sshd
from tests.conftest import DEMO_HOST, FIXTURE_HOSTS, REPO

HOSTS = [DEMO_HOST, *(FIXTURE_HOSTS / n for n in ("tuned", "v0511", "v0513", "v0523"))]


@pytest.fixture(autouse=True)
def _no_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)


@pytest.mark.parametrize("tree", HOSTS, ids=lambda p: p.name)
def test_check_over_ssh_equals_local_check(tree: Path, sshd, ssh_options) -> None:  # type: ignore[no-untyped-def]
    local_spec = load_recorded_host(str(tree))
    remote_spec = local_spec.model_copy(update={"address": sshd.address})
    local = check_host(local_spec)
    remote = check_host(remote_spec, ssh=ssh_options)
    assert remote.reachable, remote.error
    assert remote.facts == local.facts
    assert remote.results == local.results
    assert remote.fact_errors == local.fact_errors


def test_log_is_filtered_on_the_host(sshd, ssh_options, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import random
    import shutil

    from bench.gen_log import lines
    from dflash_doctor.gather import gather
    from dflash_doctor.on_host import log_filter
    from dflash_doctor.pipeline import open_transport

    tree = tmp_path / "seed"
    shutil.copytree(DEMO_HOST, tree)
    log = tree / "var/log/sglang/server.log"
    block = "".join(lines(random.Random(4))).encode()
    log.write_bytes(log.read_bytes() + block * ((10 << 20) // len(block)))
    spec = load_recorded_host(str(tree)).model_copy(update={"address": sshd.address})
    transport = open_transport(spec, ssh_options)
    sent: list[int] = []
    commands: list[list[str]] = []
    stream = transport.run_stream

    def counting(argv: list[str], **kw: Any) -> Iterator[bytes]:
        commands.append(argv)
        for chunk in stream(argv, **kw):
            sent.append(len(chunk))
            yield chunk

    transport.run_stream = counting  # type: ignore[method-assign]
    try:
        facts = gather(spec, transport).log
    finally:
        transport.close()
    assert facts.value is not None and facts.value.bytes_scanned == log.stat().st_size
    assert 0 < sum(sent) < log.stat().st_size / 10  # only the lines that matter travelled
    # the same module ran on the host: its whole source travelled, as a `python -c` word or
    # inside the bundle's JSON
    source = Path(log_filter.__file__).read_text(encoding="utf-8")
    words = "\n".join(w for argv in commands for w in argv)
    assert source in words or json.dumps(source)[1:-1] in words


def test_parallel_twenty_hosts_with_a_hung_one(sshd, ssh_options, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    hung = start_sshd(sshd.directory, extra="ForceCommand sleep 600", name="hung")
    try:
        base = load_recorded_host(str(DEMO_HOST))
        specs = [
            base.model_copy(update={"name": f"gpu-{i:02d}", "address": f"gpu-{i:02d}"})
            for i in range(20)
        ]
        specs.insert(7, base.model_copy(update={"name": "hung", "address": hung.address}))
        opts = dataclasses.replace(ssh_options, known_hosts=str(hung.known_hosts))
        # the hung sshd's known_hosts entry plus the main one
        Path(opts.known_hosts or "").write_text(
            hung.known_hosts.read_text() + sshd.known_hosts.read_text()
        )
        start = time.monotonic()
        reports = check_hosts(specs, ssh=opts, jobs=21, timeout=5)
        elapsed = time.monotonic() - start
    finally:
        hung.stop()
    assert [r.host for r in reports] == [s.name for s in specs]  # input order kept
    bad = reports.pop(7)
    assert not bad.reachable and bad.error == "hung: timed out after 5s"
    local = check_host(base)
    for r in reports:
        assert r.reachable, r.error
        assert r.results == local.results
    assert elapsed < 60


def test_cli_inventory_over_ssh(sshd, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    inv = tmp_path / "inventory.yaml"
    inv.write_text(
        yaml.safe_dump(
            {
                "defaults": {"identity_file": str(sshd.client_key)},
                "hosts": {
                    "gpu-seed": {
                        "root": str(DEMO_HOST),
                        "labels": ["prod"],
                        "log_path": "/var/log/sglang/server.log",
                    },
                    "gpu-tuned": {
                        "root": str(FIXTURE_HOSTS / "tuned"),
                        "log_path": "/var/log/sglang/server.log",
                    },
                },
                "groups": {"tuned": ["gpu-tuned"]},
            }
        )
    )
    base = [
        sys.executable,
        "-m",
        "dflash_doctor",
        "check",
        "-I",
        str(inv),
        "--ssh-config",
        str(sshd.ssh_config),
        "--format",
        "json",
    ]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(tmp_path)}

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*base, *extra], capture_output=True, text=True, env=env, cwd=REPO, timeout=120
        )

    p = run("--known-hosts", str(sshd.known_hosts), "--limit", "tuned")
    assert p.returncode == 0, p.stderr
    assert [h["host"] for h in json.loads(p.stdout)["hosts"]] == ["gpu-tuned"]
    p = run("--known-hosts", str(sshd.known_hosts), "--limit", "prod")
    assert p.returncode == 1 and "sk-fixture" not in p.stdout and "hf_FAKE" not in p.stdout
    # an unknown host key: exit 3, one clear line per host, nothing recorded
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    p = run("--known-hosts", str(empty))
    report = json.loads(p.stdout)
    assert p.returncode == 3
    assert all("unknown host key" in h["error"] for h in report["hosts"])
    assert empty.read_text() == ""
    p = run("--known-hosts", str(empty), "--accept-new-host-key", "--limit", "tuned")
    assert p.returncode == 0 and empty.read_text().startswith(f"[127.0.0.1]:{sshd.port} ")


def test_bad_inventories(tmp_path: Path) -> None:
    from dflash_doctor.errors import UsageError
    from dflash_doctor.inventory import load_inventory

    cases = {
        "hosts: [a, b]\n": "hosts",
        "hosts:\n  a: {port: 0}\n": "port",
        "hosts:\n  a: {}\ngroups:\n  g: [zz]\n": "unknown hosts",
        "hosts:\n  a: {bogus: 1}\n": "bogus",
        "hosts: {a: [\n": "invalid YAML",
        "just a string\n": "mapping",
    }
    for text, message in cases.items():
        path = tmp_path / "inv.yaml"
        path.write_text(text)
        with pytest.raises(UsageError, match=message):
            load_inventory(str(path))
    with pytest.raises(UsageError, match="cannot read inventory"):
        load_inventory(str(tmp_path / "missing.yaml"))
    path = tmp_path / "inv.yaml"
    path.write_text("hosts:\n  a: {labels: [x]}\n  b: {}\ngroups:\n  g: [b]\n")
    inv = load_inventory(str(path))
    assert [s.name for s in inv.select("x")] == ["a"]
    assert [s.name for s in inv.select("g,a")] == ["a", "b"]
    assert inv.specs()[0].connection.address == "a"
    with pytest.raises(UsageError, match="matches no group"):
        inv.select("nope")
