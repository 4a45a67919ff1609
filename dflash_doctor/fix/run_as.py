"""Who a relaunched server runs as: the stopped server's owner, never the doctor's root.

The doctor runs as root; the server it stops may be another user's. Starting that user's
script again as root would run their script, venv and everything they import as uid 0 from
then on (issue 22 item 1). So the relaunch takes, before anything is stopped, what the
server process had: its uid and gid (`/proc/PID/status`, the least privileged of each set, as
host_exec does), its supplementary groups (`Groups:`), and its whole environment
(`/proc/PID/environ`, every entry: the service's own settings, secrets included, which are
never shown). It starts as that user through the same setpriv words host_exec builds
(`host_exec_rules.as_user`) and `env -i -- NAME=value...`. When no server runs (a rollback
after it exited), the launch file's owner is the user (uid and gid of the file, or of its
directory when that is another user's and the file root's, as an older doctor's write left
it; writes now keep the file's owner; no supplementary groups); a root file in a root
directory keeps the doctor's environment, as before.

When the owner cannot be read, or the doctor can neither be nor become that user, the
relaunch is refused before anything is stopped. A systemd unit is never started here:
systemctl restarts it with its own `User=`.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from dflash_doctor.errors import DoctorError, TransportError
from dflash_doctor.host_exec import HostExec
from dflash_doctor.hosts import HostSpec
from dflash_doctor.on_host import host_exec_rules as rules
from dflash_doctor.transport.base import Transport

MAX_ENVIRON_BYTES = 1 << 20


@dataclass(frozen=True)
class RunAs:
    """How the relaunch starts: `prefix` goes before the start command; `shown` says as whom
    (ids and how many variables, never a value)."""

    prefix: tuple[str, ...]
    shown: str


def relaunch_as(t: Transport, spec: HostSpec, pid: int | None, source: str) -> RunAs:
    """The stopped server's owner (`pid`), else the owner of the launch file `source`.

    Raises TransportError (one line, nothing has been stopped) when it cannot be told or
    the doctor cannot start a process as that user.
    """
    try:
        if pid is not None:
            status = t.read_file(f"/proc/{pid}/status", max_bytes=64 * 1024)
            text = status.decode("ascii", "replace")
            uid, gid = rules.parse_status_ids(text)
            groups = rules.parse_status_groups(text)
            environ: list[str] | None = _entries(
                t.read_file(f"/proc/{pid}/environ", max_bytes=MAX_ENVIRON_BYTES)
            )
            whose = f"process {pid}"
        else:
            uid, gid = _file_owner(t, source)
            groups = ()
            environ = None if uid == 0 else [rules.CLEAN_PATH]
            whose = f"the owner of {source}"
        me = HostExec(t, spec).doctor_uid()
    except (DoctorError, rules.Refused, ValueError) as e:
        raise TransportError(
            f"{spec.name}: cannot tell the server's owner ({whose_of(pid, source)}: {e}); "
            "it is never relaunched as root in its owner's place"
        ) from None
    words = ["env", "-i", "--", *environ] if environ is not None else []
    if uid != me:
        if me != 0 and not spec.fix.sudo:
            raise TransportError(
                f"{spec.name}: the server belongs to uid {uid} and the doctor "
                f"(uid {me}) cannot start it as that user; run fix as root or as uid {uid}"
            )
        user = rules.as_user(uid, gid, groups)
        words = [*(["sudo", "-n"] if me != 0 else []), *user, *words]
    listed = ",".join(str(g) for g in groups) or "none"
    env = "" if environ is None else f", with {whose}'s environment ({len(environ)} variables)"
    return RunAs(tuple(words), f"as uid {uid} (gid {gid}, groups {listed}){env}")


def whose_of(pid: int | None, source: str) -> str:
    """What the owner is read from, for the refusal."""
    return f"process {pid}" if pid is not None else source


def _entries(raw: bytes) -> list[str]:
    """Every `NAME=value` of an environ block; an entry without a name or `=` (or not
    UTF-8, which no argv can carry through SSH) cannot be set and is refused as a whole."""
    out = []
    for item in raw.split(b"\0"):
        if not item:
            continue
        if item.startswith(b"=") or b"=" not in item:
            raise rules.Refused("an environment entry has no NAME=")
        out.append(item.decode("utf-8"))
    return out


def _file_owner(t: Transport, path: str) -> tuple[int, int]:
    """Who controls a launch file with no process to ask: its owner, or its directory's
    owner when that is another user (the doctor's own write leaves the file root's, and
    whoever owns the directory can replace it anyway); two different users: refused."""
    directory = posixpath.dirname(path) or "."
    res = t.run(["stat", "-L", "-c", "%u %g", "--", path, directory], timeout=10)
    lines = res.stdout.decode("ascii", "replace").splitlines()
    found = [ln.split() for ln in lines]
    ok = len(found) == 2 and all(len(w) == 2 for w in found)
    if not res.ok or not ok or not all(x.isdigit() and len(x) <= 10 for w in found for x in w):
        raise rules.Refused(f"cannot stat {path}")
    (fuid, fgid), (duid, dgid) = ((int(a), int(b)) for a, b in found)
    if fuid == duid or duid == 0:
        return fuid, fgid
    if fuid == 0:
        return duid, dgid
    raise rules.Refused(f"{path} is uid {fuid}'s in a directory of uid {duid}")
