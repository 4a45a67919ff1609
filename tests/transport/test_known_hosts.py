"""Issue 22: known_hosts read as OpenSSH reads it (wildcard, negated and hashed patterns:
`ssh-keygen -F` is the oracle) and within bounds (`/dev/zero`, a FIFO, a huge file: one
line, no read to the end)."""

from __future__ import annotations

import dataclasses
import os
import resource
import shutil
import subprocess
from pathlib import Path

import pytest

from dflash_doctor.errors import TransportError
from dflash_doctor.transport.known_hosts import MAX_KNOWN_HOSTS_BYTES, host_matches
from dflash_doctor.transport.ssh import SSHTransport

PATTERNS = [
    "*.gpu.example",
    "gpu-?.example",
    "!bad.gpu.example,*.gpu.example",
    "[10.0.0.*]:2222",
    "10.0.0.*,!10.0.0.9",
    "GPU-A.Example",
    "exact.example",
]
HOSTS = [
    "a.gpu.example",
    "bad.gpu.example",
    "gpu-1.example",
    "gpu-12.example",
    "gpu-a.example",
    "[10.0.0.5]:2222",
    "10.0.0.5",
    "10.0.0.9",
    "exact.example",
    "other.example",
]


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="OpenSSH client not installed")
def test_patterns_match_as_openssh_matches_them(tmp_path: Path) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "k")], check=True
    )
    key = " ".join((tmp_path / "k.pub").read_text().split()[:2])
    for pattern in PATTERNS:
        known = tmp_path / "known_hosts"
        known.write_text(f"{pattern} {key}\n")
        for host in HOSTS:
            found = subprocess.run(
                ["ssh-keygen", "-F", host, "-f", str(known)], capture_output=True
            ).returncode
            assert host_matches(host, pattern.split(",")) == (found == 0), (pattern, host)
    # hashed entries, as `ssh-keygen -H` writes them
    known.write_text(f"a.gpu.example {key}\n[10.0.0.5]:2222 {key}\n")
    subprocess.run(["ssh-keygen", "-H", "-f", str(known)], check=True, capture_output=True)
    hashed = [line.split()[0] for line in known.read_text().splitlines()]
    assert all(h.startswith("|1|") for h in hashed)
    assert host_matches("a.gpu.example", [hashed[0]])
    assert host_matches("[10.0.0.5]:2222", [hashed[1]])
    assert not host_matches("b.gpu.example", hashed)


def test_a_wildcard_entry_lets_the_real_sshd_in(sshd, ssh_options, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    line = sshd.known_hosts.read_text().split()
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.*]:{sshd.port} {line[1]} {line[2]}\n")
    opts = dataclasses.replace(ssh_options, known_hosts=str(known))
    SSHTransport("h", sshd.address, opts).close()  # refused as unknown before
    assert known.read_text().count("\n") == 1  # nothing recorded
    known.write_text(f"![127.0.0.1]:{sshd.port},[127.0.0.*]:{sshd.port} {line[1]} {line[2]}\n")
    with pytest.raises(TransportError, match="unknown host key"):
        SSHTransport("h", sshd.address, opts)


def test_known_hosts_reads_are_bounded(sshd, ssh_options, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    huge = tmp_path / "huge"
    with open(huge, "wb") as f:
        f.truncate(MAX_KNOWN_HOSTS_BYTES + 1)
    for path, why in (
        ("/dev/zero", "not a regular file"),
        (str(fifo), "not a regular file"),
        (str(huge), "larger than"),
    ):
        opts = dataclasses.replace(ssh_options, known_hosts=path)
        with pytest.raises(TransportError, match=why) as e:
            SSHTransport("h", sshd.address, opts)
        assert "\n" not in str(e.value)
    # ceiling: the 16 MiB file read once at most, never /dev/zero to the end
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 200 * 1024, grown_kib
