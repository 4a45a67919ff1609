"""The SGLang version: declared, from the dist-info beside the server's Python, or by asking
that Python (as the server's owner); and the site-packages dir that holds it."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable

from dflash_doctor.errors import DoctorError, FactError
from dflash_doctor.facts.models import Fact
from dflash_doctor.finders.base import attempt
from dflash_doctor.finders.plan import SITE
from dflash_doctor.sglang_versions import parse_version
from dflash_doctor.transport.base import Transport

# What the host's Python says its sglang is, when no single dist-info tells.
VERSION_QUERY = "import importlib.metadata as m; print(m.version('sglang'))"
# Asks the host's Python (prefix: its safe argv) for its sglang version; None: may not.
Asker = Callable[[str], str] | None


def declared(host: str, version: str) -> Fact[str]:
    if parse_version(version) is None:
        return Fact[str].missing(f"{host}: declared SGLang version {version!r} is not a version")
    return Fact[str].of(version, source="declared")


def find_version(t: Transport, host: str, python: str | None, ask: Asker) -> Fact[str]:
    """From the dist-info beside `python`, else by asking it (`ask`, on a live host)."""
    if python and python.startswith("/"):
        found = dist_info_version(t, host, python, ask)
        if found is not None:
            return found
    if ask is not None and python:
        return attempt(host, f"{python} -c importlib.metadata", lambda: ask(python))
    return Fact[str].missing(
        f"{host}: SGLang version not found"
        + (f" (no sglang-*.dist-info beside {python})" if python else " (no server Python known)")
    )


SGLANG_DIST_INFO = re.compile(SITE["sglang_dist_info"])


def dist_infos(
    t: Transport, bin_dir: str, name: re.Pattern[str] = SGLANG_DIST_INFO
) -> list[tuple[str, str]]:
    """(version, path) of each dist-info named like `name` (its group 1: the version) in the
    site dirs beside a bin directory (`bin/../lib/python3*/{site,dist}-packages`, plan.SITE:
    the bundle lists the same)."""
    lib = posixpath.join(posixpath.dirname(bin_dir), SITE["lib"])
    try:
        listed = t.list_dir(lib)
    except DoctorError:
        return []
    pythons = [d for d in listed if d.startswith(SITE["python_prefix"])][: SITE["max_pythons"]]
    found: list[tuple[str, str]] = []
    for py in pythons:
        for sub in SITE["subdirs"]:
            site = posixpath.join(lib, py, sub)
            try:
                entries = t.list_dir(site)
            except DoctorError:
                continue
            for entry in entries:
                m = name.fullmatch(entry)
                if m:
                    found.append((m.group(1), posixpath.join(site, entry)))
    return found


def dist_info_version(t: Transport, host: str, python: str, ask: Asker) -> Fact[str] | None:
    """The `sglang-*.dist-info` beside the interpreter; None when there is none.

    Two of them (a botched upgrade) are ambiguous: the host's Python is then asked which
    one it imports (as the server's owner), or the fact says it is ambiguous.
    """
    found = dist_infos(t, posixpath.dirname(python))
    if not found:
        return None
    versions = sorted({v for v, _ in found})
    if len(versions) == 1:
        return Fact[str].of(found[0][0], source=found[0][1])
    if ask is not None:
        asked = attempt(host, f"{python} -c importlib.metadata", lambda: ask(python))
        if asked.value is not None:
            return asked
    where = ", ".join(p for _, p in found)
    return Fact[str].missing(
        f"{host}: SGLang version is ambiguous: {' and '.join(versions)} are both "
        f"installed ({where}); declare it with --sglang-version"
    )


def run_version_query(t: Transport, prefix: list[str]) -> str:
    """The sglang version the Python of `prefix` (its safe argv) imports."""
    res = t.run([*prefix, "-c", VERSION_QUERY], timeout=30)
    return installed_version(res.stdout.decode("utf-8", "replace").strip() if res.ok else "")


def installed_version(text: str) -> str:
    """The version query's answer (`text`, "" when it failed) as a version, or FactError."""
    if parse_version(text) is None:
        raise FactError("sglang is not installed for this Python")
    return text


def installed_site(t: Transport, version: Fact[str], python: str | None) -> str | None:
    """The site-packages dir holding the host's sglang (beside its dist-info), or None.

    Also under a declared version: a patched build's own code beats any version string.
    """
    source = version.source or ""
    if not source.endswith(".dist-info") and python and python.startswith("/"):
        found = dist_info_version(t, "", python, None)
        source = (found.source if found else None) or source
    return posixpath.dirname(source) if source.endswith(".dist-info") else None
