"""The seam decides: one opener per kind of host, and each kind answers or refuses with
its reason (transport/open.py, recorded.py, offline.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dflash_doctor.errors import FactError, FileMissing, Refused, UsageError
from dflash_doctor.finders.gpus import gpu_table
from dflash_doctor.finders.log import runtime_log
from dflash_doctor.finders.pids import process_ids
from dflash_doctor.hosts import HostSpec, load_recorded_host
from dflash_doctor.transport import open as opener
from dflash_doctor.transport.open import OPENERS, host_kind, open_transport, relaunch_refusal
from dflash_doctor.transport.recorded import GPU_CAPTURE, RecordedTransport, tree_path
from tests.conftest import DEMO_HOST
from tests.fakes import FakeHost

KINDS = [
    (HostSpec.of(name="a"), "local"),
    (HostSpec.of(name="a", address="gpu1"), "ssh"),
    (HostSpec.of(name="a", root="/trees/a"), "recorded"),
    (HostSpec.of(name="a", root="/trees/a", address="gpu1"), "recorded"),
    (HostSpec.of(name="a", offline=True, address="gpu1"), "offline"),
    (HostSpec.of(name="a", offline=True, root="/trees/a"), "offline"),
    (HostSpec.of(name="a", container="c1"), "docker"),
    (HostSpec.of(name="a", pod="p1"), "kubernetes"),
    (HostSpec.of(name="a", container="c1", offline=True), "offline"),
]


@pytest.mark.parametrize(("spec", "kind"), KINDS, ids=[k for _, k in KINDS])
def test_host_kind(spec: HostSpec, kind: str) -> None:
    assert host_kind(spec) == kind


def test_every_kind_has_one_opener() -> None:
    assert set(OPENERS) == {"local", "ssh", "recorded", "offline", "docker", "kubernetes"}


def test_a_kind_without_opener_is_one_usage_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(opener.OPENERS, "local")
    with pytest.raises(UsageError, match="no transport opens local hosts"):
        open_transport(HostSpec.of(name="a"))


def test_local_and_offline_open_as_their_kind() -> None:
    with open_transport(HostSpec.of(name="a")) as local:
        assert local.kind == "local" and local.relaunch_refused is None
        assert local.live_refused is None and local.log_refused is None
    with open_transport(HostSpec.of(name="a", offline=True, address="gpu1")) as off:
        assert off.kind == "offline" and not off.remote  # never connects to the address
        assert off.relaunch_refused == relaunch_refusal(HostSpec.of(name="a", offline=True))


def test_offline_refuses_every_question_about_a_running_host(tmp_path: Path) -> None:
    (tmp_path / "launch.sh").write_text("python -m sglang.launch_server\n")
    with open_transport(HostSpec.of(name="a", offline=True)) as t:
        assert t.read_file(str(tmp_path / "launch.sh"), max_bytes=100).startswith(b"python")
        for ask in (
            lambda: process_ids(t),
            lambda: gpu_table(t),
            lambda: runtime_log(t, tail_lines=1),
        ):
            with pytest.raises(Refused, match=r"^a: offline"):
                ask()
        # This machine's /proc is not the host's, whatever pid is named.
        with pytest.raises(Refused, match="offline: no process table"):
            t.read_file("/proc/1/cmdline", max_bytes=100)
        assert t.log_refused and t.live_refused and t.relaunch_refused


def test_offline_gathering_says_why_each_live_fact_is_missing() -> None:
    from dflash_doctor.gather import gather

    spec = HostSpec.of(name="a", offline=True, launch="python -m sglang.launch_server --tp 2")
    facts = gather(spec, open_transport(spec))
    assert facts.gpus.error == "a: offline: no host to list GPUs of"
    assert facts.log.error == "a: offline: no running server, no log"
    assert facts.server.value is None and facts.runtime.value is None


def test_recorded_maps_every_path_under_its_tree() -> None:
    spec = load_recorded_host(str(DEMO_HOST))
    with open_transport(spec) as t:
        assert isinstance(t, RecordedTransport) and t.kind == "recorded"
        assert t.read_file("/etc/sglang/launch.sh", max_bytes=1 << 20)
        assert 4242 in process_ids(t)  # the tree's own /proc: no pgrep on this machine
        assert gpu_table(t) == (DEMO_HOST / GPU_CAPTURE.lstrip("/")).read_bytes()
        assert t.reach.gpu_source == GPU_CAPTURE
        assert t.command_path("/var/log/x") == str(DEMO_HOST / "var/log/x")
        with pytest.raises(Refused, match="is a file"):
            runtime_log(t, tail_lines=1)
        assert t.relaunch_refused == relaunch_refusal(spec)
        with pytest.raises(FileMissing):
            t.read_file("/etc/passwd", max_bytes=1 << 20)  # the tree's, which it has not


def test_recorded_links_resolve_inside_the_tree(tmp_path: Path) -> None:
    tree = tmp_path / "t"
    (tree / "etc").mkdir(parents=True)
    (tree / "etc" / "real.sh").write_text("x")
    (tree / "etc" / "abs.sh").symlink_to("/etc/real.sh")
    (tree / "etc" / "up.sh").symlink_to("../../../../etc/real.sh")
    (tree / "loop").symlink_to("/loop")
    t = RecordedTransport(FakeHost(), str(tree))
    assert t.map("/etc/abs.sh") == str(tree / "etc/real.sh")
    assert t.map("/etc/up.sh") == str(tree / "etc/real.sh")  # `..` stops at the root
    assert t.map("/etc/abs.sh", follow=False) == str(tree / "etc/abs.sh")
    with pytest.raises(FactError, match="too many levels"):
        tree_path(str(tree), "/loop/x")


def test_a_remote_tree_refuses_paths_that_climb_out() -> None:
    inner = FakeHost(files={"/trees/a/etc/x": b"1", "/etc/passwd": b"root"})
    t = RecordedTransport(inner, "/trees/a")  # not a directory here: a tree on the host
    assert t.read_file("/etc/x", max_bytes=10) == b"1"
    with pytest.raises(Refused, match="leaves the recorded tree"):
        t.read_file("/../../etc/passwd", max_bytes=10)
    assert inner.asked == ["read /trees/a/etc/x"]  # the refused path never reached the host


def test_recorded_real_path_refuses_links_outside_the_tree(tmp_path: Path) -> None:
    tree = tmp_path / "t"
    shutil.copytree(DEMO_HOST / "etc", tree / "etc")
    t = RecordedTransport(FakeHost(remote=False), str(tree))
    assert t.real_path("/etc/sglang/launch.sh") == "/etc/sglang/launch.sh"
    inner = FakeHost(commands={("readlink", "-f"): lambda argv: _out("/etc/shadow\n")})
    remote = RecordedTransport(inner, "/trees/a")
    with pytest.raises(Refused, match="links outside the host tree"):
        remote.real_path("/etc/launch.sh")


def _out(text: str):  # type: ignore[no-untyped-def]
    from tests.fakes import ok

    return ok(text)


def test_a_recorded_tree_on_a_remote_host_is_bundled_under_its_root() -> None:
    inner = FakeHost()
    t = RecordedTransport(inner, "/trees/a")
    bundled = t.prefetched({"root": "/", "recorded": False, "modules": {"server_http": "x"}})
    assert isinstance(bundled, RecordedTransport) and bundled is not t
    config = bundled.inner.config  # type: ignore[attr-defined]
    assert config["root"] == "/trees/a" and config["recorded"] is True
    assert config["nvidia_smi"] is None and config["native"] is None
    assert "server_http" not in config["modules"]
