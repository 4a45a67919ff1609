"""The seam holds: above the transport nothing maps host paths or asks what kind of host it
is (issue 12). Read from the source itself, so a new violation fails here by name."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO

PACKAGE = REPO / "dflash_doctor"
# The transport decides; hosts.py only defines the settings it reads. The bundle is the
# transport's half on the host (on_host/, shipped by transport/prefetch.py): it reads under
# the root the transport gives it, as the transport does.
EXEMPT = {PACKAGE / "transport", PACKAGE / "hosts.py", PACKAGE / "on_host" / "bundle_script.py"}
HOST_KINDS = {"local", "ssh", "recorded", "offline", "docker", "kubernetes"}
# HostSpec's kind-of-host settings and the tree's path mapping: read by transport/open.py.
KIND_ATTRIBUTES = {"recorded", "offline", "root", "tree_path", "map"}
KIND_NAMES = {"tree_path", "host_kind", "RecordedTransport", "OfflineTransport"}
# The CLI's own parsed command line (commands/options.py's frozen `CheckArgs`/`FixArgs`/
# `GateArgs`, always named `args`, read by cli.py and commands/): `args.offline` is the user's
# --offline flag and `args.root` gate's --root directory, options the CLI turns into host
# settings for the opener, not a host's kind.
CLI = PACKAGE / "cli.py"
COMMANDS = PACKAGE / "commands"
CLI_ARGS = "args"


def _modules() -> list[Path]:
    return [
        f
        for f in sorted(PACKAGE.rglob("*.py"))
        if not any(f == e or e in f.parents for e in EXEMPT)
    ]


def _command_line(node: ast.Attribute) -> bool:
    return isinstance(node.value, ast.Name) and node.value.id == CLI_ARGS


def violations(source: str, *, cli: bool = False) -> list[str]:
    """Each place in `source` that maps a host path or branches on the kind of host."""
    found = []
    for node in ast.walk(ast.parse(source)):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Attribute) and node.attr in KIND_ATTRIBUTES:
            if not (cli and _command_line(node)):
                found.append(f"{line}: .{node.attr}")
        elif isinstance(node, ast.Name) and node.id in KIND_NAMES:
            found.append(f"{line}: {node.id}")
        elif isinstance(node, ast.alias) and node.name.split(".")[-1] in KIND_NAMES:
            found.append(f"import {node.name}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr == "path":  # HostSpec.path() was the mapping helper
                found.append(f"{line}: .path()")
        elif isinstance(node, ast.Compare) and _compares_kind(node):
            found.append(f"{line}: compares a host kind")
    return found


def _compares_kind(node: ast.Compare) -> bool:
    sides = [node.left, *node.comparators]
    kind = any(isinstance(s, ast.Attribute) and s.attr == "kind" for s in sides)
    named = {
        c.value for s in sides for c in ast.walk(s) if isinstance(c, ast.Constant)
    } & HOST_KINDS
    return kind and bool(named)


def test_nothing_above_the_transport_maps_paths_or_branches_on_the_host_kind() -> None:
    bad = {
        str(f.relative_to(REPO)): v
        for f in _modules()
        if (v := violations(f.read_text(encoding="utf-8"), cli=f == CLI or COMMANDS in f.parents))
    }
    assert bad == {}


def test_the_walk_finds_each_kind_of_violation() -> None:
    source = (
        "spec.path('/etc/x')\n"
        "if spec.recorded or spec.offline: pass\n"
        "from dflash_doctor.transport.recorded import tree_path\n"
        "if t.kind == 'recorded': pass\n"
        "launch.kind == 'systemd'\n"  # a launch's kind is no host kind: allowed
    )
    assert sorted(violations(source)) == [
        "1: .path()",
        "2: .offline",
        "2: .recorded",
        "4: compares a host kind",
        "import tree_path",
    ]


def test_only_the_clis_own_command_line_may_name_offline_and_root() -> None:
    source = "if args.offline: pass\nsearch(args.root)\nif spec.offline: pass\n"
    assert violations(source, cli=True) == ["3: .offline"]
    assert sorted(violations(source)) == ["1: .offline", "2: .root", "3: .offline"]
