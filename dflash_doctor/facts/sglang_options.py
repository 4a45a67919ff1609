"""Replay SGLang's own argument parser, release by release, without importing SGLang.

`dflash_doctor/data/sglang_options.json` holds every action that `ServerArgs.add_cli_args`
registers in each published release (generated from the wheels by
`scripts/gen_sglang_options.py`). From it this module rebuilds that release's parser as
`prepare_server_args` builds it (`argparse.ArgumentParser(prog="sglang serve")`, default
`allow_abbrev=True`: srt/server_args.py:7276 in 0.5.11 ... :679 in 0.5.23) and parses a
command exactly as the server would: abbreviations resolve or are ambiguous, unknown flags are
refused, `--context-length 32k` parses (`human_readable_int`, srt/utils/common.py, every
release), deprecated aliases store into their target. In front of it, the same steps as
SGLang: `sglang serve` drops `--model-type` (cli/serve.py `_extract_model_type_override`,
every release) and takes a leading positional MODEL as `--model-path` from 0.5.16
(cli/serve.py `_normalize_positional_model_path`); `--config FILE.yaml` is merged by the
release's `ConfigArgumentMerger` (srt/server_args_config_parser.py, srt/utils/ from 0.5.19).

Error texts are argparse's own (of the Python running the tool: the host's Python may word a
few of them differently).

Data format: `versions[v].actions` is a list of `[action id, file id, line]`, the action in
`actions[id]`, added at `files[file id]:line` inside that release's wheel.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache
from importlib import resources
from typing import Any

from dflash_doctor.errors import FactError

MAX_CONFIG_BYTES = 1 << 20

ANSI = re.compile(r"\x1b\[[0-9;]*m")

# The YAML merger's three shapes, by the sha256 prefix of its source file in the wheel.
# v1: 0.5.11-0.5.13; v2 (dict values as JSON): 0.5.14-0.5.22; v3 (keys by every long
# spelling, shared dests stay usable): 0.5.23 (srt/utils/server_args_config_parser.py:17-65).
CONFIG_MERGERS = {"ee1c72493f49": 1, "3966b1206230": 2, "4dee1adca418": 3}


# ---------------------------------------------------------------- the custom `type=` callables
# Re-implemented from the wheels; the data holds each one's source hash per release, and
# tests/facts/test_sglang_options.py fails when a release changes one of them.
TYPE_SOURCES = {
    "human_readable_int": "625f5e9593ad",
    "nullable_str": "900c08104995",
    "json_list_type": "21272671ccec",
    "parse_cuda_graph_config_arg": ("4bfdf50801dd", "6e286605c3a1"),
    "parse_cuda_graph_backend_arg": "d972a254f19e",
}


def human_readable_int(value: str) -> int:
    """srt/utils/common.py `human_readable_int` (identical in 0.5.11-0.5.23)."""
    value = value.strip()
    si = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
    iec = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)", value)
    if match:
        number, suffix = match.groups()
        if suffix in iec:
            if "." in number:
                raise argparse.ArgumentTypeError(
                    f"Decimals are not allowed with IEC suffixes like '{suffix}'. "
                    f"Use an integer IEC value such as '{int(Decimal(number))}{suffix}', "
                    f"or an SI value such as '{number}{suffix[0]}'."
                )
            return int(number) * iec[suffix]
        return int(Decimal(number) * si[suffix])
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"Invalid integer value: '{value}'. "
            "Use a plain integer, SI suffixes (1k, 1M), or IEC suffixes (1Ki, 1Mi). "
            "Suffixes are case-sensitive."
        ) from None


def nullable_str(val: str) -> str | None:
    """srt/utils/common.py `nullable_str`."""
    if not val or val == "None":
        return None
    return val


def json_list_type(value: str) -> Any:
    """srt/utils/common.py `json_list_type` (orjson there; the same JSON grammar)."""
    try:
        return json.loads(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"Invalid JSON list: {value}. Please provide a valid JSON list."
        ) from None


def loads(value: str) -> Any:
    """`json.loads`, used directly as a type by several options."""
    return json.loads(value)


def parse_cuda_graph_backend_arg(raw: str) -> str:
    """model_executor/cuda_graph_config.py (0.5.22+)."""
    if raw == "tc_piecewise":
        raise argparse.ArgumentTypeError(
            "tc_piecewise was removed; select breakable, full, or disabled"
        )
    return raw


def parse_cuda_graph_config_arg(raw: str) -> Any:
    """model_executor/cuda_graph_config.py (0.5.14+): a JSON object of phases. The per-phase
    key check needs SGLang's tables and is left to SGLang."""
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"--cuda-graph-config must be JSON: {e}") from None
    if not isinstance(parsed, dict):
        raise argparse.ArgumentTypeError(
            f"--cuda-graph-config must be a JSON object, got {type(parsed).__name__}"
        )
    return parsed


TYPES: dict[str, Callable[[str], Any]] = {
    "str": str,
    "int": int,
    "float": float,
    "loads": loads,
    "human_readable_int": human_readable_int,
    "nullable_str": nullable_str,
    "json_list_type": json_list_type,
    "parse_cuda_graph_config_arg": parse_cuda_graph_config_arg,
    "parse_cuda_graph_backend_arg": parse_cuda_graph_backend_arg,
}


# ---------------------------------------------------------------- the data


@lru_cache(maxsize=1)
def _data() -> dict[str, Any]:
    """The per-release option data from the wheels (data/sglang_options.json), read once."""
    text = resources.files("dflash_doctor").joinpath("data/sglang_options.json").read_text()
    data: dict[str, Any] = json.loads(text)
    return data


def _release_key(text: str) -> tuple[int, int, int, int] | None:
    """`0.5.13.post1` -> (0, 5, 13, 1); `0.5.14` -> (0, 5, 14, 0); rc/dev builds count as
    the release they lead to."""
    m = re.match(r"^\s*v?(\d+)\.(\d+)\.(\d+)(?:\.?post(\d+))?", text)
    if m is None:
        return None
    return (int(m.group(1)), int(m.group(2)), int(m.group(3)), int(m.group(4) or 0))


def releases() -> tuple[str, ...]:
    """Every release in the data, oldest first."""
    return tuple(sorted(_data()["versions"], key=lambda v: _release_key(v) or (0, 0, 0, 0)))


def release_for(version: str) -> tuple[str | None, str | None]:
    """The release whose parser to replay for a host version, and a note when not exact."""
    if version in _data()["versions"]:
        return version, None
    key = _release_key(version)
    if key is None:
        return None, f"{version!r} is not an SGLang version"
    known = [(k, v) for v in releases() if (k := _release_key(v)) is not None]
    if key < known[0][0]:
        return None, f"SGLang {version} is older than every release in the option data"
    earlier = [v for k, v in known if k <= key]
    chosen = earlier[-1]
    if key > known[-1][0]:
        return chosen, (
            f"SGLang {version} is newer than the option data (last {chosen}): "
            f"its parser is replayed as {chosen}'s"
        )
    return chosen, f"SGLang {version} is not in the option data: replayed as {chosen}"


@dataclass(frozen=True)
class OptionInfo:
    """One option of one release, as the data describes it."""

    options: tuple[str, ...]
    dest: str
    kind: str
    where: str  # file:line inside the release's wheel
    new_flag: str | None = None
    warning: str | None = None  # what SGLang logs when it is used (ANSI colour removed)
    error: str | None = None  # the parser error it raises when used
    hidden: bool = False
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def deprecated(self) -> bool:
        """Whether the release defines the option with one of its Deprecated actions."""
        return self.kind.startswith("Deprecated")


@lru_cache(maxsize=64)
def options_of(release: str) -> tuple[OptionInfo, ...]:
    """Every option a release defines, with the wheel file:line of its definition."""
    data = _data()
    version = data["versions"][release]
    out: list[OptionInfo] = []
    for action_id, file_id, line in version["actions"]:
        a = data["actions"][action_id]
        out.append(
            OptionInfo(
                options=tuple(a["options"]),
                dest=a["dest"],
                kind=a["kind"],
                where=f"{data['files'][file_id]}:{line}",
                new_flag=a.get("new_flag"),
                warning=ANSI.sub("", a["warning"]) if "warning" in a else None,
                error=a.get("error"),
                hidden=bool(a.get("hidden")),
                raw=a,
            )
        )
    return tuple(out)


@lru_cache(maxsize=64)
def option_map(release: str) -> dict[str, OptionInfo]:
    """Option string -> its option (shared: do not modify)."""
    return {o: info for info in options_of(release) for o in info.options}


def release_info(release: str) -> dict[str, Any]:
    """The option data of one release (prog, parser variants, actions)."""
    info: dict[str, Any] = _data()["versions"][release]
    return info


# ---------------------------------------------------------------- the parser


class _Refused(Exception):
    """What argparse or SGLang would print before exiting: the launch is refused."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser that raises _Refused where argparse would print and exit."""

    def error(self, message: str) -> Any:  # argparse's exit, as an exception
        """Raise the refusal instead of exiting."""
        raise _Refused(message)

    def exit(self, status: int = 0, message: str | None = None) -> Any:
        """Raise instead of exiting (--help, --version)."""
        raise _Refused(message or "exit")


OnUse = Callable[[str, OptionInfo], None]


def _recording(
    base: type[argparse.Action], info: OptionInfo, on_use: OnUse | None = None
) -> type[argparse.Action]:
    """The action class of `info.kind`, that also notes each use on the namespace."""

    class Recorded(base):  # type: ignore[valid-type,misc]
        """The base action, noting each use and acting out SGLang's own refusals and warnings."""

        def __call__(
            self,
            parser: argparse.ArgumentParser,
            namespace: argparse.Namespace,
            values: Any,
            option_string: str | None = None,
        ) -> None:
            used = namespace.__dict__.setdefault("_dfd_used", [])
            used.append((option_string, info))
            if on_use is not None:
                on_use(option_string or "", info)
            if info.error is not None:
                parser.error(info.error)
            if info.kind == "DeprecatedStoreConstAction":
                setattr(namespace, self.dest, info.raw.get("const_value"))
            elif info.kind == "DeprecatedAction":
                return  # warns only (arg_groups/argparse_actions.py DeprecatedAction)
            elif base is argparse.Action:  # SGLang's own store-like actions
                setattr(namespace, self.dest, True if self.nargs == 0 else values)
            else:
                super().__call__(parser, namespace, values, option_string)

    return Recorded


_KINDS: dict[str, type[argparse.Action]] = {
    "_StoreAction": argparse._StoreAction,
    "_StoreTrueAction": argparse._StoreTrueAction,
    "_StoreFalseAction": argparse._StoreFalseAction,
    "_StoreConstAction": argparse._StoreConstAction,
    "_AppendAction": argparse._AppendAction,
    "_CountAction": argparse._CountAction,
    "BooleanOptionalAction": argparse.BooleanOptionalAction,
}


@lru_cache(maxsize=16)
def build_parser(release: str) -> argparse.ArgumentParser:
    """The release's parser (shared between calls: argparse keeps no state across parses)."""
    prog_kwargs = {k: v for k, v in release_info(release)["parser"].items() if k != "where"}
    parser = _Parser(**prog_kwargs, add_help=False)
    add_options(parser, release)
    return parser


def add_options(parser: argparse.ArgumentParser, release: str, on_use: OnUse | None = None) -> None:
    """Add the release's options to `parser`, as `ServerArgs.add_cli_args` does. Each use
    of an option is noted on the namespace (`_dfd_used`: option string, OptionInfo) and
    passed to `on_use` while argparse runs (where SGLang's actions log their warnings)."""
    for info in options_of(release):
        a = info.raw
        if info.kind == "_HelpAction":
            if any(o in parser._option_string_actions for o in info.options):
                continue  # the caller's parser has its own -h
            parser.add_argument(*info.options, action="store_true", dest="help")
            continue
        kwargs: dict[str, Any] = {"dest": info.dest}
        base = _KINDS.get(info.kind, argparse.Action)
        if info.kind == "BooleanOptionalAction":
            # it builds its --no- spellings itself: give it the positive ones only
            opts = [o for o in info.options if not o.startswith("--no-")]
            parser.add_argument(*opts, action=_recording(base, info, on_use), dest=info.dest)
            continue
        if info.kind not in ("_StoreTrueAction", "_StoreFalseAction", "_CountAction"):
            if "nargs" in a:
                kwargs["nargs"] = a["nargs"]
            if "const" in a and info.kind in ("_StoreConstAction", "_StoreAction"):
                kwargs["const"] = a["const"]
            if "type" in a:
                kwargs["type"] = TYPES.get(a["type"], str)
            if "choices" in a:
                kwargs["choices"] = a["choices"]
        if "default" in a:
            kwargs["default"] = a["default"]
        if a.get("required"):
            kwargs["required"] = True
        if base is argparse.Action and "nargs" not in kwargs and a.get("nargs") == 0:
            kwargs["nargs"] = 0
        action = parser.add_argument(*info.options, action=_recording(base, info, on_use), **kwargs)
        action.sglang_kind = info.kind  # type: ignore[attr-defined]


# ---------------------------------------------------------------- what SGLang does before argparse


def strip_model_type(argv: list[str]) -> list[str]:
    """cli/serve.py `_extract_model_type_override` (every release)."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--model-type":
            if i + 1 >= len(argv):
                raise _Refused("Error: --model-type requires a value.")
            i += 2
            continue
        if arg.startswith("--model-type="):
            i += 1
            continue
        out.append(arg)
        i += 1
    return out


def merge_config(
    argv: list[str], parser: argparse.ArgumentParser, variant: int, read: Callable[[str], bytes]
) -> list[str]:
    """`ConfigArgumentMerger.merge_config_with_args` of the release (variant 1, 2 or 3)."""
    indices = [i for i, a in enumerate(argv) if a == "--config"]
    if not indices:
        return argv
    if len(indices) > 1:
        raise _Refused("ValueError: Multiple config files specified! Only one allowed.")
    at = indices[0]
    if at == len(argv) - 1:
        raise _Refused("ValueError: No config file specified after --config flag!")
    doc = _load_config(argv[at + 1], read)
    actions = [a for a in parser._actions if a.option_strings]
    store_true = {k for a in actions if _is_store_true(a) for k in _config_keys(a, variant)}
    merged = _config_argv(doc, _unsupported(actions, variant), store_true, variant)
    return merged + argv[:at] + argv[at + 2 :]


def _load_config(path: str, read: Callable[[str], bytes]) -> dict[Any, Any]:
    """The `--config` YAML file as SGLang accepts it: a mapping in a .yaml or .yml file."""
    import yaml

    suffix = path.rsplit("/", 1)[-1]
    suffix = "." + suffix.rsplit(".", 1)[1] if "." in suffix else ""
    if suffix.lower() not in (".yaml", ".yml"):
        raise _Refused(f"ValueError: Config file must be YAML format, got: {suffix}")
    data = read(path)
    if len(data) > MAX_CONFIG_BYTES:
        raise FactError(f"config file {path} is larger than {MAX_CONFIG_BYTES} bytes")
    try:
        doc = yaml.safe_load(data.decode("utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError, RecursionError) as e:
        raise FactError(f"config file {path} is not valid YAML: {type(e).__name__}") from None
    if doc is None:
        doc = {}
    _check_size(doc, path)
    if not isinstance(doc, dict):
        raise _Refused("ValueError: Config file must contain a dictionary at root level")
    return doc


def _config_keys(action: argparse.Action, variant: int) -> set[str]:
    """The config keys that name an option: its dest, and from variant 3 its long spellings."""
    if variant < 3:
        return {action.dest}
    return {action.dest} | {
        o[2:].replace("-", "_") for o in action.option_strings if o.startswith("--")
    }


def _is_store(a: argparse.Action) -> bool:
    """Whether an action stores a value (argparse store)."""
    return isinstance(a, argparse._StoreAction)


def _is_store_true(a: argparse.Action) -> bool:
    """Whether an action is a store_true flag."""
    return isinstance(a, argparse._StoreTrueAction)


def _unsupported(actions: list[argparse.Action], variant: int) -> dict[str, argparse.Action]:
    """The config keys the release refuses, with the action each names."""
    excluded = ("--config", "--help", "-h")
    if variant < 3:
        return {
            a.dest: a
            for a in actions
            if not _is_store_true(a)
            and not _is_store(a)
            and not any(o in a.option_strings for o in excluded)
        }
    supported = [a for a in actions if _is_store_true(a) or _is_store(a) or a.nargs is None]
    supported_keys = {k for a in supported for k in _config_keys(a, variant)}
    return {
        k: a
        for a in actions
        if a not in supported and not any(o in a.option_strings for o in excluded)
        for k in _config_keys(a, variant)
        if k not in supported_keys
    }


def _config_argv(
    doc: dict[Any, Any],
    unsupported: dict[str, argparse.Action],
    store_true: set[str],
    variant: int,
) -> list[str]:
    """The config's keys as the command-line words SGLang puts before the rest."""
    merged: list[str] = []
    for key, value in list(doc.items())[:4096]:
        key = str(key)
        norm = key.replace("-", "_")
        if norm in unsupported:
            kind = _kind_name(unsupported[norm])
            raise _Refused(f"ValueError: Unsupported config option '{norm}' with action '{kind}'")
        if isinstance(value, bool):
            if norm in store_true:
                if value:
                    merged.append(f"--{key}")
            else:
                merged += [f"--{key}", str(value).lower()]
        elif isinstance(value, list):
            if value:
                merged += [f"--{key}", *(str(v) for v in value)]
        elif isinstance(value, dict) and variant >= 2:
            merged += [f"--{key}", json.dumps(value)]
        else:
            merged += [f"--{key}", str(value)]
    return merged


def _check_size(doc: Any, path: str, budget: int = 100_000) -> None:
    """YAML aliases can make a small file expand exponentially once turned into argv
    strings: count the nodes as they would be expanded, and refuse past `budget`."""
    stack = [doc]
    seen = 0
    while stack:
        node = stack.pop()
        seen += 1
        if seen > budget:
            raise FactError(f"config file {path} expands to more than {budget} values")
        if isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def _kind_name(action: argparse.Action) -> str:
    """The SGLang action kind an option was defined with, as SGLang names it."""
    return str(getattr(action, "sglang_kind", type(action).__name__))


# ---------------------------------------------------------------- replay


@dataclass(frozen=True)
class UsedOption:
    """One option a launch command used, as written and as resolved."""

    written: str  # the option as the command wrote it (an abbreviation stays one)
    info: OptionInfo
    option: str  # the option string argparse resolved it to


@dataclass(frozen=True)
class Replay:
    """A release parser replayed on a launch command: the values, the options used, the refusal."""

    release: str
    prog: str
    argv: list[str]  # what reached argparse (after --model-type, positional MODEL, --config)
    values: dict[str, Any]
    used: tuple[UsedOption, ...]
    error: str | None
    note: str | None = None
    # options that came from the --config YAML file: option -> that file
    from_config: dict[str, str] = field(default_factory=dict)

    @property
    def error_line(self) -> str | None:
        """The refusal as argparse prints it, or None when the command parses."""
        return f"{self.prog}: error: {self.error}" if self.error is not None else None


def resolve(parser: argparse.ArgumentParser, token: str) -> str | None:
    """The option string a written `--flag` (or `--flag=value`) means to this parser."""
    name = token.split("=", 1)[0] if token.startswith("--") else token
    actions = parser._option_string_actions
    if name in actions:
        return name
    if not parser.allow_abbrev or not name.startswith("--"):
        return None
    matches = [o for o in actions if o.startswith(name)]
    return matches[0] if len(matches) == 1 else None


def resolve_in(release: str, token: str) -> str | None:
    """`resolve` against a release's options without building its parser."""
    name = token.split("=", 1)[0]
    options = option_map(release)
    if name in options:
        return name
    if not name.startswith("--"):
        return None
    matches = [o for o in options if o.startswith(name)]
    return matches[0] if len(matches) == 1 else None


def replay(
    server_argv: Sequence[str],
    release: str,
    *,
    serve: bool = False,
    read: Callable[[str], bytes] | None = None,
    note: str | None = None,
) -> Replay:
    """Parse the server arguments (what follows `sglang.launch_server` or `sglang serve`)."""
    info = release_info(release)
    parser = build_parser(release)
    prog = parser.prog
    argv = list(server_argv)
    from_config: dict[str, str] = {}
    try:
        if serve and info.get("strips_model_type"):
            argv = strip_model_type(argv)
        if serve and info.get("positional_model") and argv and not argv[0].startswith("-"):
            argv = ["--model-path", argv[0], *argv[1:]]
        if "--config" in argv:
            if read is None:
                raise FactError("--config names a file that cannot be read here")
            variant = CONFIG_MERGERS.get(str(info.get("config_merger") or "").split(" ")[0], 3)
            before = len(argv)
            config_path = argv[argv.index("--config") + 1] if argv[-1] != "--config" else ""
            argv = merge_config(argv, parser, variant, read)
            merged = argv[: len(argv) - (before - 2)]
            from_config = {a: config_path for a in merged if a.startswith("--")}
        ns = parser.parse_args(argv)
        error = None
    except _Refused as e:
        ns = argparse.Namespace()
        error = e.message
    used_raw: list[tuple[str | None, OptionInfo]] = ns.__dict__.pop("_dfd_used", [])
    written = {resolve(parser, a): a.split("=", 1)[0] for a in argv if a.startswith("-")}
    used = tuple(
        UsedOption(written=written.get(opt, opt or ""), info=i, option=opt or "")
        for opt, i in used_raw
    )
    return Replay(
        release=release,
        prog=prog,
        argv=argv,
        values=dict(vars(ns)),
        used=used,
        error=error,
        note=note,
        from_config=from_config,
    )


# ---------------------------------------------------------------- renamed, deprecated, removed

_PLAIN_FLAG = re.compile(r"--[A-Za-z0-9][A-Za-z0-9-]*")


@dataclass(frozen=True)
class Renamed:
    """An option the command uses that its release deprecates, or that an earlier release
    had and this one no longer accepts."""

    written: str  # as the command wrote it
    old: str  # the option string it stands for
    new: str | None  # the spelling to use instead (a plain flag, or SGLang's hint text)
    status: str  # "deprecated" | "removed"
    release: str
    since: str  # first release where it is deprecated / no longer accepted
    last: str | None  # the last release that accepts it (deprecated ones: None if still open)
    message: str  # SGLang's own warning, or argparse's refusal
    where: str  # wheel file:line of the definition (this release's, or the last one's)

    @property
    def rewritable(self) -> bool:
        """Whether the new spelling is a plain flag a fix may write in place of the old."""
        return self.new is not None and _PLAIN_FLAG.fullmatch(self.new) is not None


def _older(release: str) -> list[str]:
    """The releases before `release`, in order."""
    key = _release_key(release)
    return [v for v in releases() if key is not None and (_release_key(v) or key) < key]


def _history(name: str) -> list[str]:
    """The releases that define option `name`."""
    return [v for v in releases() if name in option_map(v)]


def renamed_option(release: str | None, written: str) -> Renamed | None:
    """What the option data says about `written` in `release` (None: nothing to say)."""
    if release is None or release not in _data()["versions"]:
        return None
    name = written.split("=", 1)[0]
    opts = option_map(release)
    resolved = resolve_in(release, name)
    if resolved is not None:
        info = opts[resolved]
        if not (info.deprecated and info.new_flag):
            return None
        history = _history(resolved)
        since = next(v for v in history if option_map(v)[resolved].deprecated)
        later = [v for v in releases() if v not in history and v not in _older(release)]
        text = info.warning or info.error or ""
        return Renamed(
            written=name,
            old=resolved,
            new=info.new_flag,
            status="deprecated",
            release=release,
            since=since,
            last=history[-1] if later else None,
            message=text.replace("{option}", resolved),
            where=info.where,
        )
    had = [v for v in _older(release) if name in option_map(v)]
    if not had:
        return None
    last = had[-1]
    before = option_map(last)[name]
    successor = before.new_flag if before.deprecated else None
    if successor is None:
        same_dest = [
            o
            for o in (*before.options, *(o for i in options_of(release) for o in i.options))
            if o in opts and opts[o].dest == before.dest and not opts[o].deprecated
        ]
        successor = same_dest[0] if same_dest else None
    if successor is not None and _PLAIN_FLAG.fullmatch(successor) and successor not in opts:
        successor = None
    matches = [o for o in opts if o.startswith(name)] if name.startswith("--") else []
    refusal = (
        f"ambiguous option: {name} could match {', '.join(matches)}"
        if len(matches) > 1
        else f"unrecognized arguments: {name}"
    )
    newer = [v for v in releases() if v not in _older(last) and v != last]
    return Renamed(
        written=name,
        old=name,
        new=successor,
        status="removed",
        release=release,
        since=newer[0] if newer else release,
        last=last,
        message=refusal,
        where=before.where,
    )
