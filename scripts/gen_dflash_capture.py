"""Generate dflash_doctor/data/dflash_capture.json from SGLang's published wheels.

For every release unpacked under WHEELS/<version>/sglang, list the model architectures
SGLang registers (each top-level `srt/models/*.py` module's `EntryClass`, keyed by class
name as `srt/models/registry.py` `import_model_classes` does, 0.5.23:118-148), the module
that registers each, and which of them implement `set_dflash_layers_to_capture`, the hook
the DFLASH target needs (see dflash_doctor/facts/capture_hooks.py, which does the reading:
the same code reads a host's installed files).

Usage: python3 scripts/gen_dflash_capture.py [/work/wheels/src]
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

from dflash_doctor.facts.capture_hooks import HOOK, MODELS_PACKAGE, Sources

# Evidence that reading the source does not derive, kept beside the derived list.
INERT_NOTES = {
    "Qwen4ExpForConditionalGeneration": (
        "derived from source: Qwen4ExpModel.forward fills aux_hidden_states from the layers "
        "marked by set_dflash_layers_to_capture, then returns (hidden_states, "
        "hc_hidden_states) on every non-idle batch; the wrapper (Qwen3VL's forward) takes "
        "that second tensor as the captured states. Not derived: the exception text of "
        "sgl-project/sglang#38589 ('too many values to unpack (expected 2)'), which no "
        "line of the released source raises by itself"
    )
}
OUT = Path(__file__).resolve().parent.parent / "dflash_doctor" / "data" / "dflash_capture.json"


def analyse(root: Path) -> dict[str, tuple[str, bool]]:
    """architecture -> (registering module's short name, implements the hook), one wheel."""
    models_dir = root / "srt" / "models"

    def read(module: str) -> str | None:
        rel = module[len(MODELS_PACKAGE) + 1 :].replace(".", "/")
        for candidate in (models_dir / f"{rel}.py", models_dir / rel / "__init__.py"):
            if candidate.is_file():
                return candidate.read_text(encoding="utf-8", errors="replace")
        return None

    sources = Sources(read)
    found: dict[str, tuple[str, bool]] = {}
    for path in sorted(models_dir.glob("*.py")):  # registry.py imports top-level modules only
        module = sources.module(f"{MODELS_PACKAGE}.{path.stem}")
        if module is None:
            continue
        for entry in module.entry:
            info = sources.resolve(module, entry)
            if info is not None and info.name not in found:
                found[info.name] = (path.stem, sources.has_hook(info))
    return found


def _drops_aux(fn: ast.FunctionDef) -> int | None:
    """The line of a `return x, y` (y not the aux list) in a forward that builds
    `aux_hidden_states` and also returns it: the layers fill the list, the caller never
    gets it. None when the forward has no such return."""
    builds = any(
        isinstance(n, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "aux_hidden_states" for t in n.targets)
        for n in ast.walk(fn)
    )
    pairs = [
        n
        for n in ast.walk(fn)
        if isinstance(n, ast.Return) and isinstance(n.value, ast.Tuple) and len(n.value.elts) == 2
    ]
    returns_aux = [
        r
        for r in pairs
        if ast.unparse(r.value.elts[1]) == "aux_hidden_states"  # type: ignore[union-attr]
    ]
    other = [r for r in pairs if r not in returns_aux]
    return other[0].lineno if builds and returns_aux and other else None


def inert(root: Path, found: dict[str, tuple[str, bool]]) -> dict[str, str]:
    """architecture -> "srt/models/M.py:LINE" where its module's model drops the captured
    hidden states: the hook exists (the architecture is in `capture`) but collects nothing
    the drafter receives."""
    out: dict[str, str] = {}
    for arch, (module, hook) in found.items():
        path = root / "srt" / "models" / f"{module}.py"
        if not hook or not path.is_file():
            continue
        tree = ast.parse(path.read_bytes())
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            for fn in cls.body:
                if isinstance(fn, ast.FunctionDef) and fn.name == "forward":
                    line = _drops_aux(fn)
                    if line is not None:
                        out.setdefault(arch, f"srt/models/{module}.py:{line}")
    return out


def _version_key(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v))


def _runs(releases: list[str], per: dict[str, dict[str, str]]) -> dict[str, list[list[str]]]:
    """architecture -> [[value?, first, last], ...]: consecutive releases with one value."""
    out: dict[str, list[list[str]]] = {}
    for arch in sorted(set().union(*per.values())):
        runs: list[list[str]] = []
        for i, v in enumerate(releases):
            if arch not in per[v]:
                continue
            value = per[v][arch]
            if (
                runs
                and runs[-1][-1] == releases[i - 1]
                and runs[-1][:-2] == ([value] if value else [])
            ):
                runs[-1][-1] = v
            else:
                runs.append([*([value] if value else []), v, v])
        out[arch] = runs
    return out


def main(argv: list[str]) -> int:
    wheels = Path(argv[1]) if len(argv) > 1 else Path("/work/wheels/src")
    per_release: dict[str, dict[str, tuple[str, bool]]] = {}
    inert_sites: dict[str, dict[str, str]] = {}
    for vdir in sorted(wheels.iterdir(), key=lambda p: _version_key(p.name)):
        root = vdir / "sglang"
        if (root / "srt" / "models").is_dir():
            per_release[vdir.name] = analyse(root)
            inert_sites[vdir.name] = inert(root, per_release[vdir.name])
    releases = list(per_release)
    data = {
        "generated_by": "scripts/gen_dflash_capture.py",
        "hook": HOOK,
        "releases": releases,
        # architecture -> [[first, last], ...]: releases whose class implements the hook
        "capture": _runs(
            releases,
            {
                v: {a: "" for a, (_, hook) in archs.items() if hook}
                for v, archs in per_release.items()
            },
        ),
        # architecture -> [[module, first, last], ...]: releases that register it, and where
        "known": _runs(
            releases, {v: {a: m for a, (m, _) in archs.items()} for v, archs in per_release.items()}
        ),
        # architecture -> [[site, first, last], ...]: releases whose class has the hook but
        # whose model's forward drops the captured layers (`_drops_aux`), with the return.
        "inert": _runs(releases, inert_sites),
        # What a public report says that the wheels' source does not show by itself.
        "inert_notes": INERT_NOTES,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data, sort_keys=True, separators=(",", ":")).replace("]],", "]],\n")
    OUT.write_text(text + "\n")
    print(f"wrote {OUT} ({len(releases)} releases)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
