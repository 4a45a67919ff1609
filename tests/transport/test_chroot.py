"""resolve_inside: chroot-style resolution shared by recorded trees and container roots."""

from __future__ import annotations

from pathlib import Path

import pytest

from dflash_doctor.errors import FactError
from dflash_doctor.transport.chroot import resolve_inside
from dflash_doctor.transport.recorded import tree_path


def test_absolute_link_restarts_at_the_root_and_dotdot_stops_there() -> None:
    read = {"/models/current": "/../../etc/drafter", "/etc/drafter": "../../data/d1"}.get
    assert resolve_inside("/models/current/config.json", read) == ["data", "d1", "config.json"]


def test_a_final_link_is_kept_when_not_followed() -> None:
    read = {"/a/b": "/c"}.get
    assert resolve_inside("/a/b", read, follow=False) == ["a", "b"]
    assert resolve_inside("/a/b", read) == ["c"]
    # a link in the middle is followed either way
    assert resolve_inside("/a/b/x", read, follow=False) == ["c", "x"]


def test_a_link_loop_ends() -> None:
    read = {"/a": "/b", "/b": "/a"}.get
    assert resolve_inside("/a/x", read) is None


def test_tree_path_never_leaves_the_tree(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "passwd").write_text("inside\n")
    (root / "escape").symlink_to("/etc/passwd")
    (root / "up").symlink_to("../../../../etc")
    assert tree_path(str(root), "/escape") == str(root / "etc" / "passwd")
    assert tree_path(str(root), "/up/passwd") == str(root / "etc" / "passwd")
    (root / "loop").symlink_to("/loop")
    with pytest.raises(FactError, match="too many levels"):
        tree_path(str(root), "/loop/x")
