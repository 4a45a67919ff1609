"""Path resolution as under chroot, shared by the transports that read a host through a root.

A recorded host tree (transport/recorded.py) and a container's root as seen from the host
(transport/rooted.py) both answer host paths inside a directory that must never be left: an
absolute link restarts at the root, `..` stops at it. They differ only in how a link is read,
so that is the one thing passed in.
"""

from __future__ import annotations

from collections.abc import Callable

# The kernel's own bound on links followed in one lookup (Linux MAXSYMLINKS).
MAX_LINKS = 40


def _parts(path: str) -> list[str]:
    return [p for p in path.split("/") if p not in ("", ".")]


def resolve_inside(
    path: str, readlink: Callable[[str], str | None], *, follow: bool = True
) -> list[str] | None:
    """The components of `path` with every link resolved inside the root.

    `readlink` gets an absolute path as seen inside the root and answers the link's target, or
    None where that path is not a (readable) link. `follow=False` leaves a final link as it is
    (to read the link itself). None after MAX_LINKS links: a loop.
    """
    parts = _parts(path)
    done: list[str] = []
    links = 0
    while parts:
        part = parts.pop(0)
        if part == "..":
            if done:
                done.pop()
            continue
        target = readlink("/" + "/".join([*done, part])) if (follow or parts) else None
        if target is None:
            done.append(part)
            continue
        links += 1
        if links > MAX_LINKS:
            return None
        if target.startswith("/"):
            done = []
        parts = _parts(target) + parts
    return done
