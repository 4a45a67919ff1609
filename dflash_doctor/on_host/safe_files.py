"""File changes in a directory another user controls, made through descriptors (issue 22
items 3 and 5).

The doctor runs as root; the launch file's directory is usually its owner's, who can swap
any name in it for a symbolic link at any moment. So nothing here acts on a path twice:
the directory is opened once, walking every component with O_NOFOLLOW (a link that appears
after the path was resolved is refused); every file is made under a fresh random name with
O_CREAT|O_EXCL|O_NOFOLLOW and given its owner, group and mode through its descriptor
(fchown, fchmod), then renamed (or, for an exclusive create, hard-linked) relative to the
directory's descriptor, and the name is checked to hold that very inode afterwards. A file
replaced keeps the uid, gid of the one it replaces. `expect` (device, inode and sha256 of
the file as it was read) is checked again just before the rename: a concurrent edit is
refused, never overwritten.

The local transport calls these functions in the doctor; an SSH host runs this very file
under its root-owned system python3 (`python3 -I -S -c`, see transport/prefetch.py
guard_script) with one JSON request as its argument and the data on stdin, and answers
one JSON line. So: standard library only, and nothing newer than Python 3.8.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import secrets
import stat
import sys

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
MAX_READ = 1 << 20


class Unsafe(Exception):
    """The change is refused: a link or another file where one was expected, or a file
    changed since it was read. One line, naming the path."""


def split(path: str) -> tuple[str, str]:
    """The directory of `path` and its last name. Nothing is resolved here: the caller
    gives a resolved path, and a link anywhere in it now (one swapped in since) is refused
    by `open_dir`, a link at the name by each operation."""
    full = os.path.abspath(path)
    return os.path.dirname(full) or "/", os.path.basename(full)


def open_dir(path: str) -> int:
    """A descriptor of directory `path`, opened one component at a time, none followed."""
    fd = os.open("/", DIR_FLAGS)
    try:
        for part in [p for p in path.split("/") if p]:
            try:
                nfd = os.open(part, DIR_FLAGS, dir_fd=fd)
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise Unsafe(f"{path}: {part} is a symbolic link or not a directory") from None
                raise
            os.close(fd)
            fd = nfd
    except BaseException:
        os.close(fd)
        raise
    return fd


def identity(st: os.stat_result, digest: str | None = None) -> dict[str, object]:
    """What a file is: device, inode, owner, group, mode, size, kind (and content hash)."""
    kind = "file" if stat.S_ISREG(st.st_mode) else "dir" if stat.S_ISDIR(st.st_mode) else "other"
    kind = "link" if stat.S_ISLNK(st.st_mode) else kind
    out: dict[str, object] = {
        "dev": st.st_dev, "ino": st.st_ino, "uid": st.st_uid, "gid": st.st_gid,
        "mode": stat.S_IMODE(st.st_mode), "size": st.st_size, "kind": kind,
    }  # fmt: skip
    if digest is not None:
        out["sha256"] = digest
    return out


def _read_at(dfd: int, name: str, max_bytes: int) -> tuple[bytes, os.stat_result]:
    """A regular file's bytes and stat, opened without following a link."""
    try:
        fd = os.open(name, READ_FLAGS, dir_fd=dfd)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise Unsafe(f"{name}: is a symbolic link") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Unsafe(f"{name}: not a regular file")
        chunks, left = [], max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > max_bytes:
            raise Unsafe(f"{name}: larger than {max_bytes} bytes")
        return data, st
    finally:
        os.close(fd)


def read_file(path: str, max_bytes: int = MAX_READ) -> tuple[bytes, dict[str, object]]:
    """A regular file's bytes and identity; a link in its place is refused."""
    directory, name = split(path)
    dfd = open_dir(directory)
    try:
        data, st = _read_at(dfd, name, max_bytes)
    finally:
        os.close(dfd)
    return data, identity(st, hashlib.sha256(data).hexdigest())


def file_id(path: str) -> dict[str, object]:
    """What is at `path` now, without following a link (a regular file: with its hash)."""
    directory, name = split(path)
    dfd = open_dir(directory)
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        if stat.S_ISREG(st.st_mode) and st.st_size <= MAX_READ:
            data, st = _read_at(dfd, name, MAX_READ)
            return identity(st, hashlib.sha256(data).hexdigest())
        return identity(st)
    finally:
        os.close(dfd)


def _check(dfd: int, name: str, expect: dict[str, object]) -> None:
    """`name` still holds the file `expect` describes: same inode, same bytes."""
    try:
        data, st = _read_at(dfd, name, MAX_READ)
    except FileNotFoundError:
        raise Unsafe(f"{name}: removed since it was read") from None
    same = (st.st_dev, st.st_ino) == (expect.get("dev"), expect.get("ino"))
    if not same or hashlib.sha256(data).hexdigest() != expect.get("sha256"):
        raise Unsafe(f"{name}: changed since it was read")


def _new(
    dfd: int, name: str, data: bytes, mode: int, owner: tuple[int, int] | None
) -> tuple[str, int, int]:
    """A new file under a random name beside `name`, written and given its owner and mode
    through its descriptor; returns that name (the caller renames or links it)."""
    tmp = f".{name[:64]}.dflash-{secrets.token_hex(6)}"
    fd = os.open(tmp, NEW_FLAGS, 0o600, dir_fd=dfd)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if owner is not None:
            try:
                os.fchown(fd, owner[0], owner[1])
            except PermissionError:
                if os.geteuid() == 0 or owner[0] != os.geteuid():
                    raise
        os.fchmod(fd, mode & 0o7777)
        os.fsync(fd)
        st = os.fstat(fd)
    except BaseException:
        os.close(fd)
        _unlink(dfd, tmp)
        raise
    os.close(fd)
    return tmp, st.st_dev, st.st_ino


def _unlink(dfd: int, name: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(name, dir_fd=dfd)


def _landed(dfd: int, name: str, dev: int, ino: int) -> dict[str, object]:
    """The name now holds the inode the doctor made (nobody swapped it in between)."""
    st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    if (st.st_dev, st.st_ino) != (dev, ino):
        raise Unsafe(f"{name}: replaced by something else while it was written")
    return identity(st)


def replace_file(
    path: str,
    data: bytes,
    mode: int,
    expect: dict[str, object] | None = None,
    owner: tuple[int, int] | None = None,
) -> dict[str, object]:
    """Replace (or create) `path` atomically; an existing file's owner and group are kept
    (`owner` is for a new one), `expect` is checked before and just before the rename."""
    directory, name = split(path)
    dfd = open_dir(directory)
    try:
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        if st is not None and not stat.S_ISREG(st.st_mode):
            raise Unsafe(f"{path}: not a regular file (a link or another kind)")
        if expect is not None:
            _check(dfd, name, expect)
        keep = (st.st_uid, st.st_gid) if st is not None else owner
        tmp, dev, ino = _new(dfd, name, data, mode, keep)
        try:
            if expect is not None:
                _check(dfd, name, expect)
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            _unlink(dfd, tmp)
            raise
        os.fsync(dfd)
        return _landed(dfd, name, dev, ino)
    finally:
        os.close(dfd)


def create_file(
    path: str, data: bytes, mode: int, owner: tuple[int, int] | None = None
) -> dict[str, object]:
    """Create `path` only if no such name exists (FileExistsError otherwise), whole: the
    bytes are written under a random name first, then hard-linked to `path`."""
    directory, name = split(path)
    dfd = open_dir(directory)
    try:
        tmp, dev, ino = _new(dfd, name, data, mode, owner)
        try:
            os.link(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd, follow_symlinks=False)
        finally:
            _unlink(dfd, tmp)
        os.fsync(dfd)
        return _landed(dfd, name, dev, ino)
    finally:
        os.close(dfd)


def remove_file(path: str) -> None:
    """Remove one name (a file or a link, never what a link points to)."""
    directory, name = split(path)
    dfd = open_dir(directory)
    try:
        if stat.S_ISDIR(os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mode):
            raise Unsafe(f"{path}: is a directory")
        os.unlink(name, dir_fd=dfd)
    finally:
        os.close(dfd)


def private_dir(path: str) -> dict[str, object]:
    """A directory only the doctor's user can change: made with mode 0700, or one that
    exists already as a directory (not a link) of that user, writable by nobody else."""
    directory, name = split(path)
    dfd = open_dir(directory)
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, 0o700, dir_fd=dfd)
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
            raise Unsafe(f"{path}: not a directory of uid {os.geteuid()} that only it can write")
        return identity(st)
    finally:
        os.close(dfd)


def kind_of(e: BaseException) -> str:
    """How an error is told back (the doctor raises the matching TransportError kind)."""
    if isinstance(e, Unsafe):
        return "unsafe"
    if isinstance(e, FileExistsError):
        return "exists"
    if isinstance(e, FileNotFoundError):
        return "missing"
    if isinstance(e, PermissionError):
        return "denied"
    return "other"


def answer(request: dict[str, object], data: bytes) -> dict[str, object]:
    """One request of the remote form: {"op", "path", ...}; the data came on stdin."""
    op, path = str(request["op"]), str(request["path"])
    mode = int(str(request.get("mode", 0o644)))
    owner = request.get("owner")
    who = (int(owner[0]), int(owner[1])) if isinstance(owner, list) else None
    expect = request.get("expect")
    if op == "replace":
        got = replace_file(path, data, mode, expect if isinstance(expect, dict) else None, who)
    elif op == "create":
        got = create_file(path, data, mode, who)
    elif op == "id":
        got = file_id(path)
    elif op == "remove":
        remove_file(path)
        got = {}
    elif op == "private_dir":
        got = private_dir(path)
    else:
        raise Unsafe(f"unknown request {op!r}")
    return {"ok": got}


def main() -> None:
    """The remote entry: argv[1] is the JSON request, stdin the data; one JSON line out."""
    try:
        request = json.loads(sys.argv[1])
        data = sys.stdin.buffer.read(MAX_READ + 1)
        if len(data) > MAX_READ:
            raise Unsafe(f"more than {MAX_READ} bytes to write")
        out = answer(request, data)
    except (OSError, Unsafe, ValueError, KeyError, TypeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        out = {"error": str(reason)[:300], "kind": kind_of(e)}
    sys.stdout.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
