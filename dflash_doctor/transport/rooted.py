"""Reading a container's files from the host through `/proc/PID/root`, as chroot would.

`/proc/PID/root` shows the container's mount namespace (its bind mounts and its /proc too),
but the kernel resolves an absolute symlink met below it against the *reader's* root: a link
`/models/x -> /etc/shadow` planted in a container would read the host's shadow file as root.
So every path is walked one component at a time from a directory fd of the container's root
(openat with O_NOFOLLOW), each symlink resolved by hand inside that root (`..` never climbs
above it), and the file finally opened with O_NOFOLLOW from its parent's fd: nothing the
container changes between two steps can make the walk leave it.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator

from dflash_doctor.errors import FileMissing, PermissionDenied, TransportError
from dflash_doctor.transport.base import CHUNK_BYTES, NO_SUCH_FILE, PERMISSION_DENIED
from dflash_doctor.transport.chroot import MAX_LINKS, resolve_inside

_DIR = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class RootedFiles:
    """Read-only file access below `root` (a container's `/proc/PID/root`), chroot-style."""

    def __init__(self, host: str, root: str) -> None:
        self.host = host
        self.root = root

    def _error(self, path: str, e: OSError) -> TransportError:
        if e.errno == errno.ENOENT:
            return FileMissing(f"{self.host}:{path}: {NO_SUCH_FILE}")
        if e.errno in (errno.EACCES, errno.EPERM):
            return PermissionDenied(f"{self.host}:{path}: {PERMISSION_DENIED}")
        if e.errno == errno.ELOOP:
            return TransportError(f"{self.host}:{path}: too many levels of symbolic links")
        if e.errno == errno.ENOTDIR:
            return FileMissing(f"{self.host}:{path}: {NO_SUCH_FILE}")
        return TransportError(f"{self.host}:{path}: {(e.strerror or type(e).__name__).lower()}")

    def _parent(self, path: str, *, follow: bool) -> tuple[int, str]:
        """(fd of the directory holding the final component, that component's name).

        The caller closes the fd. The name is "." for the root itself.
        """
        parts = [p for p in path.split("/") if p not in ("", ".")]
        try:
            # The root itself is a magic link (/proc/PID/root): followed, on purpose.
            root = os.open(self.root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as e:
            raise self._error(path, e) from None
        stack = [root]
        links = 0
        try:
            while parts:
                part = parts.pop(0)
                if part == "..":
                    if len(stack) > 1:
                        os.close(stack.pop())
                    continue
                st = os.stat(part, dir_fd=stack[-1], follow_symlinks=False)
                if stat.S_ISLNK(st.st_mode) and (parts or follow):
                    links += 1
                    if links > MAX_LINKS:
                        raise OSError(errno.ELOOP, "too many levels of symbolic links")
                    target = os.readlink(part, dir_fd=stack[-1])
                    if target.startswith("/"):
                        while len(stack) > 1:
                            os.close(stack.pop())
                    parts = [p for p in target.split("/") if p not in ("", ".")] + parts
                    continue
                if not parts:
                    last = stack.pop()
                    for fd in stack:
                        os.close(fd)
                    return last, part
                stack.append(os.open(part, _DIR, dir_fd=stack[-1]))
            last = stack.pop()
            for fd in stack:
                os.close(fd)
            return last, "."
        except OSError as e:
            for fd in stack:
                os.close(fd)
            raise self._error(path, e) from None

    def _open(self, path: str) -> int:
        parent, name = self._parent(path, follow=True)
        try:
            fd = os.open(name, _FILE, dir_fd=parent)
        except OSError as e:
            raise self._error(path, e) from None
        finally:
            os.close(parent)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            # Never read a FIFO or device: the read could block forever or never end.
            raise TransportError(f"{self.host}:{path}: not a regular file")
        os.set_blocking(fd, True)
        return fd

    def _stat(self, path: str) -> os.stat_result:
        parent, name = self._parent(path, follow=True)
        try:
            return os.stat(name, dir_fd=parent, follow_symlinks=False)
        except OSError as e:
            raise self._error(path, e) from None
        finally:
            os.close(parent)

    def file_size(self, path: str) -> int:
        fd = self._open(path)
        try:
            return os.fstat(fd).st_size
        finally:
            os.close(fd)

    def file_mode(self, path: str) -> int:
        return stat.S_IMODE(self._stat(path).st_mode)

    def read_file(self, path: str, *, max_bytes: int) -> bytes:
        fd = self._open(path)
        try:
            with os.fdopen(fd, "rb") as f:
                data = f.read(max_bytes + 1)
        except OSError as e:
            raise self._error(path, e) from None
        if len(data) > max_bytes:
            raise TransportError(f"{self.host}:{path}: larger than {max_bytes} bytes")
        return data

    def stream_file(self, path: str, *, chunk_bytes: int = CHUNK_BYTES) -> Iterator[bytes]:
        return self._chunks(self._open(path), path, chunk_bytes)

    def _chunks(self, fd: int, path: str, chunk_bytes: int) -> Iterator[bytes]:
        with os.fdopen(fd, "rb") as f:
            while True:
                try:
                    chunk = f.read(chunk_bytes)
                except OSError as e:
                    raise self._error(path, e) from None
                if not chunk:
                    return
                yield chunk

    def list_dir(self, path: str) -> list[str]:
        parent, name = self._parent(path, follow=True)
        try:
            fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)
        except OSError as e:
            raise self._error(path, e) from None
        finally:
            os.close(parent)
        try:
            return sorted(os.listdir(fd))
        except OSError as e:
            raise self._error(path, e) from None
        finally:
            os.close(fd)

    def readlink(self, path: str) -> str:
        parent, name = self._parent(path, follow=False)
        try:
            return os.readlink(name, dir_fd=parent)
        except OSError as e:
            if e.errno == errno.EINVAL:
                raise TransportError(f"{self.host}:{path}: not a link") from None
            raise self._error(path, e) from None
        finally:
            os.close(parent)

    def real_path(self, path: str) -> str:
        """`path` with every link resolved inside the root (as the container sees it)."""

        def link(inside: str) -> str | None:
            try:
                return self.readlink(inside)
            except TransportError:
                return None

        parts = resolve_inside(path, link)
        return path if parts is None else "/" + "/".join(parts)
