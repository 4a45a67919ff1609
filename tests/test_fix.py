"""`fix`: plans as diffs (pure), and --apply end to end over the real sshd on a stand-in server."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from dflash_doctor.checks.base import CheckResult, Finding, Fix, Severity
from dflash_doctor.facts.launch import parse_launch_file, parse_script
from dflash_doctor.fix.edits import Edit, edit_argv, edit_compose, edit_shell
from dflash_doctor.fix.plan import plan_fixes
from fixtures.stand_in import StandIn, end_servers_under, healthy
from tests.cli_helper import DOCTOR, doctor, doctor_env
from tests.conftest import DEMO_HOST, FIXTURE_HOSTS, REPO

# -- editing (pure) --------------------------------------------------------------------------


def shell_edit(text: str, *edits: Edit) -> str:
    launch = parse_script(text.encode(), source="s.sh")
    out = edit_shell(text, launch, list(edits))
    parse_script(out.encode(), source="s.sh")  # still a valid launch script
    return out


def test_set_flag_appends_a_continuation_line_keeping_style() -> None:
    text = (DEMO_HOST / "etc/sglang/launch.sh").read_text()
    out = shell_edit(text, Edit("set_flag", "--speculative-draft-window-size", "2048"))
    assert out.endswith(
        '  --api-key "$SGLANG_API_KEY" \\\n  --speculative-draft-window-size 2048\n'
    )
    assert out.splitlines()[:18] == text.splitlines()[:18]  # comments and variables kept
    args = parse_script(out.encode(), source="s")
    assert args.draft_window_size == 2048 and args.model_path == "moonshotai/Kimi-K2.6"


def test_set_existing_flag_changes_value_in_place() -> None:
    text = (
        "python -m sglang.launch_server --a 1 \\\n"
        "  --speculative-draft-window-size=512 \\\n  --b 2\n"
    )
    out = shell_edit(text, Edit("set_flag", "--speculative-draft-window-size", "2048"))
    assert out == text.replace("=512", "=2048")


def test_replace_and_remove_flags() -> None:
    text = (
        "#!/bin/sh\n# keep me\npython3 -m sglang.launch_server --model-path m \\\n"
        "  --speculative-dflash-draft-window-size 2048 \\\n"
        "  --speculative-dflash-block-size 8\n"
    )
    out = shell_edit(
        text,
        Edit(
            "replace_flag",
            "--speculative-draft-window-size",
            "2048",
            "--speculative-dflash-draft-window-size",
        ),
        Edit("remove_flag", "--speculative-dflash-block-size"),
    )
    assert out == (
        "#!/bin/sh\n# keep me\npython3 -m sglang.launch_server --model-path m \\\n"
        "  --speculative-draft-window-size 2048\n"
    )


def test_one_line_command_and_trailing_comment() -> None:
    out = shell_edit(
        "python -m sglang.launch_server --x 1  # prod\n", Edit("set_flag", "--page-size", "64")
    )
    assert out == "python -m sglang.launch_server --x 1 --page-size 64  # prod\n"


def test_systemd_unit_edit() -> None:
    path = FIXTURE_HOSTS / "v0513/etc/systemd/system/sglang.service"
    text = path.read_text()
    launch = parse_launch_file(text.encode(), source="u", path=str(path))
    out = edit_shell(text, launch, [Edit("remove_flag", "--speculative-num-draft-tokens")])
    assert "--speculative-num-draft-tokens" not in out and "Restart=on-failure" in out
    again = parse_launch_file(out.encode(), source="u", path=str(path))
    assert again.num_draft_tokens is None and again.draft_window_size == 4096


def test_compose_edit() -> None:
    text = (
        "services:\n  web:\n    command:\n      - nginx\n      - -g\n"
        "  s:\n    command:\n      - python3\n      - -m\n"
        "      - sglang.launch_server\n      - --speculative-dflash-draft-window-size\n"
        '      - "4096"\n    ports: ["30000:30000"]\n'
    )
    out = edit_compose(
        text,
        [
            Edit(
                "replace_flag",
                "--speculative-draft-window-size",
                "2048",
                "--speculative-dflash-draft-window-size",
            ),
            Edit("set_flag", "--page-size", "64"),
        ],
    )
    args = parse_launch_file(out.encode(), source="c", path="c.yaml")
    assert (args.draft_window_flag, args.draft_window_size, args.page_size) == (
        "--speculative-draft-window-size",
        2048,
        64,
    )
    assert 'ports: ["30000:30000"]' in out
    assert out.startswith("services:\n  web:\n    command:\n      - nginx\n      - -g\n  s:")


def test_edit_argv() -> None:
    argv = ["python", "-m", "sglang.launch_server", "--a=1", "--b", "2", "--c"]
    assert edit_argv(
        argv,
        [Edit("set_flag", "--a", "5"), Edit("remove_flag", "--b"), Edit("set_flag", "--d", "7")],
    ) == ["python", "-m", "sglang.launch_server", "--a=5", "--c", "--d", "7"]


def finding(check_id: str, severity: Severity, fix: Fix) -> Finding:
    return Finding(check_id=check_id, severity=severity, title="t", message="m", fixes=[fix])


def test_plan_dedupes_and_lists_manual_steps() -> None:
    f1 = finding("DFD103", Severity.ERROR, Fix(action="set_flag", flag="--x", value="1"))
    f2 = finding("DFD102", Severity.WARNING, Fix(action="set_flag", flag="--x", value="1"))
    f3 = finding("DFD130", Severity.ERROR, Fix(action="upgrade_sglang", value="0.5.14"))
    results = [
        CheckResult(
            check_id=f.check_id, name="n", severity=f.severity, status="failed", findings=[f]
        )
        for f in (f1, f2, f3)
    ]
    text = "python -m sglang.launch_server --m 1\n"
    plan = plan_fixes(
        "h",
        results,
        source="s.sh",
        source_text=text,
        source_launch=parse_script(text.encode(), source="s.sh"),
        running=None,
    )
    assert plan.new_text == "python -m sglang.launch_server --m 1 --x 1\n"
    assert plan.check_ids == ["DFD103", "DFD102"]
    assert plan.manual == ["DFD130: upgrade SGLang to 0.5.14 or newer"]
    assert "+python -m sglang.launch_server --m 1 --x 1" in plan.diff()


def test_dry_run_changes_nothing(tmp_path: Path) -> None:
    tree = tmp_path / "seed"
    shutil.copytree(DEMO_HOST, tree)
    before = {p: p.read_bytes() for p in tree.rglob("*") if p.is_file()}
    p = subprocess.run(
        [sys.executable, "-m", "dflash_doctor", "fix", "--host-dir", str(tree)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert p.returncode == 0 and "+  --speculative-draft-window-size 2048" in p.stdout
    # what the window also does on 0.5.13 (dflash_worker.py 0.5.13:425-441) is said
    assert "also clamps full_attention layer(s) 5" in " ".join(p.stdout.split())
    assert {p: p.read_bytes() for p in tree.rglob("*") if p.is_file()} == before


def test_apply_needs_yes_without_a_terminal(tmp_path: Path) -> None:
    tree = tmp_path / "seed"
    shutil.copytree(DEMO_HOST, tree)
    p = subprocess.run(
        [sys.executable, "-m", "dflash_doctor", "fix", "--host-dir", str(tree), "--apply"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert p.returncode == 2 and "--yes" in p.stderr


def test_offline_fix_makes_the_gate_pass(tmp_path: Path) -> None:
    (tmp_path / "deploy").mkdir()
    original = (DEMO_HOST / "etc/sglang/launch.sh").read_bytes()
    (tmp_path / "deploy/launch.sh").write_bytes(original)
    shutil.copytree(DEMO_HOST / "models/Kimi-K2.6-DFlash", tmp_path / "models/d")
    (target,) = (DEMO_HOST / "data/hf/hub/models--moonshotai--Kimi-K2.6/snapshots").iterdir()
    shutil.copytree(target, tmp_path / "models/t")
    # every input a gate needs (it fails closed without the target's config)
    common = ["--drafter", "models/d", "--target", "models/t", "--sglang-version", "0.5.13"]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return doctor(*args, cwd=tmp_path, columns=None, timeout=60)

    assert run("gate", "deploy/launch.sh", *common).returncode == 1
    p = run("fix", "--offline", "--launch", "deploy/launch.sh", *common, "--apply", "--yes")
    assert p.returncode == 0, p.stdout + p.stderr
    assert run("gate", "deploy/launch.sh", *common).returncode == 0
    (backup,) = (tmp_path / "deploy").glob("launch.sh.dflash-doctor-*.bak")
    assert backup.read_bytes() == original
    # applying twice changes nothing the second time
    p = run("fix", "--offline", "--launch", "deploy/launch.sh", *common, "--apply", "--yes")
    assert p.returncode == 0 and "nothing to change" in p.stdout
    assert len(list((tmp_path / "deploy").glob("*.bak"))) == 1
    p = run("fix", "--offline", "--launch", "deploy/launch.sh", *common, "--rollback", "--yes")
    assert p.returncode == 0 and (tmp_path / "deploy/launch.sh").read_bytes() == original


# -- --apply end to end: the stand-in server over the real sshd ---------------------------------


@pytest.fixture
def live_host(tmp_path: Path, sshd):  # type: ignore[no-untyped-def]
    """The stand-in server (fixtures/stand_in.py) in tmp_path, reached over the real sshd."""
    server = StandIn(tmp_path)
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(
        yaml.safe_dump(
            {
                "hosts": {
                    "gpu-live": {
                        "address": sshd.address,
                        "identity_file": str(sshd.client_key),
                        "launch_file": str(server.script),
                        "log_path": str(server.log),
                        "sglang_version": "0.5.13",
                    }
                }
            }
        )
    )

    def fix(*args: str) -> subprocess.CompletedProcess[str]:
        return doctor(
            *("fix", "-I", str(inventory), "--known-hosts", str(sshd.known_hosts)),
            *("--ssh-config", "/dev/null", "--health-timeout", "120", *args),
            columns=200,
            timeout=600,
        )

    host = {
        "script": server.script,
        "log": server.log,
        "port": server.port,
        "write": server.write,
        "start": server.start,
        "fix": fix,
    }
    yield host
    end_servers_under(tmp_path)


def assert_said_once(out: str) -> None:
    """No message printed twice: no line, and no step repeated in the outcome line."""
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    assert len(lines) == len(set(lines)), out
    steps = [ln for ln in out.splitlines() if ln.startswith("  ")]
    last = lines[-1]
    assert not any(step.strip() in last for step in steps), out


def server_info(port: int) -> dict:  # type: ignore[type-arg]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/get_server_info", timeout=2) as r:
        return json.loads(r.read())  # type: ignore[no-any-return]


def test_apply_fixes_the_seed_scenario_and_verifies(live_host) -> None:  # type: ignore[no-untyped-def]
    """The seed on 0.5.13 (dflash.py 0.5.13:116-122): the window at 2048 makes the sliding
    layers' served span equal their trained one (dflash_worker.py 0.5.13:425-441); the
    full layer it clamps is the lesser evil DFD103's fix names, so verification passes."""
    live_host["write"]("0.5.13")
    original = live_host["script"].read_bytes()
    live_host["start"]()
    assert "draft_window_size=None, compact_cache=False" in live_host["log"].read_text()
    p = live_host["fix"]("--apply", "--yes")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "applied to" in p.stdout and "verified" in p.stdout
    assert_said_once(p.stdout)
    # the start is one step, the command line a shell would run
    script = live_host["script"]
    start = f"setsid nohup {script} >>{live_host['log']} 2>&1 </dev/null &"
    assert start in " ".join(p.stdout.split())  # (the console may wrap a long step)
    assert "draft_window_size=2048, compact_cache=True" in live_host["log"].read_text()
    info = server_info(live_host["port"])
    assert info["speculative_draft_window_size"] == 2048, (info, live_host["log"].read_text())
    (backup,) = live_host["script"].parent.glob("serve.sh.dflash-doctor-*.bak")
    assert backup.read_bytes() == original
    # a second apply is a no-op: no backup, no relaunch
    p = live_host["fix"]("--apply", "--yes")
    assert p.returncode == 0 and "nothing to change" in p.stdout
    assert len(list(live_host["script"].parent.glob("*.bak"))) == 1
    # and --rollback restores the byte-identical file and the old server
    p = live_host["fix"]("--rollback", "--yes")
    assert p.returncode == 0, p.stdout
    assert_said_once(p.stdout)
    assert live_host["script"].read_bytes() == original
    assert server_info(live_host["port"])["speculative_draft_window_size"] is None


def test_failed_relaunch_is_rolled_back(live_host) -> None:  # type: ignore[no-untyped-def]
    # This host's server cannot start with a draft window (the stand-in fails its startup,
    # as a server whose memory settings do not fit would): the new server never gets healthy.
    live_host["write"]("0.5.13", "export FAKE_SGLANG_OOM_WITH_WINDOW=1\n")
    original = live_host["script"].read_bytes()
    live_host["start"]()
    p = live_host["fix"]("--apply", "--yes")
    assert p.returncode == 4, p.stdout + p.stderr
    assert "rolled back" in p.stdout
    assert "CUDA out of memory (stand-in failure)" in p.stdout  # the server's last log lines
    assert live_host["script"].read_bytes() == original
    assert healthy(live_host["port"])  # the old server runs again
    assert server_info(live_host["port"])["speculative_draft_window_size"] is None


def test_fix_uses_the_spelling_the_hosts_sglang_accepts(live_host) -> None:  # type: ignore[no-untyped-def]
    # The inventory declares 0.5.13, but the server's own SGLang is 0.5.11: ask it.
    live_host["write"]("0.5.11")
    live_host["start"]()
    p = live_host["fix"]()
    assert p.returncode == 0, p.stdout
    assert "+  --speculative-dflash-draft-window-size 2048" in p.stdout, p.stdout


def test_inventory_launch_entries_are_edited_in_place(tmp_path: Path) -> None:
    from dflash_doctor.fix.edits import edit_inventory_launch

    shutil.copytree(DEMO_HOST / "models/Kimi-K2.6-DFlash", tmp_path / "d")
    (target,) = (DEMO_HOST / "data/hf/hub/models--moonshotai--Kimi-K2.6/snapshots").iterdir()
    shutil.copytree(target, tmp_path / "t")  # a gate fails closed without the target
    inv = tmp_path / "inventory.yaml"
    original = (
        "# fleet definition\n"
        "defaults:\n  sglang_version: 0.5.13\n  offline: true\n"
        f"  drafter_path: {tmp_path / 'd'}\n"
        f"  target_path: {tmp_path / 't'}\n"
        "hosts:\n"
        "  gpu-a:  # canary\n"
        "    launch: python -m sglang.launch_server --model-path m --speculative-algorithm DFLASH"
        " --speculative-draft-model-path d --context-length 65536\n"
        "    labels: [canary]\n"
        "  gpu-b:\n"
        "    launch:\n      - python\n      - -m\n      - sglang.launch_server\n"
        "      - --model-path\n      - m\n"  # SGLang refuses a command without it
        "      - --speculative-algorithm\n      - DFLASH\n"
        "      - --speculative-draft-model-path\n      - d\n"
        "    labels: [prod]  # keep\n"
    )
    inv.write_text(original)
    run = [sys.executable, "-m", "dflash_doctor"]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)}
    gate = subprocess.run(
        [*run, "gate", "-I", str(inv)], capture_output=True, text=True, env=env, timeout=60
    )
    assert gate.returncode == 1
    p = subprocess.run(
        [*run, "fix", "-I", str(inv), "--apply", "--yes"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    text = inv.read_text()
    assert "# fleet definition" in text and "  gpu-a:  # canary" in text
    assert "    labels: [prod]  # keep" in text
    assert "--context-length 65536 --speculative-draft-window-size 2048" in text
    assert "      - --speculative-draft-window-size\n      - '2048'" in text
    backups = list(tmp_path.glob("inventory.yaml.dflash-doctor-*.bak"))
    assert len(backups) == 1 and backups[0].read_text() == original  # one backup, first state
    gate = subprocess.run(
        [*run, "gate", "-I", str(inv)], capture_output=True, text=True, env=env, timeout=60
    )
    assert gate.returncode == 0, gate.stdout
    with pytest.raises(Exception, match="no block for host"):
        edit_inventory_launch(text, "gpu-zz", ["x"])


def test_verification_compares_served_with_trained_spans() -> None:
    """`fix --apply` succeeds only when re-gathered spans equal the trained ones: the log
    (dflash_worker.py 0.5.13:191-196) wins over the launch flag, and the version decides
    whether layer_types are honoured (dflash.py 0.5.13:116-122 vs 0.5.14:44-66)."""
    from dflash_doctor.checks.views import span_mismatch
    from tests.conftest import QWEN8B_DRAFTER, drafter_cfg, host_facts, init_log, launch

    kimi = drafter_cfg()
    flag = launch("--context-length", "131072", "--speculative-draft-window-size", "2048")
    # 0.5.13, window 2048 running: sliding layers as trained; clamped layer 5 is accepted
    ok = host_facts(drafter=kimi, launch_args=flag, log=init_log(2048), version="0.5.13")
    assert span_mismatch(ok) is None
    # the flag was written but the new server logs no window: not fixed
    ignored = host_facts(drafter=kimi, launch_args=flag, log=init_log(None), version="0.5.13")
    assert "layer 0 (sliding_attention) trained 2048 tokens" in (span_mismatch(ignored) or "")
    # on 0.5.23 the same window clamps layer 5 for nothing: not equal
    post = host_facts(drafter=kimi, launch_args=flag, log=init_log(2048), version="0.5.23")
    assert "layer 5 (full_attention)" in (span_mismatch(post) or "")
    # an all-full drafter under a window is clamped on every version
    full = drafter_cfg(QWEN8B_DRAFTER)
    assert span_mismatch(host_facts(drafter=full, launch_args=flag, version="0.5.13"))


# -- at a terminal: the plan first, then the question (issue 23 item 3) --------------------------


def at_terminal(
    args: list[str], answer: bytes, before_answer: Callable[[], None] = lambda: None
) -> tuple[int, str]:
    """`dflash-doctor ARGS` on a pseudo-terminal, answering its question with `answer`
    (`before_answer` runs while the question waits): (exit code, everything it wrote, the
    question included, in order)."""
    import pty
    import select

    leader, follower = pty.openpty()
    p = subprocess.Popen(
        [*DOCTOR, *args],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        cwd=REPO,
        env=doctor_env(200, env={"TERM": "dumb"}),
    )
    os.close(follower)
    out, asked = b"", False
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if not asked and b"[y/N]" in out:
            before_answer()
            os.write(leader, answer)
            asked = True
        ready, _, _ = select.select([leader], [], [], 1)
        if not ready:
            if p.poll() is not None:
                break
            continue
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the follower side closed: the command ended
            break
        if not chunk:
            break
        out += chunk
    os.close(leader)
    return p.wait(timeout=60), out.decode("utf-8", "replace").replace("\r\n", "\n")


def test_at_a_terminal_the_plan_comes_before_the_question_and_no_changes_nothing(
    tmp_path: Path,
) -> None:
    tree = tmp_path / "v0513"
    shutil.copytree(FIXTURE_HOSTS / "v0513", tree)
    before = {p: p.read_bytes() for p in tree.rglob("*") if p.is_file()}
    code, out = at_terminal(["fix", "--host-dir", str(tree), "--apply"], b"n\n")
    assert code == 0, out
    question = out.index("Apply this change to v0513? [y/N]")
    assert 0 <= out.index("+++ b/") < out.index("\n+ ") < question  # the diff, then the question
    assert out.index("relaunch: ") < question
    assert "nothing changed on v0513" in out[question:]
    assert {p: p.read_bytes() for p in tree.rglob("*") if p.is_file()} == before
    assert not list(tree.rglob("*.bak"))


def test_at_a_terminal_yes_applies_the_plan_shown_once(tmp_path: Path) -> None:
    tree = tmp_path / "v0513"
    shutil.copytree(FIXTURE_HOSTS / "v0513", tree)
    code, out = at_terminal(["fix", "--host-dir", str(tree), "--apply"], b"y\n")
    assert code == 0, out
    question = out.index("[y/N]")
    assert out.count("+++ b/") == 1 and out.index("+++ b/") < question  # shown once, before
    assert "wrote " in out[question:] and len(list(tree.rglob("*.dflash-doctor-*.bak"))) == 1


def test_demo_apply_works_on_a_copy_and_says_where() -> None:
    """`fix --demo --apply` (what `check --demo` suggests) never edits the installed demo."""
    from dflash_doctor.demo import DEMO_DIR

    before = {p: p.read_bytes() for p in DEMO_DIR.rglob("*") if p.is_file()}
    p = subprocess.run(
        [sys.executable, "-m", "dflash_doctor", "fix", "--demo", "--apply", "--yes"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        stdin=subprocess.DEVNULL,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "COLUMNS": "400"},
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert {p: p.read_bytes() for p in DEMO_DIR.rglob("*") if p.is_file()} == before
    copy = Path(p.stderr.split("copy of the demo host in ", 1)[1].split()[0])
    try:
        assert copy.is_dir() and not copy.is_relative_to(DEMO_DIR)
        assert "--speculative-draft-window-size 2048" in (copy / "etc/sglang/launch.sh").read_text()
        assert len(list((copy / "etc/sglang").glob("launch.sh.dflash-doctor-*.bak"))) == 1
        assert f"check --host-dir {copy}" in p.stderr
        assert_said_once(p.stdout)
    finally:
        shutil.rmtree(copy.parent)
    rollback = subprocess.run(
        [sys.executable, "-m", "dflash_doctor", "fix", "--demo", "--rollback", "--yes"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert rollback.returncode == 2 and "--host-dir DIR --rollback" in rollback.stderr


def test_at_a_terminal_yes_to_a_plan_the_host_no_longer_matches_changes_nothing(
    tmp_path: Path,
) -> None:
    """The file is edited while the question waits: the plan shown is no longer what would
    be written, so "yes" writes nothing (exit 4) rather than a change nobody saw."""
    tree = tmp_path / "v0513"
    shutil.copytree(FIXTURE_HOSTS / "v0513", tree)
    unit = tree / "etc/systemd/system/sglang.service"

    def edit() -> None:
        unit.write_text(unit.read_text().replace("--attention-backend flashinfer", "--tp 1"))

    code, out = at_terminal(["fix", "--host-dir", str(tree), "--apply"], b"y\n", edit)
    assert code == 4, out
    assert "nothing changed: the plan is no longer the one shown" in out
    assert "--tp 1" in unit.read_text() and not list(tree.rglob("*.bak"))
