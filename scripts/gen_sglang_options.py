"""Generate dflash_doctor/data/sglang_options.json from SGLang's published wheels.

Run by hand when a new SGLang release is out (never in CI, never by the tool):

    python3 -m venv --system-site-packages /tmp/gen && /tmp/gen/bin/pip install msgspec psutil dill
    /tmp/gen/bin/python scripts/gen_sglang_options.py --wheels /work/wheels/src

Each release, unpacked at WHEELS/<version>/sglang/, is loaded in its own subprocess and its
real `ServerArgs.add_cli_args` is run on a fresh `argparse.ArgumentParser` built exactly as
`prepare_server_args` builds it (prog, allow_abbrev read from that function's source). Heavy
dependencies that are not installed (triton, transformers, zmq, ...) are replaced by inert stub
modules: only top-level packages that cannot be found at all are stubbed, so every `try: import`
of an installed package behaves as on a real host. `sglang/__init__.py` is not executed (it only
patches transformers); the package path is registered instead.

For every action the file keeps: option strings, dest, action kind, nargs, const, type name,
choices, simple defaults, whether help is hidden, where it was added (file:line inside the
wheel), and for SGLang's Deprecated* actions their target (`new_flag`) and the exact warning or
error text they print (captured by running the action). Identical actions are stored once.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "dflash_doctor" / "data" / "sglang_options.json"
# Custom argparse `type=` callables whose source the offline replay (facts/sglang_options.py)
# re-implements: their source hash per version lands in the data so a test can tell when a
# new release changed one.
CUSTOM_TYPES = (
    "human_readable_int",
    "nullable_str",
    "json_list_type",
    "parse_cuda_graph_config_arg",
    "parse_cuda_graph_backend_arg",
)


def version_key(text: str) -> tuple[int, ...]:
    parts = text.replace(".post", ".").split(".")
    nums = [int(p) for p in parts]
    return (*nums[:3], nums[3] if len(nums) > 3 else -1)


# ---------------------------------------------------------------- extraction (subprocess)


# Stubbed attributes that must fail as on a host without that backend, so SGLang's `try:`
# fallbacks take their plain path (fla/utils.py: get_available_device() -> "cpu").
FAILING_STUB_ATTRS = frozenset({"triton.runtime.driver"})


def _imported_from_sglang(sglang_dir: str) -> bool:
    """Whether the import statement being served sits in the SGLang tree (not in a library's
    own optional-import fallbacks, which must fail as they would on a host)."""
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.startswith("<frozen importlib") and "importlib" not in name:
            return name.startswith(sglang_dir)
        frame = frame.f_back  # type: ignore[assignment]
    return False


def _install_stubs(sglang_dir: str) -> None:
    import importlib.abc
    import importlib.machinery
    import importlib.util
    import types

    class Stub:
        """Inert stand-in for anything taken from a module that is not installed."""

        def __init__(self, name: str) -> None:
            self._name = name

        def __getattr__(self, key: str) -> Any:
            name = f"{self._name}.{key}"
            if (key.startswith("__") and key.endswith("__")) or name in FAILING_STUB_ATTRS:
                raise AttributeError(key)
            return Stub(name)

        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            if len(args) == 1 and not kwargs and callable(args[0]):
                return args[0]  # used as a decorator: keep the function
            return Stub(self._name + "()")

        def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type, ...]:
            def init_subclass(cls: type, **kw: Any) -> None:
                return None

            name = self._name.rsplit(".", 1)[-1]
            return (type(name, (), {"__init_subclass__": classmethod(init_subclass)}),)

        def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
            from pydantic_core import core_schema

            return core_schema.any_schema()

        def __getitem__(self, key: Any) -> Any:
            return Stub(self._name + "[]")

        def __setitem__(self, key: Any, value: Any) -> None:
            return None

        def __or__(self, other: Any) -> Any:
            return self

        __ror__ = __or__

        def __iter__(self) -> Any:
            return iter(())

        def __len__(self) -> int:
            return 0

        def __bool__(self) -> bool:
            return False

        def __repr__(self) -> str:
            return f"<stub {self._name}>"

    class StubMeta(type):
        def __getattr__(cls, key: str) -> Any:
            if key.startswith("__") and key.endswith("__"):
                raise AttributeError(key)
            return Stub(f"{cls.__name__}.{key}")

    def stub_class(name: str) -> type:
        """A real class (usable as a base, in isinstance and in pydantic annotations)."""

        def init(self: Any, *args: Any, **kwargs: Any) -> None:
            return None

        def init_subclass(cls: type, **kwargs: Any) -> None:
            return None

        def schema(cls: type, source: Any, handler: Any) -> Any:
            from pydantic_core import core_schema

            return core_schema.any_schema()

        return StubMeta(
            name,
            (),
            {
                "__init__": init,
                "__init_subclass__": classmethod(init_subclass),
                "__get_pydantic_core_schema__": classmethod(schema),
            },
        )

    class StubModule(types.ModuleType):
        def __getattr__(self, key: str) -> Any:
            if key.startswith("__") and key.endswith("__"):
                raise AttributeError(key)
            value = stub_class(key) if key[:1].isupper() else Stub(f"{self.__name__}.{key}")
            setattr(self, key, value)  # the same object on every access
            return value

    missing: set[str] = set()

    class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
            top = name.split(".")[0]
            if top in sys.stdlib_module_names or top == "sglang":
                return None
            if top not in missing and not _imported_from_sglang(sglang_dir):
                return None
            if top not in missing:
                if name != top:
                    return None  # a submodule of an installed package: let it fail normally
                sys.meta_path.remove(self)
                try:
                    found = importlib.util.find_spec(top)
                except (ImportError, ValueError):
                    found = None
                finally:
                    sys.meta_path.append(self)
                if found is not None:
                    return None
                missing.add(top)
            return importlib.machinery.ModuleSpec(name, self, is_package=True)

        def create_module(self, spec: Any) -> Any:
            module = StubModule(spec.name)
            module.__path__ = []
            return module

        def exec_module(self, module: Any) -> None:
            return None

    sys.meta_path.append(Finder())


def _parser_kwargs(server_args_py: Path) -> dict[str, Any]:
    """The keyword arguments of `argparse.ArgumentParser(...)` in `prepare_server_args`."""
    tree = ast.parse(server_args_py.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "prepare_server_args":
            for call in ast.walk(node):
                if (
                    isinstance(call, ast.Call)
                    and isinstance(call.func, ast.Attribute)
                    and call.func.attr == "ArgumentParser"
                ):
                    out = {kw.arg: ast.literal_eval(kw.value) for kw in call.keywords if kw.arg}
                    out["line"] = call.lineno
                    return out
    raise SystemExit(f"{server_args_py}: no ArgumentParser in prepare_server_args")


def _function_names(path: Path) -> set[str]:
    if not path.exists():
        return set()
    return {n.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.FunctionDef)}


def _simple(value: Any) -> bool:
    if value is None or isinstance(value, bool | int | float | str):
        return True
    if isinstance(value, list | tuple):
        return len(value) <= 64 and all(_simple(v) for v in value)
    return False


def _type_hashes(root: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for path in sorted((root / "sglang" / "srt").rglob("*.py")):
        src = path.read_text(errors="replace")
        if not any(f"def {name}" in src for name in CUSTOM_TYPES):
            continue
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.FunctionDef) and node.name in CUSTOM_TYPES:
                seg = ast.get_source_segment(src, node) or ""
                rel = path.relative_to(root).as_posix()
                out[node.name] = (
                    f"{hashlib.sha256(seg.encode()).hexdigest()[:12]} {rel}:{node.lineno}"
                )
    return out


def extract(version: str, wheels: Path) -> dict[str, Any]:
    import logging
    import types

    root = wheels / version
    _install_stubs(str(root / "sglang") + "/")
    sys.path.insert(0, str(root))
    package = types.ModuleType("sglang")
    package.__path__ = [str(root / "sglang")]
    package.__version__ = version  # type: ignore[attr-defined]
    sys.modules["sglang"] = package

    where: dict[int, str] = {}
    original_add = argparse._ActionsContainer.add_argument
    sglang_dir = str(root / "sglang") + "/"

    def add_argument(self: Any, *args: Any, **kwargs: Any) -> Any:
        action = original_add(self, *args, **kwargs)
        frame = sys._getframe(1)
        while frame is not None and not frame.f_code.co_filename.startswith(sglang_dir):
            frame = frame.f_back  # type: ignore[assignment]
        if frame is not None:
            rel = frame.f_code.co_filename[len(str(root)) + 1 :]
            where[id(action)] = f"{rel}:{frame.f_lineno}"
        return action

    argparse._ActionsContainer.add_argument = add_argument  # type: ignore[method-assign]
    from sglang.srt import server_args as sa

    server_args_py = root / "sglang" / "srt" / "server_args.py"
    kwargs = _parser_kwargs(server_args_py)
    parser_line = kwargs.pop("line")
    parser = argparse.ArgumentParser(**kwargs)
    sa.ServerArgs.add_cli_args(parser)
    argparse._ActionsContainer.add_argument = original_add  # type: ignore[method-assign]

    records: list[dict[str, Any]] = []
    for action in parser._actions:
        kind = type(action).__name__
        rec: dict[str, Any] = {
            "options": list(action.option_strings),
            "dest": action.dest,
            "kind": kind,
        }
        if action.nargs is not None:
            rec["nargs"] = action.nargs
        if action.const is not None and _simple(action.const):
            rec["const"] = action.const
        if action.type is not None:
            rec["type"] = getattr(action.type, "__name__", repr(action.type))
        if action.choices is not None:
            choices = list(action.choices)
            if isinstance(action.choices, set | frozenset):
                choices = sorted(choices, key=str)
            rec["choices"] = [c if _simple(c) else str(c) for c in choices]
        if _simple(action.default) and action.default is not None:
            rec["default"] = (
                list(action.default) if isinstance(action.default, tuple) else action.default
            )
        if action.required:
            rec["required"] = True
        if action.help == argparse.SUPPRESS:
            rec["hidden"] = True
        for attr in ("new_flag", "const_value", "error_message"):
            value = getattr(action, attr, None)
            if value is not None and _simple(value):
                rec[attr] = value
        if kind.startswith("Deprecated") and action.option_strings:
            rec.update(_deprecation_text(parser, action))
        records.append({"action": rec, "where": where.get(id(action), "")})

    serve_py = root / "sglang" / "cli" / "serve.py"
    serve_functions = _function_names(serve_py)
    return {
        "version": version,
        "parser": {**kwargs, "where": f"sglang/srt/server_args.py:{parser_line}"},
        "positional_model": "_normalize_positional_model_path" in serve_functions,
        "strips_model_type": "_extract_model_type_override" in serve_functions,
        "config_merger": _config_merger(root),
        "type_sources": _type_hashes(root),
        "actions": records,
        "_logging": logging.getLevelName(logging.WARNING),
    }


def _config_merger(root: Path) -> str | None:
    """Hash of the YAML merger `--config` goes through (it moved to srt/utils/ in 0.5.19)."""
    for rel in ("srt/utils/server_args_config_parser.py", "srt/server_args_config_parser.py"):
        path = root / "sglang" / rel
        if path.exists():
            return f"{hashlib.sha256(path.read_bytes()).hexdigest()[:12]} sglang/{rel}"
    return None


def _deprecation_text(parser: argparse.ArgumentParser, action: argparse.Action) -> dict[str, str]:
    """Run the action once and capture the warning it logs (`{"warning": ...}`) or the
    parser error it raises (`{"error": ...}`), the option string written as `{option}`."""
    import contextlib
    import io
    import logging

    sentinel = "\x00OPTION\x00"
    captured: list[tuple[str, str]] = []

    class Grab(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            captured.append(("warning", record.getMessage()))

    handler = Grab()
    logging.getLogger().addHandler(handler)
    values: Any = None
    if action.nargs != 0:
        sample = str(next(iter(action.choices))) if action.choices else "1"
        values = [sample] if action.nargs in ("+", "*") else sample
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            action(parser, argparse.Namespace(), values, sentinel)
    except SystemExit:
        lines = err.getvalue().strip().splitlines()
        text = lines[-1].split(": error: ", 1)[-1] if lines else ""
        captured.append(("error", text))
    finally:
        logging.getLogger().removeHandler(handler)
    if not captured:
        return {}
    kind, text = captured[-1]
    return {kind: text.replace(sentinel, "{option}")}


# ---------------------------------------------------------------- assembly (parent)


def build(wheels: Path, versions: list[str]) -> dict[str, Any]:
    actions: list[dict[str, Any]] = []
    index: dict[str, int] = {}
    files: list[str] = []
    out_versions: dict[str, Any] = {}
    for version in versions:
        proc = subprocess.run(
            [sys.executable, __file__, "--extract", version, "--wheels", str(wheels)],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise SystemExit(f"{version}: extraction failed\n{proc.stderr[-3000:]}")
        data = json.loads(proc.stdout.strip().splitlines()[-1])
        refs: list[list[Any]] = []
        for item in data.pop("actions"):
            key = json.dumps(item["action"], sort_keys=True)
            if key not in index:
                index[key] = len(actions)
                actions.append(item["action"])
            path, _, line = item["where"].rpartition(":")
            if path not in files:
                files.append(path)
            refs.append([index[key], files.index(path), int(line or 0)])
        data.pop("_logging", None)
        data["actions"] = refs
        out_versions[version] = data
        print(f"{version}: {len(refs)} actions", file=sys.stderr)
    return {
        "generated_by": "scripts/gen_sglang_options.py",
        "source": "SGLang wheels from PyPI, ServerArgs.add_cli_args run per release",
        "versions": out_versions,
        "actions": actions,
        "files": files,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wheels", type=Path, default=Path("/work/wheels/src"))
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--extract", help=argparse.SUPPRESS)
    ap.add_argument("versions", nargs="*", help="default: every directory under --wheels")
    args = ap.parse_args()
    if args.extract:
        data = extract(args.extract, args.wheels)
        sys.stdout.write("\n" + json.dumps(data) + "\n")
        return 0
    versions = args.versions or sorted(
        (p.name for p in args.wheels.iterdir() if (p / "sglang").is_dir()), key=version_key
    )
    doc = build(args.wheels, versions)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, separators=(",", ":"), sort_keys=True) + "\n")
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
