"""Generate dflash_doctor/data/transformers_defaults.json from the transformers wheels that
SGLang pins (read as text through `ast`, never imported).

    pip download --no-deps transformers==5.6.0 transformers==5.19.0 ... -d /work/wheels/tf
    (unzip each to /work/wheels/tf/<version>/)
    python scripts/gen_transformers_defaults.py [--tf /work/wheels/tf] [--check]

SGLang hands the DFlash drafter the config object transformers builds from `config.json`
(AutoConfig by `model_type`). Two things of that class matter to the doctor and are not in
the JSON: whether the class derives `layer_types` when the file has none (else SGLang gets
None and builds every layer full: models/dflash.py 0.5.14:47-49, 0.5.23:169-171), and the
class default of `max_position_embeddings` (SGLang's `get_context_length` reads the
attribute). Per model_type, per pinned transformers release, a row: `derives`, `max_pos`,
`site`, and for a class that derives layer types by a rule modelled here (the same
statements as Qwen3Config's or GptOssConfig's, compared as ASTs) its `rule` and the
`defaults` that rule reads. SGLang's pins (each wheel's METADATA `Requires-Dist`):
0.5.11-0.5.12.post1 transformers==5.6.0, 0.5.13-0.5.14 5.8.1, 0.5.15-0.5.21 5.12.1,
0.5.22-0.5.23 5.19.0.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "dflash_doctor" / "data" / "transformers_defaults.json"
TF = Path("/work/wheels/tf")
PINNED = ("5.6.0", "5.8.1", "5.12.1", "5.19.0")


def _int_expr(node: ast.expr | None) -> int | None:
    """An integer literal, or products and sums of them (`4096 * 32`); None otherwise."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult | ast.Add):
        left, right = _int_expr(node.left), _int_expr(node.right)
        if left is None or right is None:
            return None
        return left * right if isinstance(node.op, ast.Mult) else left + right
    return None


def _constant(node: ast.expr | None) -> object:
    """A literal default (int, bool, None); the marker "?" for anything else."""
    if isinstance(node, ast.Constant) and (node.value is None or type(node.value) in (int, bool)):
        return node.value
    value = _int_expr(node)
    return "?" if value is None else value


def _defaults(node: ast.ClassDef) -> dict[str, object]:
    """The class defaults the layer-type rules read (sliding_window, use_sliding_window,
    max_window_layers); absent attributes are left out."""
    found: dict[str, object] = {}
    for stmt in node.body:
        named = isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
        if named and stmt.target.id in (
            "sliding_window",
            "use_sliding_window",
            "max_window_layers",
        ):
            found[stmt.target.id] = _constant(stmt.value)
    return found


def _assigns(stmt: ast.stmt, attr: str) -> bool:
    return any(
        isinstance(n, ast.Attribute)
        and n.attr == attr
        and isinstance(n.value, ast.Name)
        and n.value.id == "self"
        and isinstance(n.ctx, ast.Store)
        for n in ast.walk(stmt)
    )


def rule_fingerprint(node: ast.ClassDef) -> str:
    """The statements of the class's methods that set self.sliding_window or
    self.layer_types, as ast.dump without positions: two classes with the same fingerprint
    derive layer types by the same rule."""
    parts = [
        ast.dump(stmt)
        for fn in node.body
        if isinstance(fn, ast.FunctionDef)
        for stmt in fn.body
        if _assigns(stmt, "sliding_window") or _assigns(stmt, "layer_types")
    ]
    return "\n".join(parts)


def _class_facts(node: ast.ClassDef) -> tuple[str | None, int | None, bool]:
    """(model_type, max_position_embeddings default, whether it assigns self.layer_types)."""
    model_type: str | None = None
    max_pos: int | None = None
    for stmt in node.body:
        named = isinstance(stmt, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "model_type" for t in stmt.targets
        )
        if named and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
            model_type = stmt.value.value
        target = stmt.target if isinstance(stmt, ast.AnnAssign) else None
        if isinstance(target, ast.Name) and target.id == "max_position_embeddings":
            value = stmt.value if isinstance(stmt, ast.AnnAssign) else None
            max_pos = _int_expr(value)
    derives = any(
        isinstance(n, ast.Assign)
        and any(
            isinstance(t, ast.Attribute)
            and t.attr == "layer_types"
            and isinstance(t.value, ast.Name)
            and t.value.id == "self"
            for t in n.targets
        )
        for n in ast.walk(node)
    )
    return model_type, max_pos, derives


# The rules dflash-doctor models (facts/model_config.py): a class whose fingerprint equals
# one of these classes' derives layer types exactly as it does.
RULE_CLASSES = {"qwen3": "Qwen3Config", "gpt_oss": "GptOssConfig"}


def read_release(root: Path) -> dict[str, dict[str, object]]:
    """model_type -> {derives (layer_types), max_pos (max_position_embeddings default),
    site (models/<dir>/configuration_*.py:class line)} for one release."""
    found: dict[str, dict[str, object]] = {}
    for path in sorted(root.glob("transformers/models/*/configuration_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if not isinstance(node, ast.ClassDef):
                continue
            model_type, max_pos, derives = _class_facts(node)
            if model_type is None or model_type in found:
                continue
            site = f"{path.parent.name}/{path.name}:{node.lineno}"
            found[model_type] = {
                "derives": derives,
                "max_pos": max_pos,
                "site": site,
                "fingerprint": rule_fingerprint(node),
                "defaults": _defaults(node),
            }
    fingerprints = {rule: found[rule]["fingerprint"] for rule in RULE_CLASSES if rule in found}
    for facts in found.values():
        rule = next((r for r, fp in fingerprints.items() if fp == facts["fingerprint"]), None)
        facts["rule"] = rule if facts["derives"] else None
        del facts["fingerprint"]
    return found


def _row(facts: dict[str, object]) -> dict[str, object]:
    """The stored row: derives/max_pos/site always; rule and the defaults it reads only for
    a class whose rule is modelled."""
    row = {k: facts[k] for k in ("derives", "max_pos", "site")}
    if facts["rule"] is not None:
        row["rule"] = facts["rule"]
        row["defaults"] = facts["defaults"]
    return row


def generate(tf: Path) -> dict[str, object]:
    releases = {v: read_release(tf / v) for v in PINNED if (tf / v).is_dir()}
    if not releases:
        raise SystemExit(f"no transformers release unpacked under {tf}")
    model_types = sorted(set().union(*(r.keys() for r in releases.values())))
    table: dict[str, object] = {}
    for mt in model_types:
        per = {v: r[mt] for v, r in releases.items() if mt in r}
        rows = {v: _row(f) for v, f in per.items()}
        # One row where every release that has the class agrees (the newest's site), else a
        # row per release.
        same = len({json.dumps({k: v for k, v in r.items() if k != "site"}) for r in rows.values()})
        table[mt] = list(rows.values())[-1] if same == 1 else rows
    return {
        "generated_by": "scripts/gen_transformers_defaults.py",
        "releases": list(releases),
        "model_types": table,
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tf", type=Path, default=TF)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    text = json.dumps(generate(args.tf), sort_keys=True, separators=(",", ":")) + "\n"
    if args.check:
        same = OUT.read_text() == text
        print("up to date" if same else f"{OUT} differs from the wheels")
        return 0 if same else 1
    OUT.write_text(text)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
