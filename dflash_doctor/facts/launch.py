"""Parse an SGLang launch command (process cmdline, shell script, systemd unit) into LaunchArgs.

The fallback parser knows only the DFlash-relevant flags, so it refuses abbreviations
(`allow_abbrev=False`) rather than guess how SGLang's full parser would resolve them;
flags it does not model (abbreviations among them) are listed in `other_flags`. Where the
`sglang` package of the host's version is importable, `sglang_native` judges them exactly.
"""

from __future__ import annotations

import argparse
import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache

from pydantic import ValidationError

from dflash_doctor.errors import FactError, validation_line
from dflash_doctor.facts.models import LaunchArgs, LaunchKind
from dflash_doctor.facts.sglang_options import human_readable_int
from dflash_doctor.facts.shell import (
    Command,
    Env,
    Reader,
    decode,
    placeholders,
    read_env_file,
    run_script,
    shown,
)
from dflash_doctor.facts.systemd_unit import directives, exec_start
from dflash_doctor.on_host.sglang_args import SGLANG_FIELDS
from dflash_doctor.redact import redact_argv
from dflash_doctor.sglang_versions import NEW_WINDOW_FLAG, OLD_WINDOW_FLAG, WINDOW_FLAGS

MAX_LAUNCH_BYTES = 1024 * 1024
# A word of a command line that is an interpreter (`python`, `/venv/bin/python3.11`).
PYTHON_WORD = r"(^|/)python[0-9.]*$"


@dataclass(frozen=True)
class FlagSpec:
    flags: tuple[str, ...]
    dest: str
    kind: Callable[[str], object]
    switch: bool = False  # store_true: present or not, takes no value


def sglang_int(text: str) -> int:
    """SGLang's `type=int` for the DFlash size flags (every release: 0.5.11
    srt/server_args.py:5405-5422, 0.5.23 arg_groups/arg_utils.py:417): zero and negative
    values parse, and SGLang's post-parse hooks refuse them (checks/startup_refusals.py).
    ASCII digits with an optional sign and a sane length only: `int` takes '²'-like digits
    and 4,300-digit numbers."""
    body = text.strip()
    digits = body[1:] if body[:1] in "+-" else body
    if not (digits.isascii() and digits.isdigit() and len(digits) <= 18):
        raise ValueError(text)
    return int(body)


def _positive_int(text: str) -> int:
    # ASCII digits only, a sane length: `int` takes '²'-like digits and 4,300-digit numbers.
    if not (text.isascii() and text.strip().isdigit() and len(text.strip()) <= 18):
        raise ValueError(text)
    value = int(text)
    if value <= 0:
        raise ValueError(text)
    return value


# Hostile-input bounds: argparse is quadratic in option-like tokens (25,000 `-x`
# took 31 s); no real launch command has more than a few hundred words.
MAX_ARGV_WORDS = 1024
MAX_ARG_CHARS = 64 * 1024


def check_argv_bounds(argv: list[str]) -> None:
    """Refuse command lines no server has, before any quadratic work."""
    if len(argv) > MAX_ARGV_WORDS:
        raise FactError(f"launch command has {len(argv)} words, more than {MAX_ARGV_WORDS}")
    longest = max((len(a) for a in argv), default=0)
    if longest > MAX_ARG_CHARS:
        raise FactError(f"launch command has a {longest}-character word")


FLAG_SPECS: tuple[FlagSpec, ...] = (
    FlagSpec(("--model-path", "--model"), "model_path", str),
    FlagSpec(("--speculative-algorithm",), "speculative_algorithm", str),
    # the second spelling exists in every release (srt/server_args.py:5370 in 0.5.11)
    FlagSpec(
        ("--speculative-draft-model-path", "--speculative-draft-model"), "draft_model_path", str
    ),
    FlagSpec(("--speculative-num-draft-tokens",), "num_draft_tokens", sglang_int),
    FlagSpec(("--speculative-dflash-block-size",), "dflash_block_size", sglang_int),
    FlagSpec((NEW_WINDOW_FLAG,), "new_window", sglang_int),
    FlagSpec((OLD_WINDOW_FLAG,), "old_window", sglang_int),
    # 0.5.21+ (arg_groups/arg_utils.py:417); refused without a window (startup_refusals.py)
    FlagSpec(("--speculative-draft-sink-size",), "draft_sink_size", sglang_int),
    FlagSpec(("--attention-backend",), "attention_backend", str),
    FlagSpec(("--speculative-draft-attention-backend",), "draft_attention_backend", str),
    FlagSpec(("--page-size",), "page_size", _positive_int),
    # SGLang's own type: `32k`, `128Ki` (srt/utils/common.py human_readable_int, 0.5.11+)
    FlagSpec(("--context-length",), "context_length", human_readable_int),
    FlagSpec(("--mem-fraction-static",), "mem_fraction_static", float),
    FlagSpec(("--cuda-graph-max-bs",), "cuda_graph_max_bs", _positive_int),
    FlagSpec(("--max-running-requests",), "max_running_requests", _positive_int),
    FlagSpec(("--tp-size", "--tensor-parallel-size", "--tp"), "tp_size", _positive_int),
    FlagSpec(("--kv-cache-dtype",), "kv_cache_dtype", str),
    # Topology and backends that DFLASH refuses or changes (checks/pipeline_parallel.py,
    # dp_attention.py, drafter_heads_vs_tp.py, trtllm_mha_gpu.py);
    # option strings from 0.5.11 server_args.py:4664-4686, 5117, 5271-5278, 6097-6109 and
    # 0.5.22 arg_groups/fields/parallel.py:81-89 (--attn-dp-size).
    FlagSpec(("--pp-size", "--pipeline-parallel-size"), "pp_size", _positive_int),
    FlagSpec(("--dp-size", "--data-parallel-size"), "dp_size", _positive_int),
    FlagSpec(("--attn-dp-size", "--attention-data-parallel-size"), "attn_dp_size", _positive_int),
    FlagSpec(("--enable-dp-attention",), "enable_dp_attention", bool, switch=True),
    FlagSpec(("--enable-dp-lm-head",), "enable_dp_lm_head", bool, switch=True),
    FlagSpec(("--prefill-attention-backend",), "prefill_attention_backend", str),
    FlagSpec(("--decode-attention-backend",), "decode_attention_backend", str),
    FlagSpec(("--quantization",), "quantization", str),
    # Ignored (--speculative-adaptive, EAGLE/EAGLE3 only) or release-dependent
    # (--disaggregation-mode) with DFLASH (checks/adaptive_ignored.py, disaggregation.py);
    # option strings: `srt/server_args.py` 0.5.11:5530 for the first and
    # `srt/server_args.py` 0.5.11:6419 for the second.
    FlagSpec(("--speculative-adaptive",), "speculative_adaptive", bool, switch=True),
    FlagSpec(("--disaggregation-mode",), "disaggregation_mode", str),
)
FLAG_BY_NAME = {flag: spec for spec in FLAG_SPECS for flag in spec.flags}


class _RaisingParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise FactError(message)


# Built once: add_argument asks the terminal's size each time (~0.6 ms a host for 48
# flags); parse_known_args leaves the parser as it found it, so threads may share it.
@cache
def _fallback_parser() -> argparse.ArgumentParser:
    parser = _RaisingParser(add_help=False, allow_abbrev=False, prog="sglang.launch_server")
    for spec in FLAG_SPECS:
        if spec.switch:
            parser.add_argument(*spec.flags, dest=spec.dest, action="store_true", default=None)
        else:
            parser.add_argument(*spec.flags, dest=spec.dest, default=None)
    return parser


_LAUNCHERS = ("sglang.launch_server", "launch_server.py", "sglang/launch_server.py")


def sglang_args_start(argv: list[str]) -> int:
    """Index of the first server argument after the launcher in argv."""
    for i, arg in enumerate(argv):
        if arg.endswith(_LAUNCHERS):
            return i + 1
        if arg.endswith("sglang") and i + 1 < len(argv) and argv[i + 1] == "serve":
            return i + 2
    raise FactError("no sglang.launch_server (or `sglang serve`) command found")


def _python_of(argv: list[str], start: int) -> str | None:
    head = argv[: max(start - 1, 0)]
    for arg in head:
        if re.search(PYTHON_WORD, arg):
            return arg
    return None


def _flag_values(
    ns: argparse.Namespace, lost: Sequence[str]
) -> tuple[dict[str, object], list[str]]:
    """The DFlash flags' typed values by dest, and argparse's error for each value that does
    not convert (the value is then left out: SGLang refuses the command, DFD110 says so).
    A value holding an unexpanded variable is left out too, unknown offline."""
    values: dict[str, object] = {}
    errors: list[str] = []
    for spec in FLAG_SPECS:
        raw = getattr(ns, spec.dest)
        if raw is None:
            continue
        if any(shown(name) in raw for name in lost):
            continue  # unknown offline: named in parser_notes, every other value kept
        try:
            values[spec.dest] = spec.kind(raw)
        except (ValueError, argparse.ArgumentTypeError):
            error = _argparse_error(spec, raw)
            if error is not None:
                errors.append(error)
    return values, errors


def _argparse_error(spec: FlagSpec, raw: str) -> str | None:
    """argparse's own text for a value SGLang's `type=` refuses (argparse._get_values), or
    None where SGLang's type takes it and only our stricter reading does not (`--tp-size -4`
    is an int to argparse: left unread here, judged by SGLang later)."""
    kind = "int" if spec.kind is _positive_int else getattr(spec.kind, "__name__", "value")
    if spec.kind is _positive_int:
        try:
            sglang_int(raw)
        except ValueError:
            pass
        else:
            return None
    return f"argument {spec.flags[0]}: invalid {kind} value: {str(raw)[:40]!r}"


def _lost_notes(server_argv: list[str], lost: Sequence[str]) -> list[str]:
    """One note per unexpanded variable, naming the flags whose value holds it."""
    notes: list[str] = []
    for name in lost:
        users = [
            prev
            for prev, word in zip(["", *server_argv], server_argv, strict=False)
            if shown(name) in word
        ]
        where = ", ".join(u for u in users if u.startswith("-")) or "the command"
        notes.append(
            f"{shown(name)} could not be expanded offline (not set by the launch file or the "
            f"files it sources): unknown value in {where}; every other value is kept"
        )
    return notes


def parse_argv(
    argv: list[str],
    *,
    source: str,
    kind: LaunchKind,
    flag_lines: dict[str, int] | None = None,
    command_lines: tuple[int, int] | None = None,
    lost: Sequence[str] = (),
    notes: Sequence[str] = (),
) -> LaunchArgs:
    """`lost`: shell variables that could not be expanded (their words hold `${NAME}`)."""
    check_argv_bounds(argv)
    start = sglang_args_start(argv)
    parser_notes = list(notes)
    server_argv = argv[start:]
    ns, unknown = _fallback_parser().parse_known_args(server_argv)
    values, value_errors = _flag_values(ns, lost)
    present = [a.split("=", 1)[0] for a in server_argv if a.split("=", 1)[0] in FLAG_BY_NAME]
    window_flag: str | None = None
    window: object = None
    # argparse keeps the last occurrence; so does SGLang, and so do we across both spellings.
    for a in server_argv:
        name = a.split("=", 1)[0]
        if name in (NEW_WINDOW_FLAG, OLD_WINDOW_FLAG):
            window_flag = name
            window = values.get("new_window" if name == NEW_WINDOW_FLAG else "old_window")
    values.pop("new_window", None)
    values.pop("old_window", None)
    # The fallback models only DFlash flags: the rest are SGLang's to judge, not unknown.
    other_flags = [u.split("=", 1)[0] for u in unknown if u.startswith("-")]
    parser_notes.extend(_lost_notes(server_argv, lost))
    return LaunchArgs(
        source=source,
        kind=kind,
        argv=redact_argv(argv),
        parser="fallback",
        draft_window_size=window if isinstance(window, int) else None,
        draft_window_flag=window_flag,
        flags_present=present,
        other_flags=other_flags,
        flag_lines=flag_lines or {},
        command_lines=command_lines,
        python=_python_of(argv, start),
        parser_notes=parser_notes,
        value_errors=value_errors,
        **values,
    )


def parse_cmdline(data: bytes, *, source: str) -> LaunchArgs:
    """`/proc/PID/cmdline`: arguments separated (and ended) by NUL bytes."""
    if len(data) > MAX_LAUNCH_BYTES:
        raise FactError(f"cmdline is {len(data)} bytes, larger than {MAX_LAUNCH_BYTES}")
    argv = [a.decode("utf-8", "replace") for a in data.split(b"\0")]
    if argv and argv[-1] == "":
        argv.pop()
    if not argv:
        raise FactError("empty command line")
    return parse_argv(argv, source=source, kind="process")


@dataclass(frozen=True)
class LogicalLine:
    first: int  # 1-based physical line where it starts
    physical: list[str]

    @property
    def span(self) -> tuple[int, int]:
        return (self.first, self.first + len(self.physical) - 1)

    @property
    def text(self) -> str:
        return " ".join(p[:-1] if _continues(p) else p for p in self.physical)


def _continues(line: str) -> bool:
    """An odd run of backslashes right at the end continues the line; `\\ ` (a backslash
    and a trailing space) escapes the space and ends the command, as in bash."""
    stripped = line.rstrip("\r")
    run = len(stripped) - len(stripped.rstrip("\\"))
    return run % 2 == 1


def logical_lines(text: str) -> list[LogicalLine]:
    """Join backslash-continued lines, keeping where each started (for evidence and edits)."""
    out: list[LogicalLine] = []
    current: list[str] = []
    first = 0
    for number, line in enumerate(text.splitlines(), start=1):
        if not current:
            first = number
        current.append(line)
        if not _continues(line):
            out.append(LogicalLine(first, current))
            current = []
    if current:
        out.append(LogicalLine(first, current))
    return out


def _split(text: str, first_line: int) -> list[str]:
    try:
        return shlex.split(text, comments=True)
    except ValueError as e:
        raise FactError(f"line {first_line}: cannot split the command: {e}") from None


def runs_sglang(words: list[str]) -> bool:
    """Whether `words` (after prefixes) run an SGLang server."""
    try:
        sglang_args_start(words)
    except FactError:
        return False
    return True


def _from_shell(cmd: Command, env: Env, source: str, kind: LaunchKind) -> LaunchArgs:
    argv = [placeholders(w) for w in cmd.words]
    flag_lines = {
        w.split("=", 1)[0]: ln for w, ln in zip(argv, cmd.lines, strict=True) if w.startswith("--")
    }
    return parse_argv(
        argv,
        source=source,
        kind=kind,
        flag_lines=flag_lines,
        command_lines=(cmd.first, cmd.last),
        lost=env.lost,
        notes=env.notes,
    )


def parse_script(
    data: bytes, *, source: str, read: Reader | None = None, path: str = ""
) -> LaunchArgs:
    """A shell launch script, walked as bash would run it (facts/shell.py): the first command
    that runs SGLang (not an `echo` or `pkill` that mentions it), expanded with the script's
    variables, arrays and sourced files (read through `read`, never executed)."""
    text = decode(data, "launch script", MAX_LAUNCH_BYTES)
    env = Env()
    cmd = run_script(text, env, read=read, here=path or source, is_sglang=runs_sglang)
    if cmd is None:
        raise FactError("no sglang.launch_server command found in the launch script")
    return _from_shell(cmd, env, source, "script")


def unit_command(
    data: bytes,
    read: Reader | None,
    is_server: Callable[[list[str]], bool],
    refusals: tuple[type[FactError], str, str],
) -> tuple[Command, Env]:
    """The server command of a systemd unit's last `ExecStart=`, its words' lines, and the
    environment `Environment=` / `EnvironmentFile=` (read through `read`; a leading `-`
    makes it optional) give it; directives read as systemd reads them (facts/systemd_unit.py:
    continuations, comment lines inside them). `refusals`: the error raised and its texts
    for a unit without `ExecStart=` and for one whose command is not the server."""
    error, no_exec, not_server = refusals
    text = decode(data, "systemd unit", MAX_LAUNCH_BYTES)
    env = Env()
    for d in directives(text):
        if d.key == "Environment":
            for item in _split(d.value, d.first):
                if "=" in item:
                    k, v = item.split("=", 1)
                    env.set(k, v)
        elif d.key == "EnvironmentFile":
            _environment_file(d.value, env, read)
    found = exec_start(text)
    if found is None:
        raise error(no_exec)
    exec_line, prefix = found
    # systemd expands $VAR / ${VAR} from the environment it was given; a shell-style walk
    # of the one command line does the same for these forms.
    cmd = run_script(exec_line.value[prefix:], env, read=None, is_sglang=is_server)
    if cmd is None:
        raise error(not_server)
    lines = [_line_of(text, exec_line.offsets[prefix + s]) for s, _ in cmd.spans]
    return Command(cmd.words, lines, exec_line.first, exec_line.last), env


def parse_systemd_unit(data: bytes, *, source: str, read: Reader | None = None) -> LaunchArgs:
    """A systemd unit: the last `ExecStart=` running sglang.launch_server (`unit_command`)."""
    cmd, env = unit_command(
        data,
        read,
        runs_sglang,
        (
            FactError,
            "no ExecStart= line in the systemd unit",
            "ExecStart= does not run sglang.launch_server",
        ),
    )
    return _from_shell(cmd, env, source, "systemd")


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _environment_file(value: str, env: Env, read: Reader | None) -> None:
    """`EnvironmentFile=PATH` into `env`; `-PATH` is optional (no note when it is missing)."""
    path = value.strip()
    optional = path.startswith("-")
    path = path.lstrip("-")
    try:
        if read is None:
            raise FactError("not read offline")
        read_env_file(decode(read(path), path), env)
    except FactError as e:
        if not optional:
            env.notes.append(f"EnvironmentFile={path} could not be read ({e})")


def _as_argv(value: object, what: str) -> list[str]:
    if isinstance(value, str):
        return _split(value, 1)
    if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
        return [str(v) for v in value]
    if value is None:
        return []
    raise FactError(f"{what} should be a string or a list of strings")


def parse_compose(data: bytes, *, source: str, service: str | None = None) -> LaunchArgs:
    """A docker compose file: `entrypoint` + `command` of the (named, or the SGLang) service."""
    import yaml

    text = decode(data, "compose file", MAX_LAUNCH_BYTES)
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise FactError(f"invalid YAML{where}") from None
    except (RecursionError, ValueError):  # nested thousands deep; a bad timestamp
        raise FactError("invalid YAML (nested too deeply or a bad value)") from None
    services = doc.get("services") if isinstance(doc, dict) else None
    if not isinstance(services, dict):
        raise FactError("compose file has no services")
    names = [service] if service else list(services)
    for name in names:
        svc = services.get(name)
        if not isinstance(svc, dict):
            if service:
                raise FactError(f"compose file has no service {service!r}")
            continue
        argv = _as_argv(svc.get("entrypoint"), f"{name}.entrypoint") + _as_argv(
            svc.get("command"), f"{name}.command"
        )
        if service or any("launch_server" in a or a == "serve" for a in argv):
            lines: dict[str, int] = {}
            for number, line in enumerate(text.splitlines(), start=1):
                for token in re.findall(r"--[A-Za-z0-9-]+", line.split("#", 1)[0]):
                    lines.setdefault(token, number)
            return parse_argv(argv, source=source, kind="compose", flag_lines=lines)
    raise FactError("no compose service runs sglang.launch_server")


def parse_launch_file(
    data: bytes,
    *,
    source: str,
    path: str,
    service: str | None = None,
    read: Reader | None = None,
) -> LaunchArgs:
    """`read` reads the files the launch file pulls in (sourced env files,
    EnvironmentFile=) through the host's file reader."""
    kind = launch_file_kind(path, data)
    if kind == "compose":
        return parse_compose(data, source=source, service=service)
    if kind == "systemd":
        return parse_systemd_unit(data, source=source, read=read)
    return parse_script(data, source=source, read=read, path=path)


def launch_file_kind(path: str, data: bytes) -> LaunchKind:
    """Which kind of launch file `path` is: compose by its name, systemd by its name (a unit
    or a drop-in `.conf`) or an `ExecStart=` line, else a shell script."""
    if path.endswith((".yaml", ".yml")):
        return "compose"
    if path.endswith((".service", ".conf")) or b"ExecStart=" in data:
        return "systemd"
    return "script"


# SGLang's namespace names -> LaunchArgs fields, for the host's own parser (gather.native)
# and the offline replay alike: derived from the one table of SGLang's fields.
LAUNCH_FIELDS: dict[str, str] = {
    key: f.field for key, f in SGLANG_FIELDS.items() if f.field is not None
}


def _unknown_offline(word: str) -> bool:
    return "${" in word or "$(" in word or "`" in word


def _without_unknown_values(argv: list[str]) -> tuple[list[str], list[str]]:
    """The command without the options whose value the shell walk could not know."""
    kept: list[str] = []
    dropped: list[str] = []
    for word in argv:
        if not _unknown_offline(word):
            kept.append(word)
            continue
        if kept and kept[-1].startswith("--") and "=" not in kept[-1]:
            dropped.append(kept.pop())
        dropped.append(word)
    return kept, dropped


def _rejection(error: str, error_line: str | None, release: str) -> dict[str, object]:
    """What the release's parser refused: flags it does not know (`unknown_args`), else its
    own error line (`sglang_rejects`)."""
    from dflash_doctor.facts import sglang_options as so

    if error.startswith("unrecognized arguments: "):
        listed = error.split(": ", 1)[1].split()
        unknown = [
            a
            for a in listed
            if a.startswith("-")
            and not re.fullmatch(r"-\d[\d.e+-]*", a)  # a negative number is a value
            and so.resolve_in(release, a) is None
        ]
        if unknown:
            return {"unknown_args": unknown}
        # stray values (a positional MODEL where the release takes none)
    return {"sglang_rejects": error_line}


def replay_launch(
    args: LaunchArgs, version: str, read: Callable[[str], bytes] | None = None
) -> LaunchArgs:
    """Re-parse with the host's release's own parser, rebuilt from the option data.

    Used where the host's SGLang cannot be imported (`gate`, recorded hosts, a server
    Python we may not run). Unknown versions take the nearest earlier release, and say so.
    """
    from dflash_doctor.facts import sglang_options as so

    release, note = so.release_for(version)
    if release is None:
        return args.model_copy(update={"parser_notes": [*args.parser_notes, note or ""]})
    start = sglang_args_start(args.argv)
    serve = start >= 1 and args.argv[start - 1] == "serve"
    server_argv, dropped = _without_unknown_values(args.argv[start:])
    try:
        r = so.replay(server_argv, release, serve=serve, read=read, note=note)
    except FactError as e:
        why = f"not replayed with SGLang {release}'s parser: {e}"
        return args.model_copy(update={"parser_notes": [*args.parser_notes, why]})
    notes = [*args.parser_notes, *([note] if note else [])]
    if dropped:
        notes.append(
            f"replayed with SGLang {release}'s parser without {' '.join(dropped)} "
            "(values not known offline)"
        )
    update: dict[str, object] = {
        "parser": "replay",
        "parser_version": release,
        "parser_notes": notes,
        "config_options": r.from_config,
        "accepted_window_flags": [f for f in WINDOW_FLAGS if f in so.option_map(release)],
    }
    if r.error is not None:
        update.update(_rejection(r.error, r.error_line, release))
        return args.model_copy(update=update)
    values = r.values
    for key, name in LAUNCH_FIELDS.items():
        if values.get(key) is not None:
            update[name] = values[key]
    if values.get("cuda_graph_max_bs") is None and values.get("cuda_graph_max_bs_decode"):
        update["cuda_graph_max_bs"] = values["cuda_graph_max_bs_decode"]
    for used in r.used:
        if used.option in WINDOW_FLAGS:
            update["draft_window_flag"] = used.option
            update["draft_window_size"] = values.get(used.info.dest)
    try:
        return LaunchArgs.model_validate({**args.model_dump(), **update})
    except ValidationError as e:
        why = f"not replayed with SGLang {release}'s parser: {validation_line(e)}"
        return args.model_copy(update={"parser_notes": [*args.parser_notes, why]})
