"""contrib/ansible/dflash-doctor.yml run by real ansible-core against the test sshd.

Nine inventory aliases all reach 127.0.0.1 through the real OpenSSH server (and the real
`ssh` client Ansible uses). No GPU server runs here, so eight aliases check a recorded or
demo host each (`dflash_doctor_hosts: []`, `dflash_doctor_args: [--host-dir, DIR]`), as a
node would check its own server; the ninth runs the playbook's default, `check local`, on
this machine. The playbook fetches every report and merges them; the fleet report must name the
hosts by their inventory aliases and show their drift.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from fixtures.sshd import free_port
from tests.conftest import FIXTURE_HOSTS, REPO

PLAYBOOK = REPO / "contrib" / "ansible" / "dflash-doctor.yml"
PLAYBOOK_BIN = Path(sys.executable).parent / "ansible-playbook"
# alias -> (the host its report names, what it checks); None: the playbook's default
HOST_DIRS = {"gpu-a1": "tuned", "gpu-a2": "v0511", "gpu-a3": "v0513", "gpu-b1": "v0523"}
ALIASES: dict[str, tuple[str, list[str]] | None] = {
    **{a: (h, ["--host-dir", str(FIXTURE_HOSTS / h)]) for a, h in HOST_DIRS.items()},
    "gpu-b2": ("tuned", ["--host-dir", str(FIXTURE_HOSTS / "tuned")]),
    "gpu-b5": ("tuned", ["--host-dir", str(FIXTURE_HOSTS / "tuned")]),
    "gpu-b3": ("demo-v0523", ["--demo-host", "v0523"]),
    "gpu-b4": ("demo-seed", ["--demo"]),
    "gpu-c1": None,
}


def ansible_playbook() -> str | None:
    if PLAYBOOK_BIN.exists():
        return str(PLAYBOOK_BIN)
    return shutil.which("ansible-playbook")


def inventory(sshd: Any, work: Path, down: str | None = None) -> Path:
    """`down`: one more alias, on a port where nothing listens (Ansible cannot reach it)."""
    doctor = [sys.executable, "-m", "dflash_doctor"]
    hosts: dict[str, dict[str, Any]] = {}
    if down is not None:
        hosts[down] = {"ansible_host": "127.0.0.1", "ansible_port": free_port()}
    for alias, checks in ALIASES.items():
        hosts[alias] = {"ansible_host": "127.0.0.1", "ansible_port": sshd.port}
        if checks is not None:
            hosts[alias]["dflash_doctor_hosts"] = []
            hosts[alias]["dflash_doctor_args"] = checks[1]
    doc = {
        "all": {
            "hosts": hosts,
            "vars": {
                "ansible_user": sshd.user,
                "ansible_ssh_private_key_file": str(sshd.client_key),
                # only the test server's key is trusted, and no user ssh config is read
                "ansible_ssh_common_args": (
                    f"-F /dev/null -o UserKnownHostsFile={sshd.known_hosts} "
                    "-o StrictHostKeyChecking=yes -o IdentitiesOnly=yes"
                ),
                "ansible_python_interpreter": sys.executable,
                "dflash_doctor_command": doctor,
                "dflash_doctor_environment": {"PYTHONPATH": str(REPO)},
                "dflash_doctor_controller_command": doctor,
                "dflash_doctor_reports": str(work / "reports"),
            },
        }
    }
    path = work / "inventory.yml"
    path.write_text(yaml.safe_dump(doc))
    return path


def run_playbook(
    binary: str, inv: Path, work: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    (work / "cp").mkdir(exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", str(work)),
        "PYTHONPATH": str(REPO),
        "ANSIBLE_CONFIG": str(work / "none.cfg"),
        "ANSIBLE_HOME": str(work / "ansible_home"),
        "ANSIBLE_LOCAL_TEMP": str(work / "ansible_tmp"),
        "ANSIBLE_SSH_CONTROL_PATH_DIR": str(work / "cp"),
        "ANSIBLE_PIPELINING": "True",
        "ANSIBLE_RETRY_FILES_ENABLED": "False",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORKS": "6",
    }
    return subprocess.run(
        [binary, "-i", str(inv), str(PLAYBOOK), *extra],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def played(sshd: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    binary = ansible_playbook()
    if binary is None:
        pytest.skip("ansible-core not installed (pip install -e .[dev])")
    work = tmp_path_factory.mktemp("ansible")
    p = run_playbook(binary, inventory(sshd, work), work, "-e", "dflash_doctor_format=json")
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    return work, p.stdout


def test_playbook_fetches_one_report_per_alias(played: tuple[Path, str]) -> None:
    work, out = played
    assert "unreachable=0" in out and "failed=0" in out
    fetched = sorted(p.name for p in (work / "reports" / "hosts").iterdir())
    assert fetched == sorted(f"{a}.json" for a in ALIASES)
    for alias, checks in ALIASES.items():
        doc = json.loads((work / "reports" / "hosts" / f"{alias}.json").read_text())
        assert doc["schema_version"] == 1
        assert [h["host"] for h in doc["hosts"]] == [checks[0] if checks else "local"]
    # the private temporary files are gone again
    assert "dflash-doctor." not in " ".join(os.listdir("/tmp"))


def test_fleet_report_names_aliases_and_shows_their_drift(played: tuple[Path, str]) -> None:
    work, out = played
    fleet = json.loads((work / "reports" / "fleet.json").read_text())
    assert fleet["kind"] == "fleet"
    # in the inventory's order (yaml.safe_dump wrote it sorted)
    assert [h["host"] for h in fleet["hosts"]] == sorted(ALIASES)
    rows = {r["setting"]: r for r in fleet["drift"]}

    def on(setting: str, value: str) -> list[str]:
        # gpu-c1 checks this machine, whatever runs here now (another test's stand-in
        # server, or none): the majorities below hold by a margin of two whatever it has
        return [h for h in rows[setting]["values"].get(value, []) if h != "gpu-c1"]

    version = rows["sglang_version"]
    assert on("sglang_version", "0.5.23") == ["gpu-a1", "gpu-b1", "gpu-b2", "gpu-b3", "gpu-b5"]
    assert version["majority"] == "0.5.23"
    assert {"gpu-a2", "gpu-a3", "gpu-b4"} <= set(version["differing"])
    assert on("block_size", "8") == ["gpu-a3"]
    assert "gpu-a3" in rows["block_size"]["differing"]
    drifted = {
        h["host"]
        for h in fleet["hosts"]
        for r in h["results"]
        if r["check_id"] == "DFD170" and r["status"] == "failed"
    }
    assert {"gpu-a2", "gpu-a3", "gpu-b1", "gpu-b4"} <= drifted
    assert not {"gpu-a1", "gpu-b2", "gpu-b3", "gpu-b5"} & drifted  # the fleet's majority
    assert f"{len(ALIASES)} host report(s)" in out


def test_text_format_keeps_the_drift_table_and_the_host_ansible_missed(
    sshd: Any, tmp_path: Path
) -> None:
    binary = ansible_playbook()
    if binary is None:
        pytest.skip("ansible-core not installed (pip install -e .[dev])")
    inv = inventory(sshd, tmp_path, down="gpu-down")
    limit = "gpu-down,gpu-a1,gpu-a2,gpu-a3,gpu-b1,gpu-b2"
    p = run_playbook(binary, inv, tmp_path, "--limit", limit)
    # ansible-playbook's own code for an unreachable host; the play still merged the rest
    assert p.returncode == 4, p.stdout[-4000:] + p.stderr[-2000:]
    assert "gpu-down" in p.stdout and "exit 3" in p.stdout
    text = (tmp_path / "reports" / "fleet.txt").read_text()
    assert "Fleet drift" in text and "gpu-a2: 0.5.11" in text
    assert "unreachable: no report" in text
    fleet = json.loads((tmp_path / "reports" / "fleet.json").read_text())
    assert [h["host"] for h in fleet["hosts"]][-1] == "gpu-down"
    assert len(fleet["hosts"]) == 6 and fleet["summary"]["unreachable"] == 1
    assert fleet["exit_code"] == 3
    # strict: the fleet's exit code (1: their drift, with --fail-on warning) fails the play
    p = run_playbook(
        binary,
        inv,
        tmp_path,
        *("--limit", "gpu-a1,gpu-a2", "-e", "dflash_doctor_strict=true"),
        *("-e", "dflash_doctor_fail_on=warning"),
    )
    assert p.returncode != 0 and "report merge" in p.stdout


def test_readme_names_every_playbook_variable() -> None:
    readme = (REPO / "docs" / "fleets.md").read_text()
    section = readme[readme.index("**With Ansible**") : readme.index("Report files are read")]
    play = PLAYBOOK.read_text()
    used = set(re.findall(r"\b(dflash_doctor_[a-z_]+)", play)) - {
        "dflash_doctor_tmp",  # registered results, not settings
        "dflash_doctor_check",
        "dflash_doctor_merge",
    }
    named = set(re.findall(r"`(dflash_doctor_[a-z_]+)`", section))
    assert used == named
    example = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert example is not None
    group = yaml.safe_load(example.group(1))["sglang"]
    assert set(group["vars"]) | {k for h in group["hosts"].values() for k in h} <= used | {
        "ansible_host"
    }
