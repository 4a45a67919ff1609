"""Generate dflash_doctor/data/dflash_capture.json from SGLang's published wheels.

For every release unpacked under WHEELS/<version>/sglang, list the model architectures
SGLang registers (each top-level `srt/models/*.py` module's `EntryClass`, keyed by class
name as `srt/models/registry.py` `import_model_classes` does, 0.5.23:118-148) and which of
them implement `set_dflash_layers_to_capture`, the hook the DFLASH target needs (its
absence raises `Model X does not implement set_dflash_layers_to_capture, ...` up to
0.5.15, model_runner.py 0.5.11:825-829; `Model X implements neither
set_dspark_layers_to_capture nor set_dflash_layers_to_capture, ...` from 0.5.16,
model_runner_components/attention_backend_setup.py 0.5.16:58-65).

The source is read with `ast`, never imported: a method counts when the class or one of
its base classes (followed through `from ... import` inside srt/models) defines it.

Usage: python3 scripts/gen_dflash_capture.py [/work/wheels/src]
"""

from __future__ import annotations

import ast
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

HOOK = "set_dflash_layers_to_capture"
OUT = Path(__file__).resolve().parent.parent / "dflash_doctor" / "data" / "dflash_capture.json"


@dataclass
class ClassInfo:
    module: str
    name: str
    bases: list[str]
    has_hook: bool


@dataclass
class Module:
    name: str
    classes: dict[str, ClassInfo] = field(default_factory=dict)
    imports: dict[str, tuple[str, str]] = field(default_factory=dict)  # local -> (module, name)
    aliases: dict[str, str] = field(default_factory=dict)  # X = Y at module level
    entry: list[str] = field(default_factory=list)


def _base_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript):  # Generic[T]
        return _base_name(node.value)
    return None


def _defines_hook(cls: ast.ClassDef) -> bool:
    for item in cls.body:
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name == HOOK:
            return True
        if isinstance(item, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == HOOK for t in item.targets
        ):
            return True
    return False


def parse_module(path: Path, name: str) -> Module:
    mod = Module(name)
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except SyntaxError:
        return mod
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            bases = [b for b in (_base_name(x) for x in node.bases) if b]
            mod.classes[node.name] = ClassInfo(name, node.name, bases, _defines_hook(node))
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                mod.imports[alias.asname or alias.name] = (node.module, alias.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if not isinstance(target, ast.Name):
                    continue
                if target.id == "EntryClass":
                    values = (
                        node.value.elts
                        if isinstance(node.value, ast.List | ast.Tuple)
                        else [node.value]
                    )
                    mod.entry = [n for n in (_base_name(v) for v in values) if n]
                elif isinstance(node.value, ast.Name):
                    mod.aliases[target.id] = node.value.id
    return mod


def analyse(root: Path) -> tuple[list[str], list[str]]:
    """(architectures with the hook, architectures without) of one unpacked wheel."""
    models_dir = root / "srt" / "models"
    modules: dict[str, Module] = {}
    for path in sorted(models_dir.rglob("*.py")):
        rel = path.relative_to(root.parent).with_suffix("")
        name = ".".join(rel.parts)
        modules[name] = parse_module(path, name)

    def resolve(module: Module, local: str, depth: int = 0) -> ClassInfo | None:
        if depth > 20:
            return None
        local = module.aliases.get(local, local)
        if local in module.classes:
            return module.classes[local]
        if local in module.imports:
            src, orig = module.imports[local]
            target = modules.get(src)
            if target is not None:
                return resolve(target, orig, depth + 1)
        return None

    def has_hook(info: ClassInfo, depth: int = 0) -> bool:
        if info.has_hook:
            return True
        if depth > 20:
            return False
        module = modules[info.module]
        for base in info.bases:
            found = resolve(module, base)
            if found is not None and has_hook(found, depth + 1):
                return True
        return False

    with_hook: set[str] = set()
    without: set[str] = set()
    top = f"{root.name}.srt.models."
    for name, module in modules.items():
        if not name.startswith(top) or "." in name[len(top) :]:
            continue  # registry.py imports top-level modules only
        for entry in module.entry:
            info = resolve(module, entry)
            if info is None:
                continue
            (with_hook if has_hook(info) else without).add(info.name)
    return sorted(with_hook), sorted(without - with_hook)


def _version_key(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v))


def _runs(releases: list[str], sets: dict[str, set[str]]) -> dict[str, list[list[str]]]:
    """Each architecture's consecutive runs of releases where it is in the set."""
    out: dict[str, list[list[str]]] = {}
    for arch in sorted(set().union(*sets.values())):
        runs: list[list[str]] = []
        for i, v in enumerate(releases):
            if arch not in sets[v]:
                continue
            if runs and runs[-1][1] == releases[i - 1]:
                runs[-1][1] = v
            else:
                runs.append([v, v])
        out[arch] = runs
    return out


def main(argv: list[str]) -> int:
    wheels = Path(argv[1]) if len(argv) > 1 else Path("/work/wheels/src")
    versions: dict[str, dict[str, list[str]]] = {}
    for vdir in sorted(wheels.iterdir(), key=lambda p: _version_key(p.name)):
        root = vdir / "sglang"
        if not (root / "srt" / "models").is_dir():
            continue
        capture, other = analyse(root)
        versions[vdir.name] = {"capture": capture, "no_capture": other}
    releases = list(versions)
    data = {
        "generated_by": "scripts/gen_dflash_capture.py",
        "hook": HOOK,
        "releases": releases,
        # architecture -> [[first, last], ...] runs of releases (in `releases` order)
        "capture": _runs(releases, {v: set(x["capture"]) for v, x in versions.items()}),
        "known": _runs(
            releases,
            {v: set(x["capture"]) | set(x["no_capture"]) for v, x in versions.items()},
        ),
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(
        json.dumps(data, sort_keys=True, separators=(",", ":")).replace("]],", "]],\n") + "\n"
    )
    print(f"wrote {OUT} ({len(versions)} versions)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
