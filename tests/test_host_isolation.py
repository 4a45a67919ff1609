"""Host interpreters never reach the doctor's terminal, and their output is bounded (issue 22
item 2).

The doctor runs as root from an interactive shell; whatever interpreter it starts on a host
(the owner's Python, a probe, the bench client, the bundle) must read EOF on stdin, have no
controlling terminal (so TIOCSTI cannot push commands into root's shell), and be ended with
one line when it prints more than the bound. A stand-in interpreter records what it saw in a
marker file; the "doctor" runs inside a real pseudo-terminal that is its controlling tty.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dflash_doctor.errors import TransportError
from dflash_doctor.host_exec import HostExec
from dflash_doctor.hosts import HostSpec
from dflash_doctor.transport.local import LocalTransport
from tests.conftest import REPO

# What a hostile interpreter tries: open the controlling terminal, push a byte into its
# input queue (TIOCSTI), read stdin. Its findings go to the marker named by argv[1].
STAND_IN = """#!/usr/bin/python3
import fcntl, json, os, select, sys, termios
seen = {"stdin_isatty": os.isatty(0), "tty": False, "tiocsti": False}
try:
    fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    seen["tty"] = True
    try:
        fcntl.ioctl(fd, termios.TIOCSTI, b"#")
        seen["tiocsti"] = True
    except OSError:
        pass
except OSError:
    pass
ready = select.select([0], [], [], 3)[0]
seen["stdin"] = ("eof" if os.read(0, 1) == b"" else "data") if ready else "blocked"
seen["session_leader"] = os.getsid(0) == os.getpid()
with open(sys.argv[-1], "w") as f:
    json.dump(seen, f)
"""

# The doctor's side: a process whose controlling terminal is the pty; it runs argv through
# the local transport, as every gatherer does.
DOCTOR = """
import json, sys
from dflash_doctor.transport.local import LocalTransport
res = LocalTransport("h").run(json.loads(sys.argv[1]), timeout=30)
print("rc", res.returncode)
"""


def stand_in(where: Path) -> Path:
    path = where / "python3"
    path.write_text(STAND_IN)
    os.chmod(path, 0o755)
    return path


def run_in_terminal(argv: list[str]) -> str:
    """Run `argv` through LocalTransport from a process whose controlling tty is a pty."""
    import fcntl
    import termios

    master, slave = os.openpty()

    def take_terminal() -> None:
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-c", DOCTOR, json.dumps(argv)],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
        preexec_fn=take_terminal,  # the test needs a controlling terminal
        env=env,
    )
    os.close(slave)
    out = b""
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        import select

        if select.select([master], [], [], 0.2)[0]:
            try:
                out += os.read(master, 65536)
            except OSError:
                break
    proc.kill()  # only the process this test started (no-op once it exited)
    proc.wait()
    os.close(master)
    return out.decode("utf-8", "replace")


def require_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: the interpreter rules trust only root-owned files here")


def test_interpreter_has_no_terminal_and_reads_eof(scratch: Path) -> None:
    """An interpreter started through HostExec.prefix and the local transport, from a
    doctor sitting on a terminal: no /dev/tty, no TIOCSTI, EOF on stdin."""
    require_root()
    python = stand_in(scratch)
    marker = scratch / "seen.json"
    argv = [*HostExec(LocalTransport("h"), HostSpec.of(name="h")).prefix(str(python), pid=None)]
    said = run_in_terminal([*argv, str(marker)])
    assert marker.exists(), said
    seen = json.loads(marker.read_text())
    assert seen["stdin"] == "eof", seen
    assert not seen["stdin_isatty"], seen
    assert not seen["tty"], seen  # no controlling terminal: nothing to push input into
    assert not seen["tiocsti"], seen


def test_tiocsti_blocked_where_the_kernel_allows_it(scratch: Path) -> None:
    """Where the kernel still honours TIOCSTI, the stand-in could inject into root's shell
    if it shared the terminal; it must not be able to."""
    require_root()
    legacy = Path("/proc/sys/dev/tty/legacy_tiocsti")
    if legacy.exists() and legacy.read_text().strip() == "0":
        pytest.skip("kernel refuses TIOCSTI (dev.tty.legacy_tiocsti=0): nothing to inject")
    python = stand_in(scratch)
    marker = scratch / "seen.json"
    said = run_in_terminal([str(python), str(marker)])
    seen = json.loads(marker.read_text())
    assert not seen["tiocsti"], seen
    assert "#" not in said.replace("rc 0", "")  # nothing was echoed back into the terminal


def test_ssh_command_reads_eof_and_has_no_terminal(sshd, ssh_options, scratch: Path) -> None:  # type: ignore[no-untyped-def]
    """Over SSH no terminal is asked for and stdin is closed at once: EOF, never a wait."""
    from dflash_doctor.transport.ssh import SSHTransport

    python = stand_in(scratch)
    marker = scratch / "seen.json"
    t = SSHTransport("h", sshd.address, ssh_options)
    try:
        start = time.monotonic()
        assert t.run([str(python), str(marker)], timeout=20).ok
        assert time.monotonic() - start < 2.5  # the 3 s wait for stdin did not happen
    finally:
        t.close()
    seen = json.loads(marker.read_text())
    assert seen["stdin"] == "eof" and not seen["tty"], seen


def test_output_is_bounded_with_one_line() -> None:
    """A command that prints past the bound (a child of it too) is ended; one line names the
    host, the command and the output that was cut."""
    t = LocalTransport("box", max_output=1024 * 1024)
    flood = "import sys\nwhile True: sys.stdout.buffer.write(b'x' * 65536)\n"
    start = time.monotonic()
    with pytest.raises(TransportError) as e:
        # sh forks the flood as a child: the whole session is ended, not only sh.
        t.run(["sh", "-c", f'{sys.executable} -c "$1"; sleep 60', "sh", flood], timeout=60)
    message = str(e.value)
    assert "\n" not in message
    assert message.startswith("box: sh ") and "1048576 bytes on stdout" in message
    assert time.monotonic() - start < 20
    with pytest.raises(TransportError, match="on stderr"):
        t.run([sys.executable, "-c", flood.replace("stdout", "stderr")], timeout=60)
    assert t.run(["printf", "ok"]).stdout == b"ok"  # under the bound: untouched
