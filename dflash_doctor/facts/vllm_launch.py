"""A vLLM launch: which engine a command runs, and what a vLLM one asks for.

vLLM's server is `vllm serve MODEL [options]` or `python -m
vllm.entrypoints.openai.api_server --model MODEL [options]`. Its parser
(`FlexibleArgumentParser`) turns underscores in a `--flag`'s name into dashes
(vllm/utils/argparse_utils.py 0.34.0:378-393) and gathers dotted options such as
`--speculative-config.num_speculative_tokens 7` into one JSON object appended after the
other arguments, so it replaces an earlier `--speculative-config '{...}'`
(vllm/utils/argparse_utils.py 0.34.0:462-502). `--speculative-config` itself is a JSON
string read with `json.loads` (vllm/engine/arg_utils.py 0.34.0:1892-1898), its keys
taken with dashes as underscores (vllm/engine/arg_utils.py 0.34.0:2159-2161).

Only the options the vLLM checks read are modelled; everything else is left alone. Host
text is hostile: bounded argv (facts/launch.py), a bounded JSON object of bounded depth,
and every refusal is one FactError line.
"""

from __future__ import annotations

import json
import posixpath
import re
import shlex
from typing import Any, Literal

from dflash_doctor.errors import FactError
from dflash_doctor.facts.launch import (
    MAX_LAUNCH_BYTES,
    check_argv_bounds,
    compose_option_lines,
    compose_services,
    runs_sglang,
    unit_command,
)
from dflash_doctor.facts.shell import (
    Command,
    Env,
    Reader,
    decode,
    placeholders,
    run_script,
    script_commands,
)
from dflash_doctor.facts.vllm_models import RUNNER_ENV, Engine, VllmLaunch, VllmSpeculative
from dflash_doctor.on_host.server_address import server_address

API_SERVER_MODULE = "vllm.entrypoints.openai.api_server"
# The only VLLM_* variables read: others may hold secrets (VLLM_API_KEY) and never reach
# a fact.
VLLM_ENV_NAMES = (RUNNER_ENV,)
MAX_JSON_DEPTH = 32
MAX_JSON_KEYS = 256

# vLLM option -> VllmLaunch field; short forms as vLLM registers them
# (`-tp`, `-sc`: vllm/engine/arg_utils.py 0.34.0:1224,1897).
_FLAGS = {
    "--model": "model",
    "--speculative-config": "speculative_config",
    "-sc": "speculative_config",
    "--spec-method": "spec_method",
    "--spec-model": "spec_model",
    "--spec-tokens": "spec_tokens",
    "--max-model-len": "max_model_len",
    "--tensor-parallel-size": "tensor_parallel_size",
    "-tp": "tensor_parallel_size",
    "--port": "port",
    "--max-num-seqs": "max_num_seqs",
    "--host": "host",
    "--uds": "uds",
}

# `--port`'s default (vllm/entrypoints/openai/cli_args.py 0.27.1:248,
# vllm/entrypoints/common/cli_args.py 0.34.0:296).
VLLM_DEFAULT_PORT = 8000

# The API server's `max_num_seqs` when `--max-num-seqs` is not given, per release read:
# (a GPU under 70 GiB, an A100 or (0.33.0+) a GB10; a larger GPU). Every release agrees:
# vllm/engine/arg_utils.py 0.27.1:2544-2562, 0.28.0:2582-2610, 0.29.0:2698-2726,
# 0.30.0:2730-2758, 0.31.0:2858-2886, 0.32.0:2923-2951, 0.33.0:2973-3005, 0.34.0:3010-3042
# (a CPU platform takes 128 a worker, 0.34.0:3066-3075; not a DFlash server).
DEFAULT_MAX_NUM_SEQS: dict[str, tuple[int, int]] = {
    v: (256, 1024)
    for v in ("0.27.1", "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0", "0.34.0")
}

_LONG = {"-sc": "--speculative-config", "-tp": "--tensor-parallel-size"}


def vllm_args_start(argv: list[str]) -> int:
    """Index of the first server argument: after `vllm serve`, or after the API server
    module (`-m vllm.entrypoints.openai.api_server`, or its file)."""
    for i, arg in enumerate(argv):
        if posixpath.basename(arg) == "vllm" and i + 1 < len(argv) and argv[i + 1] == "serve":
            return i + 2
        if arg == API_SERVER_MODULE or arg.endswith("vllm/entrypoints/openai/api_server.py"):
            return i + 1
    raise NotVllm("no `vllm serve` or vllm.entrypoints.openai.api_server command found")


class NotVllm(FactError):
    """The command or file runs no vLLM server (so it is not a vLLM launch at all)."""


def runs_vllm(words: list[str]) -> bool:
    """Whether `words` (after prefixes) run a vLLM OpenAI server."""
    try:
        vllm_args_start(words)
    except FactError:
        return False
    return True


def engine_of(argv: list[str]) -> Engine | None:
    """The engine a command line runs: vLLM's server, else SGLang's, else None."""
    if runs_vllm(argv):
        return "vllm"
    return "sglang" if runs_sglang(argv) else None


def _flag_name(arg: str) -> str:
    # vLLM turns `_` into `-` in a long option's name, up to its first dot.
    if not arg.startswith("--"):
        return arg
    head, dot, rest = arg.partition(".")
    return head.replace("_", "-") + dot + rest


def _scan(args: list[str]) -> tuple[dict[str, str], dict[str, dict[str, Any]], dict[str, int]]:
    """The modelled options' last values, the dotted `--X.key value` objects, and each
    option's index in args. A flag with no value left is a FactError, as in argparse."""
    values: dict[str, str] = {}
    dotted: dict[str, dict[str, Any]] = {}
    where: dict[str, int] = {}
    i = 0
    while i < len(args):
        word = args[i]
        name, eq, inline = _flag_name(word).partition("=")
        base, dot, key = name.partition(".")
        field = _FLAGS.get(base)
        if field is None or not word.startswith("-"):
            i += 1
            continue
        where[_LONG.get(base, base)] = i
        if not eq:
            if i + 1 >= len(args):
                raise FactError(f"{base} expects a value")
            inline, i = args[i + 1], i + 1
        if dot:
            dotted.setdefault(field, {})[key.replace("-", "_")] = _dotted_value(inline)
        else:
            # A dotted key wins wherever it stands: vLLM appends the gathered object after
            # every other argument (vllm/utils/argparse_utils.py 0.34.0:497-500).
            values[field] = inline
        i += 1
    return values, dotted, where


def _dotted_value(text: str) -> Any:
    """A dotted option's value as vLLM reads it: JSON, else a human-readable int, else the
    text (vllm/utils/argparse_utils.py 0.34.0:479-491)."""
    try:
        return _bounded_json(text, "value")
    except FactError:
        pass
    try:
        return human_readable_int(text)
    except ValueError:
        return text


def _depth(text: str) -> int:
    """The deepest bracket nesting outside strings: refused before json.loads recurses."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            escaped = not escaped and ch == "\\"
            in_string = escaped or ch != '"'
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def _bounded_json(text: str, what: str) -> Any:
    if _depth(text) > MAX_JSON_DEPTH:
        raise FactError(f"{what} nests deeper than {MAX_JSON_DEPTH} levels")
    try:
        return json.loads(text)
    except ValueError as e:
        raise FactError(f"{what} is not valid JSON ({str(e)[:120]})") from None


_HUMAN = re.compile(r"(\d{1,15}(?:\.\d{1,6})?)([kKmMgGtT])")
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def human_readable_int(text: str) -> int:
    """vLLM's `human_readable_int` (vllm/utils/argparse_utils.py 0.34.0:30-74): `25.6k`,
    `32K` (no decimals with a binary suffix), else a plain int; ASCII and bounded here."""
    value = text.strip()
    m = _HUMAN.fullmatch(value)
    if m:
        number, suffix = m.groups()
        if suffix in _DECIMAL:
            return int(float(number) * _DECIMAL[suffix])
        if "." in number:
            raise ValueError(text)
        return int(number) * _BINARY[suffix]
    body = value[1:] if value[:1] in "+-" else value
    if not (body.isascii() and body.isdigit() and len(body) <= 18):
        raise ValueError(text)
    return int(value)


def max_model_len(text: str) -> int | None:
    """`--max-model-len`: `human_readable_int_or_auto` (vllm/engine/arg_utils.py
    0.34.0:403-404, vllm/utils/argparse_utils.py 0.34.0:89-94); `auto` and -1 are None."""
    if text.strip() == "-1" or text.strip().lower() == "auto":
        return None
    try:
        return human_readable_int(text)
    except ValueError:
        raise FactError(f"--max-model-len {text[:40]!r} is not a length") from None


def _int_option(name: str, text: str) -> int:
    body = text.strip()
    if not (body.isascii() and body.isdigit() and len(body) <= 18):
        raise FactError(f"{name} {text[:40]!r} is not an integer")
    return int(body)


_SPEC_STR = ("method", "model", "attention_backend", "draft_sample_method")
_SPEC_INT = ("num_speculative_tokens", "max_model_len")
# `--spec-*` shorthands and the key each sets (vllm/engine/arg_utils.py 0.34.0:2141-2154).
_SHORTHANDS = (
    ("spec_method", "--spec-method", "method"),
    ("spec_model", "--spec-model", "model"),
    ("spec_tokens", "--spec-tokens", "num_speculative_tokens"),
)


def _typed(config: dict[str, Any], key: str, kind: type) -> Any:
    value = config.get(key)
    if value is None:
        return None
    if kind is int and isinstance(value, str):
        # pydantic's lax mode, as vLLM validates the object, takes "7" for 7.
        return _int_option(f"--speculative-config {key}", value)
    if (isinstance(value, bool) and kind is not bool) or not isinstance(value, kind):
        shown = json.dumps(value)[:40]
        named = {int: "an integer", str: "a string", bool: "true or false"}[kind]
        raise FactError(f"--speculative-config {key} is not {named} ({shown})")
    return value


def speculative_object(argv: list[str]) -> dict[str, Any]:
    """The `--speculative-config` object a vLLM command line gives (the JSON or its dotted
    keys, dashes as underscores, with the `--spec-*` shorthands merged in): what `fix`
    compares after an edit, key by key."""
    values, dotted, _ = _scan(argv[vllm_args_start(argv) :])
    return _merged(values, dotted)


def _merged(values: dict[str, str], dotted: dict[str, dict[str, Any]]) -> dict[str, Any]:
    if "speculative_config" in dotted:
        config: Any = dotted["speculative_config"]
    elif "speculative_config" in values:
        config = _bounded_json(values["speculative_config"], "--speculative-config")
    else:
        config = {}
    if not isinstance(config, dict):
        raise FactError("--speculative-config is not a JSON object")
    if len(config) > MAX_JSON_KEYS:
        raise FactError(f"--speculative-config has more than {MAX_JSON_KEYS} keys")
    config = {str(k).replace("-", "_"): v for k, v in config.items()}
    for field, flag, key in _SHORTHANDS:
        if field in values:
            if key in config:
                raise FactError(
                    f"{flag} and --speculative-config['{key}'] are mutually exclusive "
                    "(vLLM refuses this launch)"
                )
            config[key] = values[field]
    out: dict[str, Any] = config
    return out


def speculative(values: dict[str, str], dotted: dict[str, dict[str, Any]]) -> VllmSpeculative:
    """The speculative config as vLLM builds it from the JSON (or dotted keys) and the
    `--spec-*` shorthands."""
    config = _merged(values, dotted)
    typed: dict[str, Any] = {k: _typed(config, k, str) for k in _SPEC_STR}
    typed |= {k: _typed(config, k, int) for k in _SPEC_INT}
    for key in ("enable_adaptive_verification", "disable_eagle_block_drop"):
        typed[key] = _typed(config, key, bool)
    return VllmSpeculative(**typed, keys=sorted(config)[:MAX_JSON_KEYS])


def parse_vllm_argv(
    argv: list[str],
    *,
    source: str,
    kind: Literal["process", "script", "systemd", "argv", "compose"],
    environ: dict[str, str] | None = None,
    lines: list[int] | None = None,
) -> VllmLaunch:
    """A vLLM server command line (`vllm serve` or the API server module) as VllmLaunch;
    `lines`: the launch file's line of each word. Refusals are one FactError line."""
    check_argv_bounds(argv)
    start = vllm_args_start(argv)
    args = argv[start:]
    values, dotted, where = _scan(args)
    positional = args[0] if args and not args[0].startswith("-") else None
    wants_spec = {"speculative_config", "spec_method", "spec_model", "spec_tokens"}
    given = wants_spec & (set(values) | set(dotted))
    python = next((a for a in argv[: max(start - 1, 0)] if _is_python(a)), None)
    serve = start >= 2 and argv[start - 1] == "serve"
    return VllmLaunch(
        source=source,
        kind=kind,
        python=python,
        launcher=argv[start - 2] if serve else None,
        model=values.get("model") if "model" in values else positional,
        speculative=speculative(values, dotted) if given else None,
        max_model_len=max_model_len(values["max_model_len"]) if "max_model_len" in values else None,
        tensor_parallel_size=_optional_int(
            values, "tensor_parallel_size", "--tensor-parallel-size"
        ),
        port=_optional_int(values, "port", "--port"),
        max_num_seqs=_optional_int(values, "max_num_seqs", "--max-num-seqs"),
        host=_printable(values["host"]) if "host" in values else None,
        # An empty `--uds` is no socket: vLLM tests it for truth
        # (vllm/entrypoints/launchers/launcher.py 0.34.0:376).
        uds=_printable(values["uds"]) if values.get("uds") else None,
        enable_prefix_caching=prefix_caching(args),
        **_options(args, lines[start:] if lines else None),
        environ=dict(environ or {}),
        flag_lines={
            f: lines[start + i] for f, i in where.items() if lines and start + i < len(lines)
        },
    )


MAX_OPTIONS = 256


def _options(args: list[str], lines: list[int] | None) -> dict[str, Any]:
    """The long options given, as vLLM's parser names them (`_flag_name`), up to a bare
    `--` (after which argparse reads positionals); bounded."""
    options: dict[str, int | None] = {}
    for i, word in enumerate(args):
        if word == "--":
            break
        if not word.startswith("--") or len(options) >= MAX_OPTIONS:
            continue
        name = _printable(_flag_name(word).partition("=")[0].partition(".")[0])[:80]
        options.setdefault(name, lines[i] if lines and i < len(lines) else None)
    return {
        "options": list(options),
        "option_lines": {k: v for k, v in options.items() if v is not None},
    }


def prefix_caching(args: list[str]) -> bool | None:
    """The last `--enable-prefix-caching` / `--no-enable-prefix-caching` (argparse's
    BooleanOptionalAction pair, vllm/engine/arg_utils.py 0.34.0:385, 1420-1426); None:
    neither is given."""
    found = None
    for word in args:
        name = _flag_name(word)
        if name in ("--enable-prefix-caching", "--no-enable-prefix-caching"):
            found = name == "--enable-prefix-caching"
    return found


def _optional_int(values: dict[str, str], field: str, flag: str) -> int | None:
    return _int_option(flag, values[field]) if field in values else None


def _is_python(word: str) -> bool:
    return re.search(r"(^|/)python[0-9.]*$", word) is not None


def _printable(text: str) -> str:
    # Host text reaches reports: printable characters only, bounded.
    return "".join(c if c.isprintable() else "?" for c in text[:256])


def process_environ(environ: bytes) -> dict[str, str]:
    """The VLLM_ENV_NAMES variables of a process's NUL-separated environment."""
    found = {}
    for item in environ.split(b"\0"):
        name, eq, value = item.partition(b"=")
        if eq and name.decode("ascii", "replace") in VLLM_ENV_NAMES:
            found[name.decode()] = _printable(value.decode("utf-8", "replace"))
    return found


def launch_environ(words: list[str], exported: dict[str, str]) -> dict[str, str]:
    """The VLLM_ENV_NAMES variables a launch sets: the script's exported ones, then the command's
    own `NAME=value` prefix assignments (which win, as in the shell)."""
    found = {k: _printable(v) for k, v in exported.items() if k in VLLM_ENV_NAMES}
    for word in words:
        name, eq, value = word.partition("=")
        if not eq or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            break
        if name in VLLM_ENV_NAMES:
            found[name] = _printable(value)
    return found


def command_words(command: str | list[str]) -> list[str]:
    """A launch command given as a string (split as a shell would, never run by one) or
    as an argv list."""
    if not isinstance(command, str):
        return list(command)
    try:
        return shlex.split(command)
    except ValueError as e:
        raise FactError(f"the launch command cannot be split: {e}") from None


def parse_vllm_command(command: str | list[str], *, source: str = "launch") -> VllmLaunch:
    """The vLLM launch given as a command (`--launch "vllm serve ..."`), with the
    VLLM_ENV_NAMES variables of its `NAME=value` prefix assignments."""
    words = command_words(command)
    return parse_vllm_argv(words, source=source, kind="argv", environ=launch_environ(words, {}))


def parse_vllm_script(data: bytes, *, source: str, read: Reader | None = None) -> VllmLaunch:
    """A shell launch script that runs vLLM, walked as facts/shell.py walks SGLang's: the
    first command that runs `vllm serve` or the API server, expanded; the VLLM_* variables
    it is started with (exported before it, or assigned on its own line)."""
    text = decode(data, "launch script", MAX_LAUNCH_BYTES)
    env = Env()
    cmd = run_script(text, env, read=read, here=source, is_sglang=runs_vllm)
    if cmd is None:
        raise NotVllm("no `vllm serve` command found in the launch script")
    commands, at = script_commands(text, Env(), runs_vllm)
    exported = _exported(commands[:at] if at is not None else [], env)
    prefix = commands[at].words if at is not None else []
    argv = [placeholders(w) for w in cmd.words]
    return parse_vllm_argv(
        argv,
        source=source,
        kind="script",
        environ=launch_environ(prefix, exported),
        lines=cmd.lines,
    )


def _exported(commands: list[Command], env: Env) -> dict[str, str]:
    """The variables an `export` before the launch names, with their values at the launch;
    a plain assignment does not reach vLLM's environment."""
    names = set()
    for c in commands:
        if c.words[:1] == ["export"]:
            names |= {w.partition("=")[0] for w in c.words[1:] if not w.startswith("-")}
    return {n: env.scalars[n] for n in names if n in env.scalars}


def parse_vllm_systemd_unit(data: bytes, *, source: str, read: Reader | None = None) -> VllmLaunch:
    """A systemd unit whose last `ExecStart=` runs vLLM, read as facts/launch.py reads an
    SGLang unit (the same directive reader and `Environment=` / `EnvironmentFile=`
    handling); every variable the unit sets reaches the server's environment."""
    cmd, env = unit_command(
        data,
        read,
        runs_vllm,
        (
            NotVllm,
            "no ExecStart= line in the systemd unit",
            "ExecStart= does not run vLLM's server",
        ),
    )
    return parse_vllm_argv(
        [placeholders(w) for w in cmd.words],
        source=source,
        kind="systemd",
        environ=launch_environ([], env.scalars),
        lines=cmd.lines,
    )


def _compose_environment(value: object) -> dict[str, str]:
    """A compose service's `environment:` (a mapping, or a list of `NAME=value`)."""
    if isinstance(value, dict):
        return {str(k): str(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        pairs = [str(item).partition("=") for item in value]
        return {name: v for name, eq, v in pairs if eq}
    return {}


def parse_vllm_compose(data: bytes, *, source: str, service: str | None = None) -> VllmLaunch:
    """A docker compose file whose (named, else first such) service's `entrypoint` +
    `command` run `vllm serve` or the API server module; its `environment:` gives the
    VLLM_* variables. A service of the vLLM image that names only options (the image's
    entrypoint runs the server) is not read: the wheels do not hold the image."""
    text, services = compose_services(data, service)
    for name, svc, argv in services:
        if not runs_vllm(argv):
            if service:
                raise NotVllm(f"compose service {name!r} does not run `vllm serve`")
            continue
        launch = parse_vllm_argv(
            argv,
            source=source,
            kind="compose",
            environ=launch_environ([], _compose_environment(svc.get("environment"))),
        )
        lines = compose_option_lines(text)
        return launch.model_copy(
            update={
                "flag_lines": {o: lines[o] for o in launch.options if o in lines and o in _FLAGS},
                "option_lines": {o: lines[o] for o in launch.options if o in lines},
            }
        )
    raise NotVllm("no compose service runs `vllm serve`")


def vllm_address(launch: VllmLaunch | None) -> tuple[str, int] | None:
    """Where the vLLM server is reached from its own machine: its `--host` (none or a
    wildcard: loopback) and `--port` (8000 by default), derived as SGLang's is
    (on_host/server_address.py); None when it listens on a Unix socket, where vLLM ignores
    host and port (vllm/entrypoints/launchers/launcher.py 0.34.0:376-387,
    vllm/entrypoints/openai/api_server.py 0.27.1:638-649). The one place bench, fix and
    the live check take it from."""
    if launch is None:
        return "127.0.0.1", VLLM_DEFAULT_PORT
    if launch.uds:
        return None
    words = ["--port", str(launch.port or VLLM_DEFAULT_PORT)]
    words += ["--host", launch.host] if launch.host is not None else []
    # vLLM binds an IPv6 address as such (vllm/entrypoints/launchers/launcher.py
    # 0.34.0:346-348): server_address brackets it for the URL.
    return server_address(words, default_port=VLLM_DEFAULT_PORT)


def unix_socket_line(host: str, launch: VllmLaunch) -> str:
    """The one line said where the server listens on a Unix socket and is not asked."""
    return (
        f"{host}: the vLLM server listens on the Unix socket {launch.uds} (--uds): "
        "not asked over HTTP"
    )


def max_num_seqs(launch: VllmLaunch, version: str | None) -> tuple[int, str]:
    """The most requests the server runs at once, and where that number comes from: its
    `--max-num-seqs`, else the smaller of the release's GPU defaults (DEFAULT_MAX_NUM_SEQS;
    the larger needs a GPU of 70 GiB or more, which the launch does not say)."""
    if launch.max_num_seqs:
        return launch.max_num_seqs, "the server's --max-num-seqs"
    low, high = DEFAULT_MAX_NUM_SEQS.get(version or "", DEFAULT_MAX_NUM_SEQS["0.34.0"])
    return low, (
        f"vLLM's default max_num_seqs without --max-num-seqs: {low}, {high} on a GPU of "
        "70 GiB or more; the smaller is taken"
    )
