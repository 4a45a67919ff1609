"""One round trip per host: the bundle answers a gathering against the real sshd (no mocks).

Round trips are counted where they happen, on the real paramiko client: every remote
command is one channel opened by `SSHTransport._open_channel`, every SFTP request goes
through `paramiko.SFTPClient._request` / `_async_request`. The counters call the real code.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import paramiko
import pytest

from dflash_doctor.finders.gpus import find_gpus
from dflash_doctor.gather import gather
from dflash_doctor.hosts import HostSpec, load_recorded_host
from dflash_doctor.pipeline import check_host, open_transport
from dflash_doctor.prefetch_plan import bundle_config, prefetching
from dflash_doctor.transport import prefetch
from dflash_doctor.transport.base import Transport
from dflash_doctor.transport.local import LocalTransport
from dflash_doctor.transport.prefetch import NO_SYSTEM_PYTHON, PrefetchTransport, fetch_answers
from dflash_doctor.transport.recorded import RecordedTransport
from dflash_doctor.transport.ssh import SSHTransport
from fixtures.sshd import free_port
from tests.conftest import DEMO_HOST, FIXTURE_HOSTS, REPO
from tests.test_vllm_stand_in import running, venv_with_vllm

HOSTS = [DEMO_HOST, *(FIXTURE_HOSTS / n for n in ("tuned", "v0511", "v0513", "v0523", "vllm034"))]


def _misses(t: Any) -> list[str]:
    """The misses of the bundle under a gathering's transport (a recorded tree wraps it)."""
    while not isinstance(t, PrefetchTransport) and hasattr(t, "inner"):
        t = t.inner
    return list(getattr(t, "misses", []))


def _raw(t: Any, spec: HostSpec) -> tuple[Any, dict[str, Any]]:
    """Under a recorded tree's transport: the SSH transport, and the bundle config that
    reads the tree (the tree transport puts its root over the live settings)."""
    assert isinstance(t, RecordedTransport)
    return t.inner, t.bundle_settings(bundle_config(spec))


@pytest.fixture(autouse=True)
def _no_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)


@pytest.fixture
def trips(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Count remote executions and SFTP requests as the real client makes them, and name
    each read the bundle did not answer (`missed: read /path`): a gathering that costs more
    than one round trip says which read of which finder the bundle's plan lacks."""
    seen: Counter[str] = Counter()
    open_channel = SSHTransport._open_channel
    missed = PrefetchTransport._missed

    def counted_miss(self: PrefetchTransport, what: str) -> None:
        seen[f"missed: {what}"] += 1
        missed(self, what)

    # private to paramiko (no stub): the two calls every SFTP request goes through
    request = paramiko.SFTPClient._request  # type: ignore[attr-defined]
    async_request = paramiko.SFTPClient._async_request  # type: ignore[attr-defined]

    def counted_open(self: SSHTransport, argv: list[str], timeout: float, *rest: Any) -> Any:
        seen["exec"] += 1  # `rest`: the stdin of a file write (on_host/safe_files.py)
        return open_channel(self, argv, timeout, *rest)

    def counted_request(self: paramiko.SFTPClient, *args: Any) -> Any:
        seen["sftp"] += 1
        return request(self, *args)

    def counted_async(self: paramiko.SFTPClient, *args: Any) -> Any:
        seen["sftp"] += 1
        return async_request(self, *args)

    monkeypatch.setattr(SSHTransport, "_open_channel", counted_open)
    monkeypatch.setattr(PrefetchTransport, "_missed", counted_miss)
    monkeypatch.setattr(paramiko.SFTPClient, "_request", counted_request)
    monkeypatch.setattr(paramiko.SFTPClient, "_async_request", counted_async)
    return seen


@pytest.mark.parametrize("tree", HOSTS, ids=lambda p: p.name)
def test_a_recorded_host_costs_one_remote_execution(tree: Path, sshd, ssh_options, trips) -> None:  # type: ignore[no-untyped-def]
    spec = load_recorded_host(str(tree)).model_copy(update={"address": sshd.address})
    remote = check_host(spec, ssh=ssh_options)
    assert remote.reachable, remote.error
    assert dict(trips) == {"exec": 1}  # no SFTP at all: a gathering is one round trip
    local = check_host(load_recorded_host(str(tree)))
    assert remote.facts == local.facts and remote.results == local.results


def test_files_beside_the_drafter_travel_in_the_one_round_trip(  # type: ignore[no-untyped-def]
    tmp_path: Path, sshd, ssh_options, trips
) -> None:
    """The drafter's safetensors index and mask_embedding.pt (DFD160, DFD163) come back in
    the bundle: no SFTP, the same facts as a local look."""
    tree = tmp_path / "v0523"
    shutil.copytree(FIXTURE_HOSTS / "v0523", tree)
    (snapshot,) = (tree / "data/hf/hub/models--z-lab--Qwen3-4B-DFlash-b16/snapshots").iterdir()
    side = REPO / "fixtures/checks/DFD160/fires/drafter/model.safetensors.index.json"
    shutil.copy(side, snapshot / "model.safetensors.index.json")
    shutil.copy(REPO / "fixtures/checks/DFD163/clean/drafter/mask_embedding.pt", snapshot)
    spec = load_recorded_host(str(tree)).model_copy(update={"address": sshd.address})
    remote = check_host(spec, ssh=ssh_options)
    assert remote.reachable, remote.error
    assert dict(trips) == {"exec": 1}
    local = check_host(load_recorded_host(str(tree)))
    assert remote.facts == local.facts and remote.results == local.results
    files = remote.facts.drafter_files.value if remote.facts else None
    assert files is not None and files.quantized_tensors > 0
    assert files.sidecar_mask_token_id == 163838


def test_with_no_room_in_the_bundle_every_read_is_a_round_trip(
    sshd: Any, ssh_options: Any, trips: Counter[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A bundle with no room for any file (its total bound 0): all reads fall back, and
    # the facts are still exactly the local ones. This pins what the bundle saves.
    monkeypatch.setitem(prefetch.LIMITS, "total", 0)
    spec = load_recorded_host(str(DEMO_HOST)).model_copy(update={"address": sshd.address})
    remote = check_host(spec, ssh=ssh_options)
    assert remote.facts == check_host(load_recorded_host(str(DEMO_HOST))).facts
    assert trips["exec"] == 1 and trips["sftp"] >= 40
    # each named: a missed read costs several SFTP requests (open, stat, read, close)
    assert sum(n for k, n in trips.items() if k.startswith("missed: ")) >= 10


def test_secret_values_never_leave_the_host(sshd, ssh_options) -> None:  # type: ignore[no-untyped-def]
    spec = load_recorded_host(str(DEMO_HOST)).model_copy(update={"address": sshd.address})
    transport, config = _raw(open_transport(spec, ssh_options), spec)
    raw = bytearray()
    try:
        for chunk in transport.run_stream(prefetch.bundle_argv(config)):
            raw += chunk
        answers = fetch_answers(transport, config, 60)
    finally:
        transport.close()
    environ_path = os.path.join(spec.root, "proc/4242/environ")
    environ = prefetch._unpack(
        answers.files[environ_path]["data"], prefetch.FILE_BYTES, "h", environ_path
    ).split(b"\0")
    assert b"HF_HOME=/data/hf" in environ and b"HOME=/root" in environ
    assert b"HF_TOKEN" in environ and b"SGLANG_API_KEY" in environ  # names only
    assert not [i for i in environ if i.startswith((b"HF_TOKEN=", b"SGLANG_API_KEY="))]
    # The token is only in the environment: its value never crosses the network. (The API
    # key is also in the server's command line and log, which are read as they are and
    # redacted in every report: redact.py.)
    assert b"hf_FAKEfixtureTOKEN" not in raw


def test_a_write_drops_the_bundle(sshd, ssh_options, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    tree = tmp_path / "seed"
    shutil.copytree(DEMO_HOST, tree)
    spec = load_recorded_host(str(tree)).model_copy(update={"address": sshd.address})
    transport, config = _raw(open_transport(spec, ssh_options), spec)
    try:
        t = PrefetchTransport(transport, config)
        launch = str(tree / "etc/sglang/launch.sh")
        before = t.read_file(launch, max_bytes=1 << 20)
        assert t.misses == [] and t.hits == 1
        t.write_file(launch, before + b"# changed\n")
        assert t.read_file(launch, max_bytes=1 << 20).endswith(b"# changed\n")
        assert t.misses == [f"read {launch}"]
    finally:
        transport.close()


def test_answers_fail_like_the_transport(sshd, ssh_options, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Every error the bundle answers is the one line the SSH transport itself gives."""
    from dflash_doctor.errors import TransportError

    (tmp_path / "big.json").write_bytes(b"x" * 5000)
    os.mkfifo(tmp_path / "fifo")
    spec = HostSpec.of(
        name="h",
        address=sshd.address,
        root=str(tmp_path),
        launch_file="/nope",
        log_path="/fifo",
        drafter_path="/big.json",
    )
    transport, config = _raw(open_transport(spec, ssh_options), spec)
    try:
        t = PrefetchTransport(transport, config)
        cases: list[Callable[[Transport], object]] = [
            (lambda x: x.read_file(str(tmp_path / "big.json"), max_bytes=10)),
            (lambda x: x.read_file(str(tmp_path / "nope"), max_bytes=10)),
            (lambda x: x.file_size(str(tmp_path / "fifo"))),
            (lambda x: x.read_file(str(tmp_path / "fifo"), max_bytes=10)),
        ]
        for case in cases:
            with pytest.raises(TransportError) as via_bundle:
                case(t)
            with pytest.raises(TransportError) as direct:
                case(transport)
            assert str(via_bundle.value) == str(direct.value)
        assert t.misses == [] and t.hits >= len(cases)
    finally:
        transport.close()


def test_guard_runs_only_a_root_owned_python(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give files away")
    good, bad = tmp_path / "good", tmp_path / "bad"
    for d in (good, bad):
        d.mkdir()
        d.chmod(0o755)
        shutil.copy("/usr/bin/true", d / "python3")
    os.chown(bad / "python3", 65534, 65534)  # owned by nobody: it could be anything

    def guard(python: Path) -> subprocess.CompletedProcess[bytes]:
        script = prefetch.guard_script((str(python),))
        return subprocess.run(["sh", "-c", script, "g", "pass", "{}"], capture_output=True)

    assert guard(good / "python3").returncode == 0
    refused = guard(bad / "python3")
    assert refused.returncode == NO_SYSTEM_PYTHON and b"no root-owned" in refused.stderr
    good.chmod(0o777)  # a directory anyone may write to: the file could be swapped
    assert guard(good / "python3").returncode == NO_SYSTEM_PYTHON


@pytest.fixture
def live_server(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """The stand-in SGLang server as a real process, its stdout a log file."""
    models = tmp_path / "models"
    shutil.copytree(DEMO_HOST / "models/Kimi-K2.6-DFlash", models / "drafter")
    (models / "target").mkdir()
    target = next((DEMO_HOST / "data/hf/hub/models--moonshotai--Kimi-K2.6").rglob("config.json"))
    shutil.copy(target, models / "target/config.json")
    log = tmp_path / "server.log"
    argv = [sys.executable, "-m", "sglang.launch_server", "--model-path", str(models / "target")]
    argv += ["--speculative-algorithm", "DFLASH"]
    argv += ["--speculative-draft-model-path", str(models / "drafter"), "--port", str(free_port())]
    # A secret in the launch: gathering asks SGLang's parse with it hidden, and so must the
    # bundle, or its answer is not the one asked for (one more round trip).
    argv += ["--admin-api-key", "sk-admin-liveSECRETneverREAL00"]
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(REPO / "fixtures/fake_sglang"),
        "HF_TOKEN": "hf_FAKEliveTOKENneverREAL0000000000",
    }
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + 20
    while b"ready to roll" not in log.read_bytes():
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)
    yield proc, log
    proc.terminate()
    proc.wait(10)


def test_a_live_server_over_ssh_equals_a_local_look(live_server, sshd, ssh_options, trips) -> None:  # type: ignore[no-untyped-def]
    proc, log = live_server
    spec = HostSpec.of(name="live", pid=proc.pid, sglang_version="0.5.23")
    local = gather(spec, LocalTransport("live"))
    trips.clear()
    transport = open_transport(spec.model_copy(update={"address": sshd.address}), ssh_options)
    try:
        bundled = prefetching(spec, transport)
        remote = gather(spec, bundled)
        counted = dict(trips)
        plain_gpus = find_gpus(transport, spec.name)  # no bundle: the SSH transport's own
    finally:
        transport.close()
    # Not compared: gpus (no nvidia-smi here: SSH's shell and subprocess word it apart) and
    # what the live server answers over HTTP at that moment (runtime, and the version it
    # reports), asked twice under load.
    for name in set(type(local).model_fields) - {"gpus", "runtime", "sglang_version"}:
        assert getattr(remote, name) == getattr(local, name), name
    assert (remote.gpus.value, remote.gpus.error) == (plain_gpus.value, plain_gpus.error)
    assert remote.log.value is not None and remote.log.value.path == str(log)
    # ONE remote command and no SFTP: the bundle also ran host_exec's questions about the
    # server's interpreter (`id -u`, /proc status, `readlink`, `stat`), SGLang's own parse
    # with that interpreter (gather.native) and the live server's HTTP answers
    # (facts/runtime.py), each with the argv the gatherer then asked for.
    misses = _misses(bundled)
    assert counted == {"exec": 1} and misses == [], (counted, misses)
    assert remote.launch.value is not None and remote.launch.value.parser == "sglang"
    assert remote.runtime.value is not None, remote.runtime.error


def test_a_large_log_is_filtered_inside_the_bundle(
    sshd: Any, ssh_options: Any, trips: Counter[str], tmp_path: Path
) -> None:
    import random

    from bench.gen_log import lines
    from dflash_doctor.gather import REMOTE_FILTER_MIN_BYTES

    tree = tmp_path / "seed"
    shutil.copytree(DEMO_HOST, tree)
    log = tree / "var/log/sglang/server.log"
    block = "".join(lines(random.Random(7))).encode()
    log.write_bytes(log.read_bytes() + block * (REMOTE_FILTER_MIN_BYTES // len(block) + 1))
    spec = load_recorded_host(str(tree))
    transport = open_transport(spec.model_copy(update={"address": sshd.address}), ssh_options)
    try:
        bundled = prefetching(spec, transport)
        gather(spec, bundled)
    finally:
        transport.close()
    # The log filter ran in the same remote command as the bundle, and so did host_exec's
    # questions before the system python3 may run it (which python3, who the doctor is, who
    # owns and may write it): one remote command, no SFTP.
    misses = _misses(bundled)
    assert dict(trips) == {"exec": 1} and misses == [], (dict(trips), misses)
    remote = check_host(spec.model_copy(update={"address": sshd.address}), ssh=ssh_options)
    local = check_host(spec)
    assert remote.facts == local.facts and remote.results == local.results
    assert remote.facts is not None and remote.facts.log.value is not None
    assert remote.facts.log.value.bytes_scanned == log.stat().st_size


def test_bundle_script_is_stdlib_python_3_8() -> None:
    """Hosts run it under their system python3 (Ubuntu 20.04 has 3.8): grammar and imports."""
    import ast

    from dflash_doctor.shipped import script_source

    source = script_source(prefetch.BUNDLE_SCRIPT)
    tree = ast.parse(source, feature_version=(3, 8))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported
    assert "subprocess" in imported and "dflash_doctor" not in imported


def _run_bundle_here(config: dict[str, Any]) -> dict[str, Any]:
    """The bundle as the SSH transport runs it, on this machine (its own python3 -I -S)."""
    import json

    from dflash_doctor.shipped import script_source

    source = script_source(prefetch.BUNDLE_SCRIPT)
    got = subprocess.run(
        [sys.executable, "-I", "-S", "-c", source, json.dumps(config)],
        capture_output=True,
        check=True,
        timeout=120,
    )
    answer: dict[str, Any] = json.loads(got.stdout)
    return answer


@pytest.mark.parametrize("owner", [65534, 0], ids=["nobody-owns-it", "root-owns-it"])
def test_the_bundle_runs_a_server_interpreter_only_where_host_exec_would(
    tmp_path: Path, owner: int
) -> None:
    """A process's argv names its interpreter: host text. The bundle runs it (SGLang's own
    parse) only when host_exec's rules trust it, exactly as the doctor's own call would."""
    if os.geteuid() != 0:
        pytest.skip("needs root to give files away")
    from dflash_doctor.on_host import host_exec_rules

    bindir = tmp_path / "bin"
    bindir.mkdir()
    bindir.chmod(0o755)
    marker = tmp_path / "ran"
    python = bindir / "python3"
    # Runs as the "server" (a sleeper); writes the marker only when asked to run code.
    python.write_text(f'#!/bin/sh\n[ "$1" = -c ] && {{ echo ran >> {marker}; exit; }}\nsleep 60\n')
    python.chmod(0o755)
    os.chown(python, owner, owner)
    argv = [str(python), "-m", "sglang.launch_server", "--model-path", "/nope", "--port", "9"]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while b"launch_server" not in Path(f"/proc/{proc.pid}/cmdline").read_bytes():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        config = bundle_config(HostSpec.of(name="h", pid=proc.pid))
        config["server_http"] = None  # only the interpreter question here
        answer = _run_bundle_here(config)
    finally:
        proc.kill()
        proc.wait()
    ran = [
        r["argv"]
        for r in answer["runs"]
        if str(python) in r["argv"] and r["argv"][r["argv"].index(str(python)) :][1:2] == ["-c"]
    ]
    questions = [r["argv"] for r in answer["runs"]]
    assert host_exec_rules.resolve_argv(str(python)) in questions  # it was vetted
    if owner == 0:  # root's own file in root's directories: trusted, run as its owner
        # SGLang's own parse only: its answer carries the installed version, which the
        # version query would start the same interpreter again to ask (issue 28)
        assert len(ran) == 1 and all(
            r[:7]
            == [
                *["sh", "-c", host_exec_rules.NEUTRAL_SCRIPT, "sh"],
                *["env", "-i", host_exec_rules.CLEAN_PATH],
            ]
            for r in ran
        )
        assert marker.read_text() == "ran\n"
    else:
        assert ran == [] and not marker.exists()


def test_host_answers_never_name_a_file_the_doctor_reads() -> None:
    """A hostile host can print any bundle; a stream's `script` is only ever matched
    against the scripts the doctor shipped, never opened as a path."""
    import json

    doc = {
        "version": prefetch.BUNDLE_VERSION,
        "files": {},
        "dirs": {},
        "links": {},
        "runs": [],
        "streams": [
            {"script": "../../../../../etc/shadow", "args": [], "rc": 0, "out": "", "err": ""},
            {"script": "on_host/log_filter.py", "args": ["/x"], "rc": 0, "out": "", "err": ""},
        ],
    }
    answers = prefetch.Answers.parse(json.dumps(doc).encode(), {"on_host/log_filter.py": "SRC"})
    assert answers.error is None
    assert list(answers.streams) == [("-c", "SRC", "/x")]
    assert prefetch.Answers.parse(json.dumps(doc).encode()).streams == {}


@pytest.mark.parametrize("module", ["on_host/host_exec_rules.py", "on_host/server_address.py"])
def test_shipped_modules_are_stdlib_python_3_8(module: str) -> None:
    import ast

    from dflash_doctor.shipped import script_source

    tree = ast.parse(script_source(module), feature_version=(3, 8))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported


def test_the_bundle_command_is_packed_and_runs_here(tmp_path: Path) -> None:
    """The command carries the script and config compressed (a third of their size, for a
    real network's slow start); its Python 3.8 bootstrap runs the script as __main__."""
    import ast
    import json

    from dflash_doctor.shipped import script_source

    ast.parse(prefetch.UNPACK, feature_version=(3, 8))
    spec = HostSpec.of(name="h", log_path="/nope.log")
    config = bundle_config(spec)
    config.update(pgrep=None, nvidia_smi=None, commands=[], native=None, server_http=None)
    argv = prefetch.bundle_argv(config)
    plain = len(script_source(prefetch.BUNDLE_SCRIPT)) + len(json.dumps(config))
    assert sum(map(len, argv)) < plain / 2
    got = subprocess.run(argv, capture_output=True, check=True, timeout=60)
    answer = json.loads(got.stdout)
    assert answer["version"] == prefetch.BUNDLE_VERSION and "/nope.log" in answer["files"]


REDACTION_CASES = [
    ["python", "-m", "sglang.launch_server", "--api-key", "sk-abc", "--admin-api-key=xyz"],
    ["--hf-token", "$HF", "--api-key", "${K}", "--api-key", "${K:-sk-default}", "--model", "m"],
    ["--url", "http://u:pw@h/x?token=abc&x=1", "hf_abcdefghijklmnopqrstuvwxyz0", "--tokenizer"],
    ["--mask-token", "x", "--enable-forward-pass-metrics", "--db-pass", "-x9", "--session", "s"],
    ["--API_KEY", "v", "-p=secret", "--password", "", "sk-" + "a" * 300, "--auth", "b", "--"],
    ["--api-key"],
]


@pytest.mark.parametrize("argv", REDACTION_CASES)
def test_the_bundle_hides_launch_secrets_as_the_doctor_does(argv: list[str]) -> None:
    """The bundle asks SGLang to parse the launch words the doctor holds (redact_argv's),
    from the rule as data: the same words, so the answer is the one gathering asks for."""
    import json

    from dflash_doctor.on_host.bundle_script import redactor
    from dflash_doctor.prefetch_plan import argv_redaction
    from dflash_doctor.redact import redact_argv

    redact = redactor(json.loads(json.dumps(argv_redaction())))
    assert redact(argv) == redact_argv(argv)


def test_a_bundle_command_ends_with_its_whole_session_at_the_deadline(tmp_path: Path) -> None:
    """Started without the `timeout` wrapper, a command past its deadline is ended with every
    process it started (its session), and gives no answer: the transport then asks."""
    from dflash_doctor.on_host.bundle_script import Bundle

    pid_file = tmp_path / "child"
    script = f"sleep 60 & echo $! > {pid_file}; wait"
    got = Bundle._spawn(["sh", "-c", script], 1.0)
    assert got is None
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while Path(f"/proc/{child}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)  # reaped by init once killed
    assert not Path(f"/proc/{child}").exists() or b"Z" in Path(f"/proc/{child}/stat").read_bytes()


def test_a_command_that_cannot_start_is_worded_by_the_shell() -> None:
    """A missing command goes through the login shell and the bounded wrapper, as the SSH
    transport's own call would: the same status and the same words."""
    from dflash_doctor.on_host.bundle_script import Bundle
    from dflash_doctor.transport.base import bounded_on_host

    cfg = {"limits": dict(prefetch.LIMITS), "bounded_script": bounded_on_host(["x"], 1)[2]}
    bundle = Bundle(cfg)
    got = bundle.run(["dflash-no-such-command", "-x"], 10)
    assert got is not None and got[0] == 127
    own = LocalTransport("h").run(bounded_on_host(["dflash-no-such-command", "-x"], 10))
    assert got[0] == own.returncode
    (recorded,) = bundle.runs
    assert zlib.decompress(base64.b64decode(recorded["err"])) == own.stderr != b""
    assert bundle.run(["id", "-u"], 10) == (0, f"{os.getuid()}\n".encode())


class _Commands(LocalTransport):
    """This machine, keeping the argv of every command run on it."""

    def __init__(self) -> None:
        super().__init__("live")
        self.calls: list[list[str]] = []

    def run(self, argv: list[str], **kw: Any) -> Any:
        self.calls.append(argv)
        return super().run(argv, **kw)


def test_the_servers_python_starts_once_for_parse_and_version(  # type: ignore[no-untyped-def]
    live_server, sshd, ssh_options, trips
) -> None:
    """SGLang's parse reports the installed version too (the version query's answer), so the
    server's interpreter is not started a second time to ask it: neither by gathering here
    nor in the bundle, where the version is then still one remote command (issue 28)."""
    from dflash_doctor.finders.version import VERSION_QUERY
    from dflash_doctor.shipped import script_source

    proc, _ = live_server
    spec = HostSpec.of(name="live", pid=proc.pid)  # no declared version: it must be found
    here = _Commands()
    local = gather(spec, here)
    parse = script_source("on_host/sglang_args.py")
    assert len([c for c in here.calls if parse in c]) == 1
    assert not [c for c in here.calls if VERSION_QUERY in c]
    assert local.sglang_version.value is not None, local.sglang_version.error
    trips.clear()
    transport = open_transport(spec.model_copy(update={"address": sshd.address}), ssh_options)
    try:
        bundled = prefetching(spec, transport)
        remote = gather(spec, bundled)
        counted = dict(trips)
    finally:
        transport.close()
    assert counted == {"exec": 1} and _misses(bundled) == [], (counted, _misses(bundled))
    assert remote.sglang_version == local.sglang_version


def test_a_read_the_plan_lacks_is_named(
    sshd: Any, ssh_options: Any, trips: Counter[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bundle reads by the finders' plan (finders/plan.py), sent as data: when the plan it
    gets lacks a read (here: site-packages), the finder still reads it, through one more
    round trip, and the count names that read; the facts stay the local ones."""
    from dflash_doctor.finders import plan

    declared = plan.reads

    def without_site_packages() -> dict[str, Any]:
        got = json.loads(json.dumps(declared()))
        got["site"]["subdirs"] = ["dist-packages"]
        return dict(got)

    monkeypatch.setattr(plan, "reads", without_site_packages)
    spec = load_recorded_host(str(DEMO_HOST)).model_copy(update={"address": sshd.address})
    remote = check_host(spec, ssh=ssh_options)
    assert remote.facts == check_host(load_recorded_host(str(DEMO_HOST))).facts
    named = [k for k in trips if k.startswith("missed: list ") and k.endswith("/site-packages")]
    assert named and trips["sftp"] >= 1, dict(trips)


@pytest.mark.skipif(shutil.which("pgrep") is None, reason="needs pgrep")
def test_a_live_vllm_host_costs_one_remote_execution(  # type: ignore[no-untyped-def]
    tmp_path, sshd, ssh_options, trips
) -> None:
    """A live vLLM host costs what an SGLang host costs: the bundle carries the vLLM
    finder's reads (`pgrep -f vllm`, command lines, environment, log fds, dist-info
    listings, model configs) and its /version and /metrics scrapes at the address the server
    listens on (finders/vllm.py, facts/vllm_launch.vllm_address)."""
    python = venv_with_vllm(tmp_path / "venv", "0.33.0")
    env = {"FAKE_VLLM_VERSION": "0.34.0", "VLLM_USE_V2_MODEL_RUNNER": "1"}
    with running(python, env, 15, host="127.0.0.2") as (pid, port):
        spec = HostSpec.of(name="live", pid=pid)
        local = gather(spec, LocalTransport("live"))
        trips.clear()
        transport = open_transport(spec.model_copy(update={"address": sshd.address}), ssh_options)
        try:
            bundled = prefetching(spec, transport)
            remote = gather(spec, bundled)
            counted = dict(trips)
        finally:
            transport.close()
    misses = _misses(bundled)
    assert counted == {"exec": 1} and misses == [], (counted, misses)
    assert remote.engine.value == "vllm"
    for name in ("engine", "vllm_launch", "vllm_installed", "drafter", "target"):
        assert getattr(remote, name) == getattr(local, name), name
    runtime = remote.vllm_runtime.value
    assert runtime is not None, remote.vllm_runtime.error
    assert runtime.url == f"http://127.0.0.2:{port}" and runtime.version == "0.34.0"
    assert remote.vllm_launch.value is not None
    assert remote.vllm_launch.value.environ == {"VLLM_USE_V2_MODEL_RUNNER": "1"}
