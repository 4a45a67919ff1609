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
from collections.abc import Callable
from dataclasses import dataclass

from dflash_doctor.errors import FactError
from dflash_doctor.facts.models import LaunchArgs, LaunchKind
from dflash_doctor.redact import redact_argv
from dflash_doctor.sglang_versions import NEW_WINDOW_FLAG, OLD_WINDOW_FLAG

MAX_LAUNCH_BYTES = 1024 * 1024


@dataclass(frozen=True)
class FlagSpec:
    flags: tuple[str, ...]
    dest: str
    kind: Callable[[str], object]
    switch: bool = False  # store_true: present or not, takes no value


def _positive_int(text: str) -> int:
    return int(text)


FLAG_SPECS: tuple[FlagSpec, ...] = (
    FlagSpec(("--model-path", "--model"), "model_path", str),
    FlagSpec(("--speculative-algorithm",), "speculative_algorithm", str),
    FlagSpec(("--speculative-draft-model-path",), "draft_model_path", str),
    FlagSpec(("--speculative-num-draft-tokens",), "num_draft_tokens", _positive_int),
    FlagSpec(("--speculative-dflash-block-size",), "dflash_block_size", _positive_int),
    FlagSpec((NEW_WINDOW_FLAG,), "new_window", _positive_int),
    FlagSpec((OLD_WINDOW_FLAG,), "old_window", _positive_int),
    FlagSpec(("--attention-backend",), "attention_backend", str),
    FlagSpec(("--speculative-draft-attention-backend",), "draft_attention_backend", str),
    FlagSpec(("--page-size",), "page_size", _positive_int),
    FlagSpec(("--context-length",), "context_length", _positive_int),
    FlagSpec(("--mem-fraction-static",), "mem_fraction_static", float),
    FlagSpec(("--cuda-graph-max-bs",), "cuda_graph_max_bs", _positive_int),
    FlagSpec(("--max-running-requests",), "max_running_requests", _positive_int),
    FlagSpec(("--tp-size", "--tensor-parallel-size", "--tp"), "tp_size", _positive_int),
    FlagSpec(("--kv-cache-dtype",), "kv_cache_dtype", str),
    # Topology and backends that DFLASH refuses or changes (checks/topology.py, hardware.py);
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
)
FLAG_BY_NAME = {flag: spec for spec in FLAG_SPECS for flag in spec.flags}


class _RaisingParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise FactError(message)


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
        if re.search(r"(^|/)python[0-9.]*$", arg):
            return arg
    return None


def parse_argv(
    argv: list[str],
    *,
    source: str,
    kind: LaunchKind,
    flag_lines: dict[str, int] | None = None,
    command_lines: tuple[int, int] | None = None,
) -> LaunchArgs:
    start = sglang_args_start(argv)
    server_argv = argv[start:]
    ns, unknown = _fallback_parser().parse_known_args(server_argv)
    values: dict[str, object] = {}
    for spec in FLAG_SPECS:
        raw = getattr(ns, spec.dest)
        if raw is None:
            continue
        try:
            values[spec.dest] = spec.kind(raw)
        except ValueError:
            raise FactError(f"{spec.flags[0]} expects a number, got {raw!r}") from None
    present = [a.split("=", 1)[0] for a in server_argv if a.split("=", 1)[0] in FLAG_BY_NAME]
    window_flag: str | None = None
    window: object = None
    # argparse keeps the last occurrence; so does SGLang, and so do we across both spellings.
    for a in server_argv:
        name = a.split("=", 1)[0]
        if name in (NEW_WINDOW_FLAG, OLD_WINDOW_FLAG):
            window_flag = name
            window = values["new_window" if name == NEW_WINDOW_FLAG else "old_window"]
    values.pop("new_window", None)
    values.pop("old_window", None)
    # The fallback models only DFlash flags: the rest are SGLang's to judge, not unknown.
    other_flags = [u.split("=", 1)[0] for u in unknown if u.startswith("-")]
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


_ASSIGN = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def _expand(text: str, env: dict[str, str]) -> str:
    def sub(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(3)
        if name in env:
            return env[name]
        if m.group(2) is not None:
            return m.group(2)
        return m.group(0)

    return _VAR.sub(sub, text)


@dataclass(frozen=True)
class LogicalLine:
    first: int  # 1-based physical line where it starts
    physical: list[str]

    @property
    def span(self) -> tuple[int, int]:
        return (self.first, self.first + len(self.physical) - 1)

    @property
    def text(self) -> str:
        return " ".join(p.rstrip()[:-1] if p.rstrip().endswith("\\") else p for p in self.physical)


def logical_lines(text: str) -> list[LogicalLine]:
    """Join backslash-continued lines, keeping where each started (for evidence and edits)."""
    out: list[LogicalLine] = []
    current: list[str] = []
    first = 0
    for number, line in enumerate(text.splitlines(), start=1):
        if not current:
            first = number
        current.append(line)
        if not line.rstrip().endswith("\\"):
            out.append(LogicalLine(first, current))
            current = []
    if current:
        out.append(LogicalLine(first, current))
    return out


def _flag_lines(line: LogicalLine) -> dict[str, int]:
    found: dict[str, int] = {}
    for offset, physical in enumerate(line.physical):
        for token in re.findall(r"--[A-Za-z0-9-]+", physical.split("#", 1)[0]):
            found[token] = line.first + offset
    return found


def _parse_line(argv: list[str], line: LogicalLine, source: str, kind: LaunchKind) -> LaunchArgs:
    """The command of one logical line, with where each flag and the command itself stand."""
    return parse_argv(
        argv, source=source, kind=kind, flag_lines=_flag_lines(line), command_lines=line.span
    )


def _decode_text(data: bytes, what: str) -> str:
    if len(data) > MAX_LAUNCH_BYTES:
        raise FactError(f"{what} is {len(data)} bytes, larger than {MAX_LAUNCH_BYTES}")
    if b"\0" in data:
        raise FactError(f"{what} holds binary data (NUL bytes)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FactError(f"{what} is not UTF-8 text (byte {e.start})") from None


def _split(text: str, first_line: int) -> list[str]:
    try:
        return shlex.split(text, comments=True)
    except ValueError as e:
        raise FactError(f"line {first_line}: cannot split the command: {e}") from None


def parse_script(data: bytes, *, source: str) -> LaunchArgs:
    """A shell launch script: simple `VAR=value` assignments, then the launch command."""
    text = _decode_text(data, "launch script")
    env: dict[str, str] = {}
    for line in logical_lines(text):
        stripped = line.text.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if "sglang" in stripped and ("launch_server" in stripped or " serve" in stripped):
            argv = _split(_expand(stripped, env), line.first)
            while argv and (argv[0] in ("exec", "nohup", "env") or _ASSIGN.match(argv[0])):
                argv.pop(0)
            return _parse_line(argv, line, source, "script")
        m = _ASSIGN.match(stripped)
        if m:
            value = _split(m.group(2), line.first) if m.group(2).strip() else [""]
            env[m.group(1)] = _expand(" ".join(value), env)
    raise FactError("no sglang.launch_server command found in the launch script")


def parse_systemd_unit(data: bytes, *, source: str) -> LaunchArgs:
    """A systemd unit: the last `ExecStart=` of [Service], with `Environment=` expanded."""
    text = _decode_text(data, "systemd unit")
    env: dict[str, str] = {}
    exec_line: LogicalLine | None = None
    for line in logical_lines(text):
        stripped = line.text.strip()
        if stripped.startswith("Environment="):
            for item in _split(stripped[len("Environment=") :], line.first):
                if "=" in item:
                    k, v = item.split("=", 1)
                    env[k] = v
        elif stripped.startswith("ExecStart="):
            exec_line = line
    if exec_line is None:
        raise FactError("no ExecStart= line in the systemd unit")
    command = exec_line.text.strip()[len("ExecStart=") :].lstrip("-@+!:")
    argv = _split(_expand(command, env), exec_line.first)
    return _parse_line(argv, exec_line, source, "systemd")


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

    text = _decode_text(data, "compose file")
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise FactError(f"invalid YAML{where}") from None
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
    data: bytes, *, source: str, path: str, service: str | None = None
) -> LaunchArgs:
    if path.endswith((".yaml", ".yml")):
        return parse_compose(data, source=source, service=service)
    if path.endswith((".service", ".conf")) or b"ExecStart=" in data:
        return parse_systemd_unit(data, source=source)
    return parse_script(data, source=source)
