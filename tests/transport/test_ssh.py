"""The SSH transport against a real OpenSSH server on 127.0.0.1 (no mocks)."""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

import pytest

from dflash_doctor.errors import HostUnreachable, TransportError
from dflash_doctor.transport.ssh import SSHTransport, resolve
from dflash_doctor.transport.ssh_options import parse_target


@pytest.fixture(autouse=True)
def _no_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)


def test_parse_target() -> None:
    # a bare IPv6 literal has no port; brackets are needed to give one
    t = parse_target("alice@::1")
    assert (t.user, t.host, t.port) == ("alice", "::1", None)
    t = parse_target("bob@h:2222")
    assert (t.user, t.host, t.port) == ("bob", "h", 2222)
    t = parse_target("[::1]:22")
    assert (t.user, t.host, t.port) == (None, "::1", 22)
    assert parse_target("gpu-a1").host == "gpu-a1"
    with pytest.raises(TransportError, match="bad port"):
        parse_target("h:99999")
    with pytest.raises(TransportError, match="no host name"):
        parse_target("bob@:22")


def test_ssh_config_alias_resolution(sshd, ssh_options) -> None:  # type: ignore[no-untyped-def]
    r = resolve("gpu-7", ssh_options)
    assert (r.hostname, r.port, r.user) == ("127.0.0.1", sshd.port, sshd.user)
    assert str(sshd.client_key) in r.identity_files


def test_run_quotes_every_argument(sshd, ssh_options) -> None:  # type: ignore[no-untyped-def]
    t = SSHTransport("h", sshd.address, ssh_options)
    try:
        args = ["a b", "c;d", "$(touch /tmp/pwned)", "'q'", '"dq"', "x\\y", "*"]
        res = t.run(["printf", "%s|", *args])
        assert res.ok and res.stdout.decode() == "|".join(args) + "|"
        assert not os.path.exists("/tmp/pwned")
        assert t.run(["sh", "-c", "exit 3"]).returncode == 3
    finally:
        t.close()


def test_command_timeout(sshd, ssh_options) -> None:  # type: ignore[no-untyped-def]
    t = SSHTransport("h", sshd.address, ssh_options)
    try:
        start = time.monotonic()
        with pytest.raises(TransportError, match="timed out after 1s"):
            t.run(["sleep", "30"], timeout=1)
        assert time.monotonic() - start < 10
        assert t.run(["true"]).ok  # the connection survives a timed-out command
    finally:
        t.close()


def test_files(sshd, ssh_options, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    t = SSHTransport("h", sshd.address, ssh_options)
    try:
        path = tmp_path / "f.txt"
        t.write_file(str(path), b"hello\n", mode=0o600)
        assert path.read_bytes() == b"hello\n" and (path.stat().st_mode & 0o777) == 0o600
        assert t.read_file(str(path), max_bytes=100) == b"hello\n"
        assert b"".join(t.stream_file(str(path), chunk_bytes=2)) == b"hello\n"
        with pytest.raises(TransportError, match="larger than 3 bytes"):
            t.read_file(str(path), max_bytes=3)
        with pytest.raises(TransportError, match=r"^h:/nonexistent/x: no such file"):
            t.read_file("/nonexistent/x", max_bytes=10)
        os.mkfifo(tmp_path / "fifo")
        with pytest.raises(TransportError, match="not a regular file"):
            t.read_file(str(tmp_path / "fifo"), max_bytes=10)
        os.symlink("/var/log/x.log", tmp_path / "link")
        assert t.readlink(str(tmp_path / "link")) == "/var/log/x.log"
        assert "f.txt" in t.list_dir(str(tmp_path))
    finally:
        t.close()


def test_unknown_host_key_refused_then_accepted(sshd, ssh_options, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    known = tmp_path / "known_hosts"
    known.write_text("")
    opts = dataclasses.replace(ssh_options, known_hosts=str(known))
    with pytest.raises(HostUnreachable, match="unknown host key ssh-ed25519 SHA256:") as e:
        SSHTransport("h", sshd.address, opts)
    assert "--accept-new-host-key" in str(e.value)
    assert known.read_text() == ""  # refusing records nothing
    SSHTransport("h", sshd.address, dataclasses.replace(opts, accept_new_host_key=True)).close()
    assert f"[127.0.0.1]:{sshd.port} ssh-ed25519 " in known.read_text()
    SSHTransport("h", sshd.address, opts).close()  # now known: no opt-in needed


def test_changed_host_key_always_refused(sshd, ssh_options, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    other = (sshd.directory / "id_wrong.pub").read_text().split()
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{sshd.port} {other[0]} {other[1]}\n")
    for accept in (False, True):
        opts = dataclasses.replace(ssh_options, known_hosts=str(known), accept_new_host_key=accept)
        with pytest.raises(HostUnreachable, match="HOST KEY CHANGED"):
            SSHTransport("h", sshd.address, opts)


def test_wrong_key_refused(sshd, ssh_options) -> None:  # type: ignore[no-untyped-def]
    opts = dataclasses.replace(
        ssh_options, identity_files=(str(sshd.wrong_key),), ssh_config="/dev/null"
    )
    with pytest.raises(HostUnreachable, match=r"h \(.*@127\.0\.0\.1:\d+\): authentication failed"):
        SSHTransport("h", sshd.address, opts)


def test_encrypted_key_without_terminal(sshd, ssh_options, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import subprocess

    key = tmp_path / "id_locked"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "pw", "-f", str(key)], check=True)
    opts = dataclasses.replace(ssh_options, identity_files=(str(key),), ssh_config="/dev/null")
    with pytest.raises(HostUnreachable, match="encrypted"):
        SSHTransport("h", sshd.address, opts)


def test_connection_refused_and_timeout(ssh_options) -> None:  # type: ignore[no-untyped-def]
    from fixtures.sshd import free_port

    with pytest.raises(HostUnreachable, match="cannot connect"):
        SSHTransport("h", f"127.0.0.1:{free_port()}", ssh_options)


def test_proxy_jump(sshd, ssh_options) -> None:  # type: ignore[no-untyped-def]
    opts = dataclasses.replace(ssh_options, proxy_jump=sshd.address)
    t = SSHTransport("h", sshd.address, opts)
    try:
        assert t.run(["echo", "through the jump host"]).stdout == b"through the jump host\n"
    finally:
        t.close()


def test_every_known_hosts_file_is_consulted(sshd, ssh_options, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Item 13: a changed key in the second UserKnownHostsFile word or in a
    GlobalKnownHostsFile is refused even under --accept-new-host-key."""
    other = (sshd.directory / "id_wrong.pub").read_text().split()
    stale = f"[127.0.0.1]:{sshd.port} {other[0]} {other[1]}\n"
    first, second, glob = tmp_path / "kh1", tmp_path / "kh2", tmp_path / "global"
    for where in ("user", "global"):
        first.write_text("")
        second.write_text(stale if where == "user" else "")
        glob.write_text(stale if where == "global" else "")
        cfg = tmp_path / "config"
        cfg.write_text(
            f"Host *\n  UserKnownHostsFile {first} {second}\n  GlobalKnownHostsFile {glob}\n"
        )
        opts = dataclasses.replace(
            ssh_options, known_hosts=None, ssh_config=str(cfg), accept_new_host_key=True
        )
        with pytest.raises(HostUnreachable, match="HOST KEY CHANGED"):
            SSHTransport("h", sshd.address, opts)
        assert first.read_text() == ""  # nothing recorded


def test_parallel_connections_record_a_new_key_once(sshd, ssh_options, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from concurrent.futures import ThreadPoolExecutor

    known = tmp_path / "known_hosts"
    opts = dataclasses.replace(ssh_options, known_hosts=str(known), accept_new_host_key=True)

    def connect(_: int) -> None:
        SSHTransport("h", sshd.address, opts).close()

    with ThreadPoolExecutor(max_workers=20) as pool:
        list(pool.map(connect, range(20)))
    lines = [ln for ln in known.read_text().splitlines() if ln.strip()]
    assert len(lines) == 1, lines


def test_garbage_banner_is_one_line_without_traceback(tmp_path: Path) -> None:
    """Item 16: a server that answers garbage: one line, no paramiko traceback on stderr."""
    import socket
    import subprocess
    import sys
    import threading

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    port = srv.getsockname()[1]

    def answer() -> None:
        for _ in range(4):
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            conn.sendall(b"\x00\xff garbage banner \x1b[2J\r\n" * 50)
            conn.close()

    threading.Thread(target=answer, daemon=True).start()
    repo = Path(__file__).resolve().parents[2]
    p = subprocess.run(
        [
            sys.executable, "-m", "dflash_doctor", "check", f"127.0.0.1:{port}",
            "--known-hosts", str(tmp_path / "kh"), "--ssh-config", "/dev/null",
            "--connect-timeout", "3", "--timeout", "20",
        ],
        capture_output=True, text=True, timeout=120, cwd=repo,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(repo)},
    )  # fmt: skip
    srv.close()
    assert p.returncode == 3, p.stdout + p.stderr
    assert "Traceback" not in p.stderr and "\x1b" not in p.stdout + p.stderr
    assert "unreachable" in p.stdout


def test_a_timed_out_command_is_ended_on_the_host(sshd, ssh_options, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Issue 10 item 12: the remote process group ends when we stop waiting, children too."""
    marker = tmp_path / "pids"
    t = SSHTransport("h", sshd.address, ssh_options)
    try:
        script = f"sleep 60 & echo $! > {marker}; echo $$ >> {marker}; wait"
        with pytest.raises(TransportError, match="timed out after 1s"):
            t.run(["sh", "-c", script], timeout=1)
    finally:
        t.close()
    pids = [int(p) for p in marker.read_text().split()]
    assert len(pids) == 2
    deadline = time.monotonic() + 15
    alive = pids
    while alive and time.monotonic() < deadline:
        time.sleep(0.2)
        alive = [p for p in pids if _running(p)]
    assert not alive, f"still running on the host: {alive}"


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False
