"""List the package's functions over 60 lines, against an allow-list that may only shrink.

    python scripts/long_functions.py                    # exit 1 on a new one or a stale entry
    python scripts/long_functions.py --write            # drop the entries no longer long
    python scripts/long_functions.py --write --add-new  # also list the new ones (after a rebase)

A function's length is its body, from the line after its docstring (or its first statement) to
its last line; nested functions count in their parent too and are listed on their own. The
signature is left out because a command's parameters are its list of options, not code to
split; the docstring because a check's docstring is its documentation page (`explain ID`),
which the catalog asks to be full (What, Why, Example, Fix, Fix safety, Versions).
The allow-list, scripts/long_functions_allowed.txt, names the long functions that exist today, one
`path::qualname` a line; split one and `--write` drops it. `--add-new` lists new long
functions too: only for those a rebase brought in, since new code is written in pieces of at
most 60 lines.
tests/test_function_length.py runs the same comparison.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "dflash_doctor"
ALLOWED = REPO / "scripts" / "long_functions_allowed.txt"
MAX_LINES = 60
# Recorded hosts carry verbatim copies of SGLang's own files (read as text, never run).
SKIP = ("demo_hosts",)

Function = ast.FunctionDef | ast.AsyncFunctionDef


def _functions(body: list[ast.stmt], prefix: str) -> Iterator[tuple[str, Function]]:
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield prefix + node.name, node
            yield from _functions(node.body, f"{prefix}{node.name}.")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node.body, f"{prefix}{node.name}.")
        elif isinstance(node, ast.If | ast.Try | ast.With):
            # functions defined under `if TYPE_CHECKING:` or a try/except import fallback
            for block in ("body", "orelse", "finalbody"):
                yield from _functions(getattr(node, block, []), prefix)


def body_lines(node: Function) -> int:
    """Lines after the docstring (without one: from the first statement or its decorators)
    to the function's last line."""
    first = node.body[0]
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        start = (first.end_lineno or first.lineno) + 1
    else:
        start = min([first.lineno, *(d.lineno for d in getattr(first, "decorator_list", []))])
    return (node.end_lineno or node.lineno) - start + 1


def long_functions(package: Path = PACKAGE, limit: int = MAX_LINES) -> dict[str, int]:
    """`path::qualname` -> lines, for every function longer than `limit` lines."""
    found: dict[str, int] = {}
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent)
        if any(part in SKIP for part in rel.parts):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(rel))
        for name, node in _functions(tree.body, ""):
            lines = body_lines(node)
            if lines > limit:
                found[f"{rel.as_posix()}::{name}"] = lines
    return found


def read_allowed(path: Path = ALLOWED) -> set[str]:
    """The allow-list's names (comments and blank lines skipped)."""
    if not path.exists():
        return set()
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return {line for line in lines if line}


def write_allowed(found: dict[str, int], path: Path = ALLOWED) -> None:
    """The allow-list as the package is now, sorted, each name with its length as a comment."""
    header = (
        "# Package functions over 60 lines that existed when this list was written.\n"
        "# It may only shrink: split a function, then run `python scripts/long_functions.py"
        " --write`.\n"
    )
    rows = [f"{name}  # {found[name]} lines" for name in sorted(found)]
    path.write_text(header + "".join(row + "\n" for row in rows))


def compare(found: dict[str, int], allowed: set[str]) -> tuple[list[str], list[str]]:
    """(new long functions, allow-list entries that are no longer long or no longer exist)."""
    new = sorted(f"{name} ({found[name]} lines)" for name in set(found) - allowed)
    stale = sorted(allowed - set(found))
    return new, stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite the allow-list")
    parser.add_argument("--add-new", action="store_true", help="with --write: list new ones too")
    args = parser.parse_args(argv)
    found = long_functions()
    allowed = read_allowed()
    if args.write:
        kept = found if args.add_new else {n: k for n, k in found.items() if n in allowed}
        write_allowed(kept)
        print(f"{ALLOWED.relative_to(REPO)}: {len(kept)} functions over {MAX_LINES} lines")
        if len(kept) < len(found):
            print(f"{len(found) - len(kept)} new ones not listed (split them)", file=sys.stderr)
            return 1
        return 0
    new, stale = compare(found, allowed)
    for name in new:
        print(f"new function over {MAX_LINES} lines: {name}: split it", file=sys.stderr)
    for name in stale:
        print(f"stale allow-list entry: {name}: run with --write to drop it", file=sys.stderr)
    return 1 if new or stale else 0


if __name__ == "__main__":
    sys.exit(main())
