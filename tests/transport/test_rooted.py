"""RootedFiles: a container's files read from the host as chroot would, whatever its links say."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dflash_doctor.errors import FileMissing, TransportError
from dflash_doctor.transport.rooted import RootedFiles


@pytest.fixture
def root(tmp_path: Path) -> Path:
    r = tmp_path / "root"
    (r / "models/m").mkdir(parents=True)
    (r / "models/m/config.json").write_text("{}\n")
    (r / "etc").mkdir()
    (r / "etc/hostname").write_text("container\n")
    os.symlink("/models/m", r / "models/abs")  # absolute: the root's /models/m
    os.symlink("../etc/hostname", r / "models/rel")
    os.symlink("/etc/hostname", r / "models/host")  # this machine's would be a leak
    os.symlink("../../../../../../etc", r / "models/up")
    os.symlink("loop", r / "models/loop")
    os.mkfifo(r / "models/fifo")
    return r


def test_links_resolve_inside_the_root(root: Path) -> None:
    f = RootedFiles("c", str(root))
    assert f.read_file("/models/abs/config.json", max_bytes=10) == b"{}\n"
    assert f.read_file("/models/rel", max_bytes=100) == b"container\n"
    assert f.read_file("/models/host", max_bytes=100) == b"container\n"
    assert f.read_file("/models/up/hostname", max_bytes=100) == b"container\n"
    assert f.read_file("/../../../etc/hostname", max_bytes=100) == b"container\n"
    assert f.real_path("/models/abs/config.json") == "/models/m/config.json"
    assert f.readlink("/models/abs") == "/models/m"
    assert f.list_dir("/models/abs") == ["config.json"]
    assert f.file_size("/models/rel") == len(b"container\n")


def test_errors_are_typed_and_bounded(root: Path) -> None:
    f = RootedFiles("c", str(root))
    with pytest.raises(FileMissing, match="c:/models/none"):
        f.read_file("/models/none", max_bytes=10)
    with pytest.raises(TransportError, match="symbolic links"):
        f.read_file("/models/loop", max_bytes=10)
    with pytest.raises(TransportError, match="not a regular file"):
        f.read_file("/models/fifo", max_bytes=10)  # never blocks on a FIFO
    with pytest.raises(TransportError, match="larger than 1 bytes"):
        f.read_file("/models/rel", max_bytes=1)
    with pytest.raises(TransportError, match="not a link"):
        f.readlink("/models/m")
