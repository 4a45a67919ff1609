"""The launch: the command given, the running process's command line, or the launch file;
then SGLang's own parse of it with the host's Python, where that may run."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ValidationError

from dflash_doctor.errors import DoctorError
from dflash_doctor.facts.launch import (
    LAUNCH_FIELDS,
    parse_argv,
    parse_cmdline,
    parse_launch_file,
    sglang_args_start,
)
from dflash_doctor.facts.models import Fact, LaunchArgs
from dflash_doctor.finders.base import attempt
from dflash_doctor.host_exec import HostExec
from dflash_doctor.shipped import script_source
from dflash_doctor.transport.base import Transport


def launch_given(host: str, command: str | list[str]) -> Fact[LaunchArgs]:
    """The launch command the user gave (a string or an argv list)."""
    return attempt(
        host,
        "launch",
        lambda: parse_argv(
            shlex.split(command) if isinstance(command, str) else list(command),
            source="launch",
            kind="argv",
        ),
    )


def launch_of_process(host: str, pid: int, cmdline: bytes) -> Fact[LaunchArgs]:
    return attempt(
        host, f"/proc/{pid}/cmdline", lambda: parse_cmdline(cmdline, source=f"process {pid}")
    )


def launch_of_file(
    t: Transport,
    host: str,
    path: str,
    service: str | None,
    read: Callable[[str], bytes] | None = None,
) -> Fact[LaunchArgs]:
    """A launch script, systemd unit or compose file; `read` follows the files it names."""
    return attempt(
        host,
        path,
        lambda: parse_launch_file(
            t.read_file(path, max_bytes=1 << 20), source=path, path=path, service=service, read=read
        ),
    )


def ask_sglang(
    t: Transport,
    run_as: HostExec,
    args: LaunchArgs,
    python: str | None,
    pid: int | None,
    env: Mapping[str, str],
) -> tuple[LaunchArgs, str | None]:
    """Re-parse with the host's own SGLang, when its Python can import it; the parse and
    the version that Python reports (None when it could not be asked)."""
    parsed, version, _ = native_parse(t, run_as, args, python, pid, env)
    return parsed, version


# What the parse's interpreter says importlib.metadata holds for sglang (the version query's
# answer, finders/version.VERSION_QUERY): the version, "" where it has none, None unasked.
Installed = str | None


def native_parse(
    t: Transport,
    run_as: HostExec,
    args: LaunchArgs,
    python: str | None,
    pid: int | None,
    env: Mapping[str, str],
) -> tuple[LaunchArgs, str | None, Installed]:
    """ask_sglang, and the installed version the same interpreter reported with its parse,
    so that the version is not asked by starting that interpreter again (issue 28)."""
    server_argv = args.argv[sglang_args_start(args.argv) :]
    try:
        prefix = run_as.prefix(python, pid=pid, env=env)
    except DoctorError as e:
        # The fallback parse stands; the reason is kept with the fact.
        return args.model_copy(update={"native_refused": str(e)}), None, None
    argv = [*prefix, "-c", script_source("on_host/sglang_args.py"), json.dumps(server_argv)]
    try:
        res = t.run(argv, timeout=120)
        answer = json.loads(res.stdout.decode("utf-8", "replace").strip().splitlines()[-1])
    except (DoctorError, ValueError, IndexError):
        return args, None, None
    if not isinstance(answer, dict):
        return args, None, None
    installed: Installed = None
    if res.ok and "installed" in answer:
        got = answer["installed"]
        installed = got if isinstance(got, str) else "" if got is None else None
    if "version" not in answer:
        return args, None, installed  # no importable SGLang there: the fallback parse stands
    version = str(answer["version"])
    return native_answer(args, answer, version), version, installed


def native_answer(args: LaunchArgs, answer: dict[str, Any], version: str) -> LaunchArgs:
    """`args` updated with what SGLang's own parser said (on_host/sglang_args.py's answer)."""
    update: dict[str, object] = {"parser": "sglang", "parser_version": version}
    if "rejected" in answer:
        update["sglang_rejects"] = str(answer["rejected"])
        return args.model_copy(update=update)
    values = answer.get("values") or {}
    for key, field_name in LAUNCH_FIELDS.items():  # the table the offline replay uses too
        if key in values:
            update[field_name] = values[key]
    if values.get("cuda_graph_max_bs") is None and values.get("cuda_graph_max_bs_decode"):
        update["cuda_graph_max_bs"] = values["cuda_graph_max_bs_decode"]
    window = values.get("speculative_draft_window_size")
    if window is None:
        window = values.get("speculative_dflash_draft_window_size")
    if answer.get("window_flag_used"):
        update["draft_window_flag"] = answer["window_flag_used"]
        update["draft_window_size"] = window
    update["unknown_args"] = [str(u) for u in answer.get("unknown") or []]
    update["accepted_window_flags"] = [str(f) for f in answer.get("window_flags") or []]
    try:
        return LaunchArgs.model_validate({**args.model_dump(), **update})
    except ValidationError:
        return args
