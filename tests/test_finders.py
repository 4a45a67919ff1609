"""The finders over a fake host (tests/fakes.py): the live paths no recorded tree reaches."""

from __future__ import annotations

import pytest

from dflash_doctor.errors import FileMissing
from dflash_doctor.facts.models import Fact
from dflash_doctor.finders.gpus import find_gpus
from dflash_doctor.finders.launch import ask_sglang, launch_given
from dflash_doctor.finders.log import REMOTE_FILTER_MIN_BYTES, filter_pythons, find_log
from dflash_doctor.finders.version import find_version, run_version_query
from dflash_doctor.gather import gather
from dflash_doctor.host_exec import HostExec
from dflash_doctor.hosts import HostSpec
from tests.conftest import DEMO_HOST
from tests.fakes import TRUSTING_HOST, FakeHost, fails, ok

PYTHON = "/opt/venv/bin/python3"
CMDLINE = f"{PYTHON}\0-m\0sglang.launch_server\0--model-path\0/models/t\0--port\0{30000}\0"
STATUS = "Name:\tpython3\nUid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\n"
LOG = (DEMO_HOST / "var/log/sglang/server.log").read_bytes()


def server_host(**over: object) -> FakeHost:
    """A live host running one SGLang server (pid 42, owned by uid 1000)."""
    base: dict[str, object] = {
        "files": {
            "/proc/42/cmdline": CMDLINE,
            "/proc/42/status": STATUS,
            "/proc/42/environ": "HOME=/home/u\0HF_TOKEN=secret\0",
            "/var/log/sglang/server.log": LOG,
        },
        "links": {"/proc/42/fd/1": "/var/log/sglang/server.log", "/proc/42/fd/2": "/dev/null"},
        "commands": {**TRUSTING_HOST, ("pgrep", "-f", "sglang"): ok("42\n")},
    }
    base.update(over)
    return FakeHost(**base)  # type: ignore[arg-type]


def test_the_log_is_found_through_the_process_stdout() -> None:
    t = server_host()
    log = find_log(t, "h", None, 42, iter([]))
    assert log.value is not None and log.value.path == "/var/log/sglang/server.log"
    assert "readlink /proc/42/fd/1" in t.asked


def test_a_process_writing_to_a_terminal_has_no_log_file() -> None:
    t = server_host(links={"/proc/42/fd/1": "/dev/pts/0", "/proc/42/fd/2": "pipe:[123]"})
    log = find_log(t, "h", None, 42, iter([]))
    assert log.value is None and "server log not found" in (log.error or "")


def test_nvidia_smi_failing_names_its_first_line() -> None:
    t = server_host(commands={("nvidia-smi",): fails("NVIDIA-SMI has failed\nmore\n", 9)})
    gpus = find_gpus(t, "h")
    assert gpus.value is None and gpus.source == "nvidia-smi"
    assert gpus.error == "fake: nvidia-smi failed: NVIDIA-SMI has failed"


def test_nvidia_smi_missing_is_a_reason_not_a_crash() -> None:
    gpus = find_gpus(server_host(commands={}), "h")
    assert gpus.value is None and "nvidia-smi failed" in (gpus.error or "")


def test_the_version_is_asked_of_the_servers_python_as_its_owner() -> None:
    t = server_host()
    t.commands = {**t.commands, ("setpriv",): ok("0.5.23\n")}
    run_as = HostExec(t, HostSpec.of(name="h"))

    def ask(python: str) -> str:
        return run_version_query(t, run_as.prefix(python, pid=42, env={"HOME": "/home/u"}))

    version = find_version(t, "h", PYTHON, ask)  # no dist-info beside it: the Python is asked
    assert version.value == "0.5.23" and "importlib" in (version.source or "")
    (asked,) = [a for a in t.asked if a.startswith("run setpriv")]
    assert asked == "run setpriv --reuid=1000 --regid=1000"  # as the owner, never as root


def test_a_version_the_python_cannot_tell_is_a_reason() -> None:
    t = server_host()
    t.commands = {**t.commands, ("setpriv",): fails("ModuleNotFoundError: sglang")}
    run_as = HostExec(t, HostSpec.of(name="h"))
    version = find_version(
        t, "h", PYTHON, lambda py: run_version_query(t, run_as.prefix(py, pid=42, env={}))
    )
    assert version.value is None and "sglang is not installed" in (version.error or "")


def test_a_large_remote_log_falls_back_to_streaming_when_no_filter_runs() -> None:
    big = LOG * (REMOTE_FILTER_MIN_BYTES // len(LOG) + 1)
    t = server_host()
    t.files = {**t.files, "/var/log/sglang/server.log": big}
    # The one interpreter offered cannot run the filter (no such command on the host).
    log = find_log(t, "h", None, 42, iter([["/usr/bin/python3", "-I"]]))
    assert log.value is not None and log.value.bytes_scanned == len(big)
    assert t.asked.index("run /usr/bin/python3 -I -c") < t.asked.index(
        "read /var/log/sglang/server.log", 2
    )


def test_a_log_the_filter_cannot_read_is_not_streamed_instead() -> None:
    big = LOG * (REMOTE_FILTER_MIN_BYTES // len(LOG) + 1)
    t = server_host()
    t.files = {**t.files, "/var/log/sglang/server.log": big}
    t.commands = {("/usr/bin/python3",): fails("server.log: Permission denied")}
    log = find_log(t, "h", None, 42, iter([["/usr/bin/python3", "-I"]]))
    assert log.value is None and "Permission denied" in (log.error or "")


def test_the_filter_runs_under_a_vetted_system_python_as_the_owner() -> None:
    t = server_host()
    first = next(filter_pythons(t, HostExec(t, HostSpec.of(name="h")), PYTHON, 42))
    # `python3` is not on this host's PATH (no `command -v` answer): /usr/bin/python3 is.
    assert first[:3] == ["setpriv", "--reuid=1000", "--regid=1000"]
    assert first[-2:] == ["/usr/bin/python3", "-I"] and "-i" in first


def test_a_refused_native_parse_keeps_the_fallback_and_its_reason() -> None:
    t = server_host()
    t.commands = {
        **t.commands,
        ("stat", "-L"): ok(
            "1000 777 regular file\n0 755 directory\n0 755 directory\n"
            "0 755 directory\n0 755 directory\n"
        ),
    }
    launch = launch_given("h", CMDLINE.replace("\0", " ").strip())
    assert launch.value is not None
    args, version = ask_sglang(t, HostExec(t, HostSpec.of(name="h")), launch.value, PYTHON, 42, {})
    assert version is None and args.parser == "fallback"
    assert args.native_refused is not None and "writable by users other" in args.native_refused


def test_a_native_parse_that_prints_nothing_keeps_the_fallback() -> None:
    t = server_host()
    t.commands = {**t.commands, ("setpriv",): ok("")}
    launch = launch_given("h", CMDLINE.replace("\0", " ").strip())
    assert launch.value is not None
    args, version = ask_sglang(t, HostExec(t, HostSpec.of(name="h")), launch.value, PYTHON, 42, {})
    assert version is None and args == launch.value


def test_gather_over_a_fake_live_host() -> None:
    t = server_host()
    facts = gather(HostSpec.of(name="h", sglang_version="0.5.23"), t)
    assert facts.server.value is not None
    assert facts.server.value.pid == 42 and facts.server.value.owner_uid == 1000
    assert facts.server.value.python == PYTHON
    assert facts.server.value.environment_names == ["HF_TOKEN", "HOME"]  # names, no values
    assert "secret" not in facts.model_dump_json()
    assert facts.log.value is not None and facts.launch.source == "/proc/42/cmdline"
    assert isinstance(facts.gpus, Fact) and facts.gpus.value is None


def test_the_fake_host_fails_like_a_transport() -> None:
    with pytest.raises(FileMissing, match=r"^fake:/nope: no such file or directory$"):
        server_host().read_file("/nope", max_bytes=10)
