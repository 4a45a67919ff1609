"""Generate dflash_doctor/data/dflash_family.json from SGLang's published wheels.

    python3 scripts/gen_dflash_family.py [/work/wheels/src]

For every release unpacked under WHEELS/<version>/sglang it reads, as text with `ast`
(never importing SGLang):

- the DFlash family: the algorithm names `SpeculativeAlgorithm.is_dflash_family` accepts
  (`srt/speculative/spec_info.py`; before that method existed, DFLASH alone) and the drafter
  architectures that the family's model modules register (`EntryClass` of
  `srt/models/dflash.py` and of every `srt/models/*dspark*.py`);
- `--speculative-adaptive`: the algorithms `adaptive_unsupported_reason` lets through
  (`srt/speculative/adaptive_spec_params.py`); the others log `speculative_adaptive disabled:
  ...` and run with static parameters;
- prefill/decode disaggregation: whether the decode side builds a DFLASH draft input for a
  request that arrives from the prefill server (`build_disagg_draft_input` calls
  `is_dflash()`), the algorithms it builds one for, and where the decode step fails when
  it does not.

Each answer carries the file:line it was read from. `--check` exits 1 when the committed
file differs from what the wheels give.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from dflash_doctor.facts.capture_hooks import parse_module  # noqa: E402

OUT = REPO / "dflash_doctor" / "data" / "dflash_family.json"
WHEELS = Path("/work/wheels/src")
SPEC_INFO = "srt/speculative/spec_info.py"
ADAPTIVE = "srt/speculative/adaptive_spec_params.py"
# The decode-side crash without a DFLASH draft input, per worker generation: the v1 worker
# (0.5.11-0.5.13.post1) raises its own RuntimeError; from 0.5.14 the batch's `spec_info`
# (None) is asked to `prepare_for_decode` first (Python's AttributeError).
V1_CRASH = ("srt/speculative/dflash_worker.py", "DFLASH decode requires DFlashDraftInput")
V2_CRASH = (
    ("srt/speculative/spec_utils.py", "batch.spec_info.prepare_for_decode(batch)"),
    ("srt/managers/schedule_batch.py", "draft_input.prepare_for_decode(self)"),
)


def version_key(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v))


def _function(tree: ast.Module, name: str) -> ast.FunctionDef | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


def _parse(path: Path) -> ast.Module | None:
    try:
        return ast.parse(path.read_bytes())
    except (OSError, SyntaxError, ValueError):
        return None


def _is_calls(fn: ast.FunctionDef) -> list[tuple[str, int]]:
    """`self.is_x()` calls in a function: ("X", line)."""
    out = []
    for node in ast.walk(fn):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr.startswith("is_")
        ):
            out.append((node.func.attr[3:].upper(), node.lineno))
    return out


def family(root: Path) -> dict[str, object]:
    """The family's algorithms (and where they are read) and its drafter architectures."""
    tree = _parse(root / SPEC_INFO)
    fn = _function(tree, "is_dflash_family") if tree is not None else None
    if fn is not None:
        algorithms = sorted({name for name, _ in _is_calls(fn)})
        site = f"{SPEC_INFO}:{fn.lineno}"
    else:
        algorithms, site = ["DFLASH"], f"{SPEC_INFO}:{_line_of(root / SPEC_INFO, 'DFLASH = ')}"
    models = root / "srt" / "models"
    drafters: dict[str, str] = {}
    for path in [models / "dflash.py", *sorted(models.glob("*dspark*.py"))]:
        if path.is_file():
            module = parse_module(path.read_text("utf-8", "replace"), path.stem)
            drafters.update({arch: path.stem for arch in module.entry})
    return {"algorithms": algorithms, "site": site, "drafters": drafters}


def adaptive(root: Path) -> dict[str, object]:
    """The algorithms `--speculative-adaptive` serves (the tuple the reason tests against)."""
    tree = _parse(root / ADAPTIVE)
    fn = _function(tree, "adaptive_unsupported_reason") if tree is not None else None
    assert fn is not None, f"{root}: no adaptive_unsupported_reason"
    for node in ast.walk(fn):
        if (
            isinstance(node, ast.Compare)
            and isinstance(node.ops[0], ast.NotIn)
            and isinstance(node.comparators[0], ast.Tuple)
        ):
            names = [c.value for c in node.comparators[0].elts if isinstance(c, ast.Constant)]
            return {"algorithms": names, "site": f"{ADAPTIVE}:{node.lineno}"}
    raise AssertionError(f"{root}: no algorithm test in adaptive_unsupported_reason")


def _line_of(path: Path, needle: str) -> int | None:
    if not path.is_file():
        return None
    for i, line in enumerate(path.read_text("utf-8", "replace").splitlines(), 1):
        if needle in line:
            return i
    return None


def disaggregation(root: Path) -> dict[str, object]:
    """Whether the decode side builds a DFLASH draft input, and where it fails if not."""
    tree = _parse(root / SPEC_INFO)
    fn = _function(tree, "build_disagg_draft_input") if tree is not None else None
    calls = _is_calls(fn) if fn is not None else [("EAGLE", 0)]  # 0.5.11-0.5.12: EAGLE only
    algorithms = sorted({name for name, _ in calls})
    dflash = [line for name, line in calls if name == "DFLASH"]
    if dflash:
        return {"served": True, "algorithms": algorithms, "site": f"{SPEC_INFO}:{dflash[0]}"}
    builder = f"{SPEC_INFO}:{fn.lineno}" if fn is not None else None
    if builder is None:  # 0.5.11-0.5.12: the decode mixin builds EAGLE's input only
        mixin = "srt/disaggregation/decode_schedule_batch_mixin.py"
        builder = f"{mixin}:{_line_of(root / mixin, 'if self.spec_algorithm.is_eagle():')}"
    line = _line_of(root / V1_CRASH[0], V1_CRASH[1])
    if line is not None:
        return {
            "served": False,
            "algorithms": algorithms,
            "site": builder,
            "crash": "sglang",
            "crash_site": f"{V1_CRASH[0]}:{line}",
        }
    for rel, needle in V2_CRASH:
        line = _line_of(root / rel, needle)
        if line is not None:
            return {
                "served": False,
                "algorithms": algorithms,
                "site": builder,
                "crash": "python",
                "crash_site": f"{rel}:{line}",
            }
    raise AssertionError(f"{root}: no decode-side crash site found")


HOOK = "srt/arg_groups/speculative_hook.py"


def _guarded(root: Path, needle: str, files: tuple[str, ...] = (HOOK,)) -> dict[str, object] | None:
    """The algorithms the `speculative_algorithm not in (...)` test just above the text
    `needle` lets through (none for an `is not None` test), and the test's line; None where
    the release has no such text."""
    for rel in files:
        line = _line_of(root / rel, needle)
        if line is None:
            continue
        lines = (root / rel).read_text("utf-8", "replace").splitlines()
        for i in range(line - 1, max(line - 8, 0), -1):
            m = re.search(r"speculative_algorithm not in \(([^)]*)\)", lines[i - 1])
            if m:
                names = re.findall(r'"([A-Z0-9_]+)"', m.group(1))
                return {"algorithms": names, "site": f"{rel}:{i}"}
            if re.search(r"speculative_algorithm is not None", lines[i - 1]):
                return {"algorithms": [], "site": f"{rel}:{i}"}
    return None


def window(root: Path) -> dict[str, object] | None:
    """The algorithms the draft window flag is honoured for, from the `... has no effect
    with speculative_algorithm=%s` warning's test (0.5.13+); None where there is none."""
    return _guarded(root, "draft-window-size has no effect")


def decode_radix(root: Path) -> dict[str, object] | None:
    """The algorithms a PD decode server may run with
    --disaggregation-decode-enable-radix-cache; the others are refused at start-up."""
    files = (HOOK, "srt/arg_groups/pd_disaggregation_hook.py", "srt/server_args.py")
    return _guarded(root, '"with speculative decoding "', files)


def sink(root: Path) -> dict[str, object] | None:
    """Who reads `speculative_draft_sink_size` beyond the flag's own validation (0.5.21+)."""
    srt = root / "srt"
    readers = []
    for path in sorted(srt.rglob("*.py")):
        rel = str(path.relative_to(root))
        if rel.startswith("srt/arg_groups/"):
            continue
        line = _line_of(path, "draft_sink_size")
        if line is not None:
            readers.append(f"{rel}:{line}")
    if not readers:
        return None
    return {"readers": readers, "dflash_reads": any("dflash" in r for r in readers)}


def generate(wheels: Path) -> dict[str, object]:
    releases = sorted(
        (d.name for d in wheels.iterdir() if (d / "sglang" / SPEC_INFO).is_file()), key=version_key
    )
    roots = {v: wheels / v / "sglang" for v in releases}
    return {
        "generated_by": "scripts/gen_dflash_family.py",
        "releases": releases,
        "family": {v: family(r) for v, r in roots.items()},
        "adaptive": {v: adaptive(r) for v, r in roots.items()},
        "disaggregation": {v: disaggregation(r) for v, r in roots.items()},
        "window": {v: window(r) for v, r in roots.items()},
        "decode_radix": {v: decode_radix(r) for v, r in roots.items()},
        "sink": {v: sink(r) for v, r in roots.items()},
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("wheels", nargs="?", type=Path, default=WHEELS)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    text = json.dumps(generate(args.wheels), indent=1, sort_keys=True) + "\n"
    if args.check:
        return 0 if OUT.read_text() == text else 1
    OUT.write_text(text)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
