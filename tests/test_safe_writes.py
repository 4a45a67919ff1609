"""What `fix --apply` and `--rollback` write, back up and restore in a directory another user
controls (issue 22 items 3 and 5 and the medium items on owners, symlinked launch files,
concurrent edits and stale health answers). Run as root with a real unprivileged owner
(tests/test_relaunch_owner.py's fixture): the owner's own process swaps names for links
while root writes, or plants backups; root never changes, restores or runs the file a
link points to.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dflash_doctor.errors import TransportError, UnsafeFile
from dflash_doctor.facts.launch import parse_launch_file
from dflash_doctor.fix.apply import apply_plan, rollback
from dflash_doctor.fix.journal import open_journal
from dflash_doctor.fix.plan import FixPlan
from dflash_doctor.hosts import HostSpec
from dflash_doctor.transport.base import FileId
from dflash_doctor.transport.local import LocalTransport
from dflash_doctor.transport.open import open_transport
from fixtures.stand_in import healthy
from tests.test_apply_safety import _facts, fix, servers  # noqa: F401 - a fixture
from tests.test_relaunch_owner import owner  # noqa: F401 - a fixture

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or os.geteuid() != 0 or shutil.which("useradd") is None,
    reason="needs Linux, root and useradd (a real unprivileged owner)",
)
ROOT_ONLY = b"#!/bin/sh\necho ROOT-ONLY-SECRET\n"
SCRIPT = "#!/bin/sh\nexec python -m sglang.launch_server --tp 2\n"
# The owner's process: every temporary name beside serve.sh becomes a link to root's file.
SWAPPER = """
import os, sys, time
d, target = sys.argv[1], sys.argv[2]
end = time.monotonic() + 60
while time.monotonic() < end and not os.path.exists(os.path.join(d, "stop")):
    for n in os.listdir(d):
        if n.startswith(".serve.sh"):
            p = os.path.join(d, n)
            try:
                os.unlink(p)
                os.symlink(target, p)
            except OSError:
                pass
"""


@pytest.fixture
def owned(owner: tuple[str, int, int]) -> Iterator[dict[str, Any]]:  # noqa: F811
    """A directory and launch script of the owner's, and a root-only file outside it."""
    _name, uid, gid = owner
    root = Path(tempfile.mkdtemp(prefix="dfd-safe-", dir="/tmp"))
    root.chmod(0o755)
    d = root / "srv"
    d.mkdir()
    script = d / "serve.sh"
    script.write_text(SCRIPT)
    script.chmod(0o750)
    os.chown(d, uid, gid)
    os.chown(script, uid, gid)
    private = root / "private"
    private.mkdir(mode=0o700)
    secret = private / "root-only.sh"
    secret.write_bytes(ROOT_ONLY)
    secret.chmod(0o600)
    try:
        yield {"uid": uid, "gid": gid, "dir": d, "script": script, "secret": secret}
    finally:
        for s in _journals(script):
            shutil.rmtree(s, ignore_errors=True)
        shutil.rmtree(root, ignore_errors=True)


def _journals(script: Path) -> list[str]:
    spec = HostSpec.of(name="h", offline=True)
    return [open_journal(open_transport(spec), spec, str(script), "x").dir]


def _plan(script: Path, old: str, new: str) -> tuple[HostSpec, FixPlan]:
    from dflash_doctor.facts.launch import parse_script

    launch = parse_script(old.encode(), source=str(script))
    plan = FixPlan(host="h", source=str(script), launch=launch, old_text=old, new_text=new)
    return HostSpec.of(name="h", offline=True), plan


def _untouched(secret: Path) -> None:
    st = secret.lstat()
    assert secret.read_bytes() == ROOT_ONLY
    assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (0, 0, 0o600), oct(st.st_mode)


def test_links_swapped_in_while_root_writes_are_never_followed(owned: dict[str, Any]) -> None:
    """The owner swaps every temporary name for a link to root's file while root rewrites
    the script 150 times: root's file keeps its mode and bytes; each write either lands
    (the owner's file, with the owner's uid and gid) or is refused with one line."""
    d, script, secret = owned["dir"], owned["script"], owned["secret"]
    swapper = subprocess.Popen(
        ["setpriv", f"--reuid={owned['uid']}", f"--regid={owned['gid']}", "--clear-groups",
         "--", sys.executable, "-c", SWAPPER, str(d), str(secret)],
    )  # fmt: skip
    t = LocalTransport("h")
    data = SCRIPT.encode() + b"# padding\n" * 40000  # a longer write: a wider window
    landed = refused = 0
    try:
        time.sleep(0.3)
        for _ in range(150):
            try:
                got = t.write_file(str(script), data, mode=0o6755)
            except TransportError as e:
                assert "\n" not in str(e) and str(e).startswith("h:"), e
                refused += 1
                continue
            landed += 1
            st = script.lstat()
            assert (st.st_uid, st.st_gid) == (owned["uid"], owned["gid"])
            assert got is not None and (got.ino, got.uid) == (st.st_ino, owned["uid"])
            _untouched(secret)
    finally:
        (d / "stop").touch()
        swapper.wait(timeout=30)
    _untouched(secret)
    assert landed + refused == 150
    if not script.is_symlink():  # the owner's race may leave its own link there: theirs
        st = script.lstat()
        assert (st.st_uid, st.st_gid) == (owned["uid"], owned["gid"])


def test_a_link_in_the_directory_path_is_refused(owned: dict[str, Any]) -> None:
    """A directory of the path swapped for a link after the path was resolved: refused,
    root's directory gets no file."""
    d, secret = owned["dir"], owned["secret"]
    moved = d.parent / "srv-real"
    d.rename(moved)
    d.symlink_to(secret.parent)
    with pytest.raises(UnsafeFile, match="symbolic link"):
        LocalTransport("h").write_file(str(d / "serve.sh"), b"x", mode=0o755)
    with pytest.raises(UnsafeFile):
        LocalTransport("h").create_file(str(d / "serve.sh.bak"), b"x")
    assert sorted(p.name for p in secret.parent.iterdir()) == ["root-only.sh"]


def test_a_planted_backup_link_is_neither_kept_nor_restored(owned: dict[str, Any]) -> None:
    """The owner plants `serve.sh.dflash-doctor-STAMP.bak` links to root's file: the apply
    does not take one for its own backup (it stops, nothing changed), and --rollback
    restores only copies the doctor kept, never a planted name."""
    script, secret = owned["script"], owned["secret"]
    for stamp in ("20260101T000000", "20260101T000100"):
        (script.parent / f"serve.sh.dflash-doctor-{stamp}.bak").symlink_to(secret)
    spec, plan = _plan(script, SCRIPT, SCRIPT.replace("--tp 2", "--tp 2 --page-size 64"))
    out = apply_plan(spec, open_transport(spec), plan, _facts(), stamp="20260101T000100")
    assert out.status == "failed" and "not a backup dflash-doctor made" in out.message
    assert "\n" not in out.message and script.read_text() == SCRIPT
    p = fix("--offline", "--launch", str(script), "--rollback", "--yes")
    assert p.returncode != 0 and "no dflash-doctor backup" in p.stdout, p.stdout + p.stderr
    assert script.read_text() == SCRIPT
    _untouched(secret)


def test_apply_keeps_the_owner_and_mode_of_file_and_backup(owned: dict[str, Any]) -> None:
    """Launch file and backup stay the owner's (uid, gid, mode), not root's, and so does
    the file --rollback restores."""
    script = owned["script"]
    spec, plan = _plan(script, SCRIPT, SCRIPT.replace("--tp 2", "--tp 2 --page-size 64"))
    out = apply_plan(spec, open_transport(spec), plan, _facts(), stamp="20260101T000000")
    assert out.status == "written", out.message
    (bak,) = script.parent.glob("serve.sh.dflash-doctor-*.bak")
    for f in (script, bak):
        st = f.lstat()
        assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (
            owned["uid"], owned["gid"], 0o750,
        ), f  # fmt: skip
    assert bak.read_text() == SCRIPT and "--page-size 64" in script.read_text()
    p = fix("--offline", "--launch", str(script), "--rollback", "--yes")
    assert p.returncode == 0, p.stdout + p.stderr
    st = script.lstat()
    assert script.read_text() == SCRIPT and (st.st_uid, st.st_mode & 0o777) == (owned["uid"], 0o750)


class _EditedMeanwhile(LocalTransport):
    """Someone edits the launch file after the doctor read it, while it makes its backup;
    every file operation is the real one."""

    def create_file(
        self,
        path: str,
        data: bytes,
        *,
        mode: int = 0o600,
        owner: tuple[int, int] | None = None,  # noqa: F811 - a parameter, not the fixture
    ) -> FileId:
        made = super().create_file(path, data, mode=mode, owner=owner)
        if path.endswith(".bak"):
            with open(path.removesuffix(path[path.index(".dflash-doctor-") :]), "a") as f:
                f.write("# an edit made meanwhile\n")
        return made


def test_an_edit_between_read_and_write_is_refused_not_lost(owned: dict[str, Any]) -> None:
    script = owned["script"]
    spec, plan = _plan(script, SCRIPT, SCRIPT.replace("--tp 2", "--tp 2 --page-size 64"))
    out = apply_plan(spec, _EditedMeanwhile("h"), plan, _facts(), stamp="20260101T000000")
    assert out.status == "failed" and "changed since it was read" in out.message, out.message
    assert script.read_text() == SCRIPT + "# an edit made meanwhile\n"


def test_rollback_undoes_a_fix_made_through_a_symlinked_launch_file(
    owned: dict[str, Any],
) -> None:
    script = owned["script"]
    link = script.parent / "current.sh"
    link.symlink_to(script)
    spec, plan = _plan(link, SCRIPT, SCRIPT.replace("--tp 2", "--tp 2 --page-size 64"))
    out = apply_plan(spec, open_transport(spec), plan, _facts(), stamp="20260101T000000")
    assert out.status == "written" and "--page-size 64" in script.read_text(), out.message
    p = fix("--offline", "--launch", str(link), "--rollback", "--yes")
    assert p.returncode == 0, p.stdout + p.stderr
    assert link.is_symlink() and script.read_text() == SCRIPT


IMPOSTOR = """
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def test_rollback_does_not_trust_another_processs_health_answer(servers: Any) -> None:  # noqa: F811
    """The launch file's server is gone (no pid to follow); another process answers /health
    on its port. The rollback must not take that answer for the restored server's: it
    refuses before changing anything."""
    s = servers("s")
    s.write()
    text = s.script.read_text()
    spec, plan = _plan(s.script, text, text.replace("131072", "65536"))
    assert apply_plan(spec, open_transport(spec), plan, _facts(), stamp="1").status == "written"
    fixed = s.script.read_text()
    impostor = subprocess.Popen([sys.executable, "-c", IMPOSTOR, str(s.port)])
    live = HostSpec.of(name="local", launch_file=str(s.script), sglang_version="0.5.13")
    launch = parse_launch_file(fixed.encode(), source=str(s.script), path=str(s.script))
    try:
        deadline = time.monotonic() + 30
        while not healthy(s.port):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        out = rollback(live, LocalTransport("local"), str(s.script), _facts(), launch, 20)
        assert out.status == "failed", out.message
        assert "another process holds the port" in out.message, out.message
        assert s.script.read_text() == fixed and impostor.poll() is None
    finally:
        impostor.kill()
        impostor.wait()
        for j in _journals(s.script):
            shutil.rmtree(j, ignore_errors=True)


def test_over_ssh_the_host_writes_through_descriptors_too(
    sshd: Any, ssh_options: Any, owned: dict[str, Any]
) -> None:
    """The SSH transport runs the same descriptor-based helper on the host (under its
    system python3): a link at the name is refused, never written through; a backup name
    taken by a link is refused; a replaced file keeps its owner; a concurrent change is
    refused."""
    from dflash_doctor.errors import FileExists
    from dflash_doctor.transport.ssh import SSHTransport

    script, secret = owned["script"], owned["secret"]
    t = SSHTransport("h", sshd.address, ssh_options)
    try:
        before = t.file_id(str(script))
        assert before.kind == "file" and before.uid == owned["uid"] and before.sha256
        got = t.write_file(str(script), b"#!/bin/sh\necho new\n", mode=0o750, expect=before)
        st = script.lstat()
        assert got is not None and got.ino == st.st_ino
        assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (owned["uid"], owned["gid"], 0o750)
        with pytest.raises(UnsafeFile, match="changed since it was read"):
            t.write_file(str(script), b"lost\n", mode=0o750, expect=before)
        link = script.parent / "serve.sh.dflash-doctor-1.bak"
        link.symlink_to(secret)
        with pytest.raises(FileExists):
            t.create_file(str(link), b"x", mode=0o644)
        with pytest.raises(UnsafeFile, match="not a regular file"):
            t.write_file(str(link), b"x", mode=0o4755)
        assert t.file_id(str(link)).kind == "link"
    finally:
        t.close()
    assert script.read_bytes() == b"#!/bin/sh\necho new\n"
    _untouched(secret)
