"""Which target architectures an SGLang build can capture DFLASH hidden states from.

The DFLASH target must implement `set_dflash_layers_to_capture`: without it SGLang stops
with `Model X does not implement set_dflash_layers_to_capture, ...` (0.5.11-0.5.15.post1,
model_executor/model_runner.py 0.5.11:825-829) or `Model X implements neither
set_dspark_layers_to_capture nor set_dflash_layers_to_capture, ...` (0.5.16-0.5.23,
model_runner_components/attention_backend_setup.py 0.5.16:58-65). SGLang registers a model
class under its class name (`EntryClass` of each top-level `srt/models/*.py`,
srt/models/registry.py 0.5.23:118-148).

Two sources, both read as text with `ast`, never imported:
- the host's installed `sglang/srt/models` files (`hook_in_sources`), which also covers
  patched builds;
- the per-release data file `dflash_doctor/data/dflash_capture.json`, generated from the
  published wheels by `scripts/gen_dflash_capture.py` (to add a release: unpack its wheel
  beside the others and rerun the script). Read once, on first use.
"""

from __future__ import annotations

import ast
import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache, lru_cache
from importlib import resources

from dflash_doctor.facts.models import CaptureHook

HOOK = "set_dflash_layers_to_capture"
DATA_FILE = "dflash_capture.json"
MODELS_PACKAGE = "sglang.srt.models"
# Bounds for hostile host files (MAX_SOURCE_BYTES per file): a class chain is a few files.
MAX_SOURCE_FILES = 16
MAX_DEPTH = 20


# -- reading model sources ------------------------------------------------------------------


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


def _name_of(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript):  # Generic[T]
        return _name_of(node.value)
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


def _absolute(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    parts = module.split(".")[: -node.level]
    return ".".join([*parts, node.module] if node.module else parts)


# CPython 3.11's ast.parse is not safe in parallel threads: hosts checked at once raise
# "SystemError: AST constructor recursion depth mismatch" (python/cpython#106905), so one
# parse runs at a time (a model file parses in milliseconds).
_PARSE_LOCK = threading.Lock()


# A fleet's hosts mostly run the same SGLang release: the same module text is parsed once
# per run, not once per host (ast.parse of a model module costs ~15 ms). Never mutated.
@lru_cache(maxsize=64)
def parse_module(text: str, name: str) -> Module:
    """The classes, imports, aliases and EntryClass of one module's source text."""
    mod = Module(name)
    try:
        with _PARSE_LOCK:
            tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return mod
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            bases = [b for b in (_name_of(x) for x in node.bases) if b]
            mod.classes[node.name] = ClassInfo(name, node.name, bases, _defines_hook(node))
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(name, node)
            for alias in node.names:
                mod.imports[alias.asname or alias.name] = (source, alias.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if not isinstance(target, ast.Name):
                    continue
                if target.id == "EntryClass":
                    value = node.value
                    values = value.elts if isinstance(value, ast.List | ast.Tuple) else [value]
                    mod.entry = [n for n in (_name_of(v) for v in values) if n]
                elif isinstance(node.value, ast.Name):
                    mod.aliases[target.id] = node.value.id
    return mod


class Sources:
    """Model modules parsed on demand from a reader (wheel directory or host files)."""

    def __init__(self, read: Callable[[str], str | None], max_files: int = 10**6) -> None:
        self._read = read
        self._max_files = max_files
        self.modules: dict[str, Module | None] = {}

    def module(self, name: str) -> Module | None:
        if not name.startswith(MODELS_PACKAGE + "."):
            return None  # only SGLang's model package: never read elsewhere on a host
        if name not in self.modules:
            if len(self.modules) >= self._max_files:
                return None
            text = self._read(name)
            self.modules[name] = parse_module(text, name) if text is not None else None
        return self.modules[name]

    def resolve(self, module: Module, local: str, depth: int = 0) -> ClassInfo | None:
        if depth > MAX_DEPTH:
            return None
        local = module.aliases.get(local, local)
        if local in module.classes:
            return module.classes[local]
        if local in module.imports:
            source, original = module.imports[local]
            target = self.module(source)
            if target is not None:
                return self.resolve(target, original, depth + 1)
        return None

    def has_hook(self, info: ClassInfo, depth: int = 0) -> bool:
        if info.has_hook:
            return True
        if depth > MAX_DEPTH:
            return False
        module = self.modules.get(info.module)
        if module is None:
            return False
        for base in info.bases:
            found = self.resolve(module, base)
            if found is not None and self.has_hook(found, depth + 1):
                return True
        return False


def hook_in_sources(
    architecture: str, module_name: str, read: Callable[[str], str | None], path_of: str
) -> CaptureHook | None:
    """Whether `architecture` (registered by `module_name`) implements the hook, reading at
    most MAX_SOURCE_FILES modules; None when the module does not register it."""
    sources = Sources(read, MAX_SOURCE_FILES)
    module = sources.module(module_name)
    if module is None or architecture not in module.entry:
        return None
    info = sources.resolve(module, architecture)
    if info is None:
        return None
    implements = sources.has_hook(info)
    read_count = sum(1 for m in sources.modules.values() if m is not None)
    return CaptureHook(
        architecture=architecture, implements=implements, file=path_of, files_read=read_count
    )


# -- the per-release data -------------------------------------------------------------------


def release_key(version: str) -> tuple[int, ...]:
    """`0.5.13.post1` -> (0, 5, 13, 1): post releases sort after their base release."""
    return tuple(int(x) for x in re.findall(r"\d+", version.split("+", 1)[0])[:4])


@cache
def _data() -> dict[str, object]:
    text = resources.files("dflash_doctor.data").joinpath(DATA_FILE).read_text("utf-8")
    loaded: dict[str, object] = json.loads(text)
    return loaded


@dataclass(frozen=True)
class CaptureAnswer:
    release: str  # the release whose data answered
    exact: bool  # the host runs exactly that release
    known: bool  # the release registers the architecture at all
    captures: bool  # ... and it implements set_dflash_layers_to_capture
    next_capturing: str | None  # the first newer release that captures it, if any
    module: str | None  # the srt/models module that registers it in that release


def _in_runs(runs: list[list[str]], release: str) -> bool:
    key = release_key(release)
    return any(release_key(r[-2]) <= key <= release_key(r[-1]) for r in runs)


def capture_support(version: str, architecture: str) -> CaptureAnswer | None:
    """The answer for the newest release in the data at or below `version` (None: older)."""
    data = _data()
    releases = [str(r) for r in data["releases"]]  # type: ignore[attr-defined]
    key = release_key(version)
    below = [r for r in releases if release_key(r) <= key]
    if not below:
        return None
    release = below[-1]
    capture: dict[str, list[list[str]]] = data["capture"]  # type: ignore[assignment]
    known: dict[str, list[list[str]]] = data["known"]  # type: ignore[assignment]
    runs = capture.get(architecture, [])
    newer = [r for r in releases if release_key(r) > release_key(release) and _in_runs(runs, r)]
    modules = [r[0] for r in known.get(architecture, []) if _in_runs([r], release)]
    return CaptureAnswer(
        release=release,
        exact=release_key(release) == key,
        known=bool(modules),
        captures=_in_runs(runs, release),
        next_capturing=newer[0] if newer else None,
        module=modules[0] if modules else None,
    )


def first_registering(version: str, architecture: str) -> str | None:
    """The first release newer than `version` whose data registers `architecture` (any
    module: a drafter class is registered like any model), or None."""
    data = _data()
    known: dict[str, list[list[str]]] = data["known"]  # type: ignore[assignment]
    runs = known.get(architecture, [])
    key = release_key(version)
    releases = [str(r) for r in data["releases"]]  # type: ignore[attr-defined]
    newer = [r for r in releases if release_key(r) > key and _in_runs(runs, r)]
    return newer[0] if newer else None
