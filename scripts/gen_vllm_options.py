"""Generate dflash_doctor/data/vllm_cli_flags.json from vLLM's published wheels.

    python3 scripts/gen_vllm_options.py [/work/wheels/vllm/src] [--check]

For every release unpacked under WHEELS/<version>/vllm it reads, as text with `ast` (never
importing vLLM), the long options `vllm serve` (and the OpenAI API server module, which
builds the same parser with `make_arg_parser`) accepts:

- every string literal `--name` passed to an `add_argument(...)` call in
  `engine/arg_utils.py` (EngineArgs / AsyncEngineArgs `add_cli_args`) and in the frontend's
  `cli_args.py` (`make_arg_parser`: `--headless`, `--config`, ...);
- `--field-name` for every field of the frontend argument dataclasses (`BaseFrontendArgs`
  and its subclasses in that file), which `add_cli_args` registers as
  `f"--{key.replace('_', '-')}"`.

Negated spellings are not listed: `--no-NAME` of a boolean (argparse's
BooleanOptionalAction) and, where the release has `EnableDisableAction`, `--disable-X` for
`--enable-X` and back; the check accepts them for any listed flag. Each release names the
files and lines it was read from, and the removed and added flags against the release
before. `--check` exits 1 when the committed file differs from what the wheels give.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
WHEELS = Path("/work/wheels/vllm/src")
OUT = REPO / "dflash_doctor" / "data" / "vllm_cli_flags.json"
# The frontend's argument file (the one defining BaseFrontendArgs): entrypoints/openai/ in
# 0.27.1-0.28.0, entrypoints/launchers/ in 0.29.0-0.32.0, entrypoints/common/ in 0.33.0-0.34.0.
FRONTEND = (
    "entrypoints/common/cli_args.py",
    "entrypoints/openai/cli_args.py",
    "entrypoints/launchers/cli_args.py",
)


def literal_flags(tree: ast.AST) -> set[str]:
    """`--name` literals given positionally to any `.add_argument(...)` call."""
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or getattr(node.func, "attr", None) != "add_argument":
            continue
        for arg in node.args:
            if isinstance(arg, ast.Constant) and str(arg.value).startswith("--"):
                found.add(str(arg.value))
    return found


def frontend_fields(tree: ast.Module) -> tuple[set[str], int]:
    """`--field-name` of every field of BaseFrontendArgs and the classes built on it, and
    the line of BaseFrontendArgs."""
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    family = {"BaseFrontendArgs"}
    grew = True
    while grew:
        new = {
            name
            for name, cls in classes.items()
            if name not in family and any(getattr(b, "id", None) in family for b in cls.bases)
        }
        family |= new
        grew = bool(new)
    flags = set()
    for name in family & set(classes):
        for node in classes[name].body:
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and "ClassVar" not in ast.unparse(node.annotation)
            ):
                flags.add("--" + node.target.id.replace("_", "-"))
    return flags, classes["BaseFrontendArgs"].lineno


def read_release(root: Path) -> dict[str, Any]:
    """One release's accepted long options and where they were read."""
    engine = root / "engine" / "arg_utils.py"
    frontend = next(
        (root / f for f in FRONTEND if "class BaseFrontendArgs" in _text(root / f)), None
    )
    if not engine.is_file() or frontend is None:
        raise SystemExit(f"{root}: no engine/arg_utils.py or frontend cli_args.py")
    engine_tree = ast.parse(engine.read_text(encoding="utf-8"))
    front_tree = ast.parse(frontend.read_text(encoding="utf-8"))
    fields, base_line = frontend_fields(front_tree)
    flags = literal_flags(engine_tree) | literal_flags(front_tree) | fields
    argparse_utils = (root / "utils" / "argparse_utils.py").read_text(encoding="utf-8")
    version = root.parent.name
    return {
        "flags": sorted(flags),
        "enable_disable": "class EnableDisableAction" in argparse_utils,
        "read_from": [
            f"vllm/engine/arg_utils.py {version}",
            f"vllm/{frontend.relative_to(root)} {version}:{base_line}",
        ],
    }


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8") if path.is_file() else ""


def _key(name: str) -> tuple[int, ...]:
    return tuple(int(x) for x in name.split("."))


def generate(wheels: Path) -> dict[str, Any]:
    """Every release's flags, with the flags removed and added against the one before."""
    releases: dict[str, Any] = {}
    before: set[str] | None = None
    for root in sorted(wheels.iterdir(), key=lambda p: _key(p.name)):
        entry = read_release(root / "vllm")
        flags = set(entry["flags"])
        if before is not None:
            entry["removed"] = sorted(before - flags)
            entry["added"] = sorted(flags - before)
        releases[root.name] = entry
        before = flags
    note = "Generated by scripts/gen_vllm_options.py from the vLLM wheels; do not edit."
    return {"comment": note, "releases": releases}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("wheels", nargs="?", type=Path, default=WHEELS)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    text = json.dumps(generate(args.wheels), indent=1, sort_keys=True) + "\n"
    if args.check:
        return 0 if OUT.is_file() and OUT.read_text() == text else 1
    OUT.write_text(text)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
