"""Host interpreters run as the server process's owner, or not at all (issue 10 item 1).

The tests run as root, as the doctor usually does: an unprivileged user made here starts a
process that looks like an SGLang server, and the doctor must never run that user's
interpreter or import path as root.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from dflash_doctor.errors import FactError
from dflash_doctor.finders.launch import ask_sglang
from dflash_doctor.finders.version import find_version, run_version_query
from dflash_doctor.gather import find_launch
from dflash_doctor.host_exec import HostExec, parse_status_ids
from dflash_doctor.hosts import HostSpec
from dflash_doctor.transport.local import LocalTransport
from tests.conftest import REPO

SYSTEM_PYTHON = "/usr/bin/python3"
FAKE = str(REPO / "fixtures" / "fake_sglang")


def test_status_ids_take_the_unprivileged_id() -> None:
    text = "Name:\tpython3\nUid:\t1001\t0\t0\t0\nGid:\t1001\t1001\t1001\t1001\n"
    owner = parse_status_ids(text)
    assert (owner.uid, owner.gid) == (1001, 1001)
    with pytest.raises(FactError):
        parse_status_ids("Uid:\t\u0661\u0662\t0\t0\t0\nGid:\t0\t0\t0\t0\n")  # unicode digits


@pytest.fixture(scope="module")
def user() -> Iterator[pwd.struct_passwd]:
    if os.geteuid() != 0:
        pytest.skip("needs root: the doctor's privilege is what is tested")
    if shutil.which("useradd") is None or shutil.which("setpriv") is None:
        pytest.skip("useradd or setpriv not installed: cannot make an unprivileged user")
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        pytest.skip(f"{SYSTEM_PYTHON} missing: the user needs an interpreter it can run")
    name = f"dfd{uuid.uuid4().hex[:8]}"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/false", name], check=True)
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", name], check=False)


@pytest.fixture
def server(user: pwd.struct_passwd) -> Iterator[int]:
    """A process of that user whose command line looks like an SGLang server."""
    proc = subprocess.Popen(
        [
            "setpriv",
            f"--reuid={user.pw_uid}",
            f"--regid={user.pw_gid}",
            "--clear-groups",
            SYSTEM_PYTHON,
            "-c",
            "import time; time.sleep(60)",
            "-m",
            "sglang.launch_server",
            "--model-path",
            "m",
        ]
    )
    # Until setpriv has exec'd the interpreter (load): setpriv's own argv already names
    # sglang.launch_server, and during the exec the cmdline reads empty, so wait for argv[0].
    deadline = time.monotonic() + 60
    cmdline = Path(f"/proc/{proc.pid}/cmdline")
    while cmdline.read_bytes().split(b"\0")[0] != SYSTEM_PYTHON.encode():
        assert time.monotonic() < deadline, "the stand-in process did not start"
        time.sleep(0.05)
    try:
        yield proc.pid
    finally:
        proc.kill()  # only the process this test started
        proc.wait()


def runs_as(argv: list[str]) -> int:
    res = subprocess.run(
        [*argv, "-c", "import os; print(os.getuid())"], capture_output=True, check=True
    )
    return int(res.stdout)


def test_interpreter_runs_as_the_process_owner(user: pwd.struct_passwd, server: int) -> None:
    """The owner's interpreter runs under setpriv as that uid: never as root."""
    host = HostExec(LocalTransport("h"), HostSpec.of(name="h"))
    argv = host.prefix(SYSTEM_PYTHON, pid=server, env={"PYTHONPATH": "/nonexistent"})
    assert argv[0] == "setpriv" and f"--reuid={user.pw_uid}" in argv
    assert runs_as(argv) == user.pw_uid
    assert "env" in argv and "-i" in argv  # the doctor's environment does not leak


def test_native_parser_and_version_run_as_owner(
    user: pwd.struct_passwd, server: int, scratch: Path
) -> None:
    """The gatherer's native parse and version query ask as the owner; a marker proves it."""
    t = LocalTransport("h")
    found = find_launch(t, HostSpec.of(name="h", pid=server), {})
    launch = found.launch
    assert launch.value is not None and found.pid == server
    assert launch.value.python == SYSTEM_PYTHON
    assert found.server.value is not None and found.server.value.python == SYSTEM_PYTHON
    # The owner's import path: a module that records who imported it.
    tmp_path = scratch
    pkg = tmp_path / "spy"
    (pkg / "sglang" / "srt").mkdir(parents=True)
    marker = tmp_path / "who"
    (pkg / "sglang" / "__init__.py").write_text(
        f"import os\nopen({str(marker)!r}, 'w').write(str(os.getuid()))\n__version__ = '0.5.23'\n"
    )
    (pkg / "sglang" / "srt" / "__init__.py").write_text("")
    shutil.copy(Path(FAKE) / "sglang" / "srt" / "server_args.py", pkg / "sglang" / "srt")
    for p in (pkg, pkg / "sglang", pkg / "sglang" / "srt"):
        os.chmod(p, 0o755)
    dist = pkg / "sglang-0.5.23.dist-info"
    dist.mkdir(mode=0o755)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.23\n")
    marker.touch()
    os.chown(marker, user.pw_uid, user.pw_gid)  # the owner may write its marker
    env = {"PYTHONPATH": str(pkg)}
    run_as = HostExec(t, HostSpec.of(name="h"))
    args, _ = ask_sglang(t, run_as, launch.value, launch.value.python, server, env)
    assert marker.read_text() == str(user.pw_uid)
    assert args.parser == "sglang" and args.native_refused is None
    marker.write_text("")

    def ask(python: str) -> str:
        return run_version_query(t, run_as.prefix(python, pid=server, env=env))

    version = find_version(t, "h", args.python, ask)
    assert version.value == "0.5.23"  # no dist-info beside the interpreter: importlib asked
    assert version.source and "importlib" in version.source


def test_refused_native_parse_says_why(user: pwd.struct_passwd, server: int) -> None:
    """A process whose interpreter cannot be trusted: the fallback stands, with the reason."""
    del user
    t = LocalTransport("h")
    launch = find_launch(t, HostSpec.of(name="h", pid=server), {}).launch
    assert launch.value is not None
    bad = launch.value.model_copy(update={"python": "-S /tmp/x/python3"})
    args, _ = ask_sglang(t, HostExec(t, HostSpec.of(name="h")), bad, bad.python, server, {})
    assert args.parser == "fallback"
    assert args.native_refused and "not an absolute path" in args.native_refused


def test_world_writable_interpreter_is_refused(user: pwd.struct_passwd, server: int) -> None:
    del user
    d = Path("/tmp") / f"dfd-{uuid.uuid4().hex[:8]}"
    d.mkdir(mode=0o755)
    try:
        evil = d / "python3"
        shutil.copy(SYSTEM_PYTHON, evil)
        os.chmod(evil, 0o777)
        host = HostExec(LocalTransport("h"), HostSpec.of(name="h"))
        with pytest.raises(FactError, match="writable by users other than its owner"):
            host.prefix(str(evil), pid=server)
    finally:
        shutil.rmtree(d)


def test_foreign_owned_interpreter_is_refused(user: pwd.struct_passwd, server: int) -> None:
    d = Path("/tmp") / f"dfd-{uuid.uuid4().hex[:8]}"
    d.mkdir(mode=0o755)
    try:
        foreign = d / "python3"
        shutil.copy(SYSTEM_PYTHON, foreign)
        os.chown(foreign, user.pw_uid + 1, user.pw_gid)  # neither root nor the owner
        host = HostExec(LocalTransport("h"), HostSpec.of(name="h"))
        with pytest.raises(FactError, match=f"owned by uid {user.pw_uid + 1}"):
            host.prefix(str(foreign), pid=server)
        # and without a process: nobody's but root's or the doctor's
        with pytest.raises(FactError, match="owned by uid"):
            host.prefix(str(foreign), pid=None)
    finally:
        shutil.rmtree(d)


def test_interpreter_in_a_user_writable_directory_is_refused_for_root(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root")
    d = tmp_path / "venv"
    d.mkdir()
    os.chmod(d, 0o777)
    py = d / "python3"
    shutil.copy(SYSTEM_PYTHON, py)
    host = HostExec(LocalTransport("h"), HostSpec.of(name="h"))
    with pytest.raises(FactError, match="venv is writable"):
        host.prefix(str(py), pid=None)


def test_option_strings_never_run() -> None:
    """`env -S ... /python3` as argv[0]: not an absolute path, so not run; no env option."""
    host = HostExec(LocalTransport("h"), HostSpec.of(name="h"))
    for bad in ("-S /tmp/x/python3", "bin/python3", "--split-string=/tmp/python3", ""):
        with pytest.raises(FactError, match="not an absolute path"):
            host.prefix(bad, pid=None)
    # a bare name is looked up on the host's PATH, and the result checked like any other
    argv = host.prefix("python3", pid=None)
    assert argv[-1].startswith("/") and argv[-1].endswith(("python3", "python3.11"))


def test_root_own_interpreter_runs_as_is() -> None:
    """A root-owned interpreter in root-owned directories, no process: the doctor's own."""
    host = HostExec(LocalTransport("h"), HostSpec.of(name="h"))
    argv = host.prefix(sys.executable, pid=None, env={"PYTHONPATH": FAKE})
    # In `/`, stdin from /dev/null (host_exec_rules.NEUTRAL_SCRIPT), then a clean env.
    assert argv[:2] == ["sh", "-c"] and argv[4:6] == ["env", "-i"]
    assert f"PYTHONPATH={FAKE}" in argv
    assert runs_as(argv) == os.geteuid()


def test_untrusted_import_path_entries_are_dropped_without_a_process(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root")
    open_dir = tmp_path / "drop"
    open_dir.mkdir()
    os.chmod(open_dir, 0o777)
    host = HostExec(LocalTransport("h"), HostSpec.of(name="h"))
    argv = host.prefix(sys.executable, pid=None, env={"PYTHONPATH": f"{open_dir}:{FAKE}"})
    assert f"PYTHONPATH={FAKE}" in argv
