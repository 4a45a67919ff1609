"""The one bounded reader of this machine's regular files (dflash_doctor/regular_file.py),
on real files: FIFOs, devices, links, sparse and growing files. Its callers' own words are
tested where they are used (test_gate_files.py, test_fleet.py, transport/test_known_hosts.py,
test_gate_inputs.py)."""

from __future__ import annotations

import os
import resource
from pathlib import Path

import pytest

from dflash_doctor.regular_file import Unread, Words, read_regular


def stage(path: str | Path, limit: int = 1 << 20, *, follow: bool = True) -> str:
    with pytest.raises(Unread) as e:
        read_regular(path, limit, follow=follow)
    return e.value.stage


def test_a_regular_file_is_read_whole(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x" * 100)
    assert read_regular(tmp_path / "f", 100) == b"x" * 100
    assert read_regular(str(tmp_path / "f"), 1000) == b"x" * 100
    (tmp_path / "empty").write_bytes(b"")
    assert read_regular(tmp_path / "empty", 0) == b""


def test_fifos_devices_and_directories_are_refused_without_a_read(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")  # no writer: a blocking open or read would hang here
    assert stage(tmp_path / "fifo") == "kind"
    assert stage("/dev/zero") == "kind"
    assert stage(tmp_path) == "kind"


def test_a_file_over_the_bound_is_refused_by_its_size(tmp_path: Path) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with open(tmp_path / "huge", "wb") as f:  # sparse: 1 GiB that costs no disk
        f.truncate(1 << 30)
    assert stage(tmp_path / "huge", 1 << 29) == "size"
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 64 * 1024  # KiB
    (tmp_path / "f").write_bytes(b"x" * 101)
    assert stage(tmp_path / "f", 100) == "size"


def test_a_file_longer_than_its_stat_is_read_on_to_the_bound() -> None:
    # /proc files are regular with st_size 0: what a file grown since fstat looks like
    assert os.stat("/proc/self/status").st_size == 0
    assert b"Name:" in read_regular("/proc/self/status", 1 << 20)
    assert stage("/proc/self/status", 10) == "size"


def test_a_missing_file_and_a_link_not_followed_say_why(tmp_path: Path) -> None:
    with pytest.raises(Unread) as e:
        read_regular(tmp_path / "missing", 10)
    assert e.value.stage == "open" and e.value.reason == "No such file or directory"
    (tmp_path / "f").write_bytes(b"x")
    (tmp_path / "link").symlink_to(tmp_path / "f")
    assert read_regular(tmp_path / "link", 10) == b"x"
    assert stage(tmp_path / "link", follow=False) == "open"


def test_each_caller_words_the_refusal() -> None:
    words = Words(open="cannot read: {reason}", kind="not regular", size="over {limit} bytes")
    assert words.say(Unread("open", "Permission denied"), 5) == "cannot read: Permission denied"
    assert words.say(Unread("read", "Input/output error"), 5) == "cannot read: Input/output error"
    assert words.say(Unread("size"), 5) == "over 5 bytes"
    lower = Words(open="{reason}", kind="", size="", read="read: {reason}", lower=True)
    assert lower.say(Unread("read", "Input/output error"), 5) == "read: input/output error"
