"""Issue 22: a root-owned server's environment is not trusted past what root alone controls.
A PYTHONPATH entry another user can write refuses the run (one line); another user's HOME
is not passed on (their `~/.local` site-packages would run as root). Marker files prove
what ran, and as whom."""

from __future__ import annotations

import os
import pwd
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dflash_doctor.errors import FactError
from dflash_doctor.host_exec import HostExec
from dflash_doctor.hosts import HostSpec
from dflash_doctor.transport.local import LocalTransport
from tests.test_host_exec import SYSTEM_PYTHON, user  # noqa: F401  (the fixture)


@pytest.fixture
def root_server() -> Iterator[int]:
    """A root-owned process whose command line looks like an SGLang server."""
    if os.geteuid() != 0:
        pytest.skip("needs root: a root-owned server is what is tested")
    argv = [SYSTEM_PYTHON, "-c", "import time; time.sleep(60)", "-m", "sglang.launch_server"]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while b"sglang.launch_server" not in Path(f"/proc/{proc.pid}/cmdline").read_bytes():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    try:
        yield proc.pid
    finally:
        proc.kill()  # only the process this test started
        proc.wait()


def _host() -> HostExec:
    return HostExec(LocalTransport("h"), HostSpec.of(name="h"))


def test_world_writable_import_path_of_a_root_server_is_refused(
    root_server: int, scratch: Path
) -> None:
    planted = scratch / "open"
    planted.mkdir()
    os.chmod(planted, 0o777)  # any user may drop a module here
    marker = scratch / "marker"
    (planted / "sitecustomize.py").write_text(
        f"import os\nopen({str(marker)!r}, 'w').write(str(os.getuid()))\n"
    )
    with pytest.raises(FactError, match=r"PYTHONPATH entry .*open of a root-owned server") as e:
        argv = _host().prefix(SYSTEM_PYTHON, pid=root_server, env={"PYTHONPATH": str(planted)})
        subprocess.run([*argv, "-c", "pass"], check=False, timeout=60)
    assert "\n" not in str(e.value)
    assert not marker.exists()  # nothing of the planted directory ran as root
    # root's own entries still pass
    safe = scratch / "safe"
    safe.mkdir(mode=0o755)
    argv = _host().prefix(SYSTEM_PYTHON, pid=root_server, env={"PYTHONPATH": str(safe)})
    assert f"PYTHONPATH={safe}" in argv


def test_another_users_home_is_not_passed_to_root(
    root_server: int,
    user: pwd.struct_passwd,  # noqa: F811
    scratch: Path,
) -> None:
    home = scratch / "home"
    probe = "import sys; print('python%d.%d' % sys.version_info[:2])"
    py = subprocess.run(
        [SYSTEM_PYTHON, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.strip()
    site = home / ".local/lib" / py / "site-packages"
    site.mkdir(parents=True)
    marker = scratch / "home-marker"
    (site / "planted.pth").write_text(
        f"import os; open({str(marker)!r}, 'w').write(str(os.getuid()))\n"
    )
    for d in [home, *home.rglob("*")]:
        os.chown(d, user.pw_uid, user.pw_gid)  # the other user's HOME, theirs to change
    argv = _host().prefix(SYSTEM_PYTHON, pid=root_server, env={"HOME": str(home)})
    assert not any(w.startswith("HOME=") for w in argv)
    subprocess.run([*argv, "-c", "pass"], check=True, timeout=60)
    assert not marker.exists()  # their .pth never ran as root
    # root's own HOME is passed on
    argv = _host().prefix(SYSTEM_PYTHON, pid=root_server, env={"HOME": "/root"})
    assert "HOME=/root" in argv
