"""`fix` on vLLM launches, pure: the plan the vLLM checks' fixes make, as a diff, for each
kind of launch file and each place vLLM reads a key or a variable from; refusals where the
edit could not be proved. The live apply is tests/test_vllm_fix_live.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from dflash_doctor.checks.base import CheckResult, Finding, Fix, Severity
from dflash_doctor.errors import FactError
from dflash_doctor.facts.models import Fact, HostFacts
from dflash_doctor.facts.vllm_launch import parse_vllm_script, parse_vllm_systemd_unit
from dflash_doctor.facts.vllm_models import VllmLaunch, VllmSpeculative
from dflash_doctor.fix.apply import Applier
from dflash_doctor.fix.json_text import remove_key, rename_key, set_key
from dflash_doctor.fix.launch_sources import VllmUnit, parse_file, source_of
from dflash_doctor.fix.plan import plan_fixes
from dflash_doctor.fix.vllm_edits import edit_vllm_argv, edit_vllm_text
from dflash_doctor.hosts import HostSpec
from dflash_doctor.launch_edits import Edit
from dflash_doctor.runner import run_checks
from dflash_doctor.transport.local import LocalTransport
from tests.cli_helper import doctor
from tests.conftest import REPO

TOKENS = "--speculative-config.num_speculative_tokens"
RUNNER = "VLLM_USE_V2_MODEL_RUNNER"
SPEC = '{"method": "dflash", "model": "/models/d", "num_speculative_tokens": 16}'


def results(*fixes: tuple[str, Fix]) -> list[CheckResult]:
    return [
        CheckResult(
            check_id=cid,
            name="n",
            severity=Severity.ERROR,
            status="failed",
            findings=[
                Finding(check_id=cid, severity=Severity.ERROR, title="t", message="m", fixes=[fix])
            ],
        )
        for cid, fix in fixes
    ]


TOKENS_FIX = ("DFD301", Fix(action="set_key", flag=TOKENS, value="15"))
RUNNER_FIX = ("DFD300", Fix(action="set_env", flag=RUNNER, value="1"))


def planned_diff(text: str, path: str, *fixes: tuple[str, Fix]) -> str:
    launch = parse_file(text.encode(), source=path, path=path, engine="vllm")
    plan = plan_fixes(
        "h",
        results(*fixes),
        source=path,
        source_text=text,
        source_launch=launch,
        running=None,
        engine="vllm",
    )
    assert plan.new_text is not None and plan.new_argv is not None
    read = parse_vllm_systemd_unit if path.endswith(".service") else parse_vllm_script
    after = read(plan.new_text.encode(), source=path)
    assert (
        plan.new_argv
        == parse_file(plan.new_text.encode(), source=path, path=path, engine="vllm").argv
    )
    if any(f.action == "set_key" for _, f in fixes):
        assert after.speculative is not None and after.speculative.num_speculative_tokens == 15
    if any(f.action == "set_env" for _, f in fixes):
        assert after.environ[RUNNER] == "1"
    return "".join(line for line in plan.diff().splitlines(keepends=True)[2:])


def test_script_one_line() -> None:
    line = "VLLM_USE_V2_MODEL_RUNNER={} exec vllm serve /m -sc '{}' --port 8001  # prod\n"
    text = "#!/bin/sh\n" + line.format(0, SPEC)
    diff = planned_diff(text, "/s.sh", TOKENS_FIX, RUNNER_FIX)
    assert diff == (
        "@@ -1,2 +1,2 @@\n #!/bin/sh\n"
        + "-" + line.format(0, SPEC)
        + "+" + line.format(1, SPEC.replace("16", "15"))
    )  # fmt: skip


def test_script_one_word_per_line_with_export() -> None:
    text = (
        "#!/usr/bin/env bash\nset -e\nexport HF_HOME=/data VLLM_USE_V2_MODEL_RUNNER=false\n"
        "exec /opt/v/bin/python3 \\\n  -m \\\n  vllm.entrypoints.openai.api_server \\\n"
        "  --model \\\n  /m \\\n  -sc \\\n  '" + SPEC + "' \\\n  --port \\\n  8001\n"
    )
    diff = planned_diff(text, "/s.sh", TOKENS_FIX, RUNNER_FIX)
    assert diff == (
        "@@ -1,12 +1,12 @@\n #!/usr/bin/env bash\n set -e\n"
        "-export HF_HOME=/data VLLM_USE_V2_MODEL_RUNNER=false\n"
        "+export HF_HOME=/data VLLM_USE_V2_MODEL_RUNNER=1\n"
        " exec /opt/v/bin/python3 \\\n   -m \\\n   vllm.entrypoints.openai.api_server \\\n"
        "   --model \\\n   /m \\\n   -sc \\\n"
        f"-  '{SPEC}' \\\n+  '{SPEC.replace('16', '15')}' \\\n"
        "   --port \\\n   8001\n"
    )


def test_systemd_unit_with_environment_and_a_double_quoted_word() -> None:
    escaped = SPEC.replace('"', '\\"')
    text = (
        "[Unit]\nDescription=vLLM\n\n[Service]\n"
        'Environment="HF_HOME=/data" "VLLM_USE_V2_MODEL_RUNNER=0"\n'
        "ExecStart=/opt/v/bin/vllm serve /m \\\n"
        f'  --speculative-config "{escaped}" \\\n  --port 8001\nRestart=on-failure\n'
    )
    diff = planned_diff(text, "/etc/systemd/system/vllm.service", TOKENS_FIX, RUNNER_FIX)
    assert diff == (
        "@@ -2,8 +2,8 @@\n Description=vLLM\n \n [Service]\n"
        '-Environment="HF_HOME=/data" "VLLM_USE_V2_MODEL_RUNNER=0"\n'
        '+Environment="HF_HOME=/data" "VLLM_USE_V2_MODEL_RUNNER=1"\n'
        " ExecStart=/opt/v/bin/vllm serve /m \\\n"
        f'-  --speculative-config "{escaped}" \\\n'
        f'+  --speculative-config "{escaped.replace("16", "15")}" \\\n'
        "   --port 8001\n Restart=on-failure\n"
    )


def test_dotted_keys_and_the_spec_tokens_shorthand() -> None:
    dotted = "vllm serve /m --speculative-config.method x --speculative_config.{}={}\n"
    diff = planned_diff(dotted.format("num_speculative_tokens", 16), "/s.sh", TOKENS_FIX)
    assert diff.endswith("+" + dotted.format("num_speculative_tokens", 15))
    # The dotted keys win over the JSON wherever it stands (argparse_utils.py 0.34.0:497-500):
    # a missing key is added as one more dotted word, the JSON is left alone.
    both = f"vllm serve /m --speculative-config.method dflash --speculative-config '{SPEC}'\n"
    assert planned_diff(both, "/s.sh", TOKENS_FIX).endswith(
        f"+vllm serve /m --speculative-config.method dflash --speculative-config '{SPEC}' "
        "--speculative-config.num_speculative_tokens 15\n"
    )
    short = "vllm serve /m --spec-method dflash --spec-model /d --spec-tokens 16\n"
    assert planned_diff(short, "/s.sh", TOKENS_FIX).endswith("--spec-tokens 15\n")


def test_unknown_keys_renamed_or_removed_inside_the_json() -> None:
    spec = '{"method":"dflash","num_speculative_token":15,"draft_tp":2}'
    text = f"vllm serve /m --speculative-config '{spec}'\n"
    fixes = [
        Edit("rename_key", "--speculative-config.num_speculative_token", "num_speculative_tokens"),
        Edit("remove_key", "--speculative-config.draft_tp"),
    ]
    out = edit_vllm_text(text, "script", fixes)
    assert out == text.replace("num_speculative_token", "num_speculative_tokens").replace(
        ',"draft_tp":2', ""
    )


def test_json_text_keeps_everything_else() -> None:
    text = '{ "method" : "dflash",\n  "num-speculative-tokens": 16 }'
    assert set_key(text, "num_speculative_tokens", "15") == text.replace("16", "15")
    assert set_key("{}", "a", "1") == '{"a": 1}'
    assert set_key('{"a": 1}', "b", "2") == '{"a": 1, "b": 2}'
    assert set_key('{"a":1}', "b", "2") == '{"a":1,"b":2}'
    assert remove_key('{"a": 1, "b": 2, "c": 3}', "b") == '{"a": 1, "c": 3}'
    assert remove_key('{"a": 1, "b": 2}', "b") == '{"a": 1}'
    assert remove_key('{"a": {"x": [1, "}"]}}', "a") == "{}"
    assert rename_key('{"a": 1}', "a", "b") == '{"b": 1}'
    with pytest.raises(FactError, match="twice"):
        set_key('{"a": 1, "a": 2}', "a", "3")
    with pytest.raises(FactError, match="both"):
        rename_key('{"a": 1, "b": 2}', "a", "b")


@pytest.mark.parametrize(
    ("text", "kind", "said"),
    [
        # The variable comes from somewhere the file does not say: a manual step.
        ("source /etc/v.env\nexec vllm serve /m -sc '{\"num_speculative_tokens\": 16}'\n",
         "script", "does not assign VLLM_USE_V2_MODEL_RUNNER"),
        ("[Service]\nEnvironmentFile=/etc/v.env\nExecStart=/v/vllm serve /m\n", "systemd",
         "sets no VLLM_USE_V2_MODEL_RUNNER"),
    ],
)  # fmt: skip
def test_variables_set_elsewhere_are_refused(text: str, kind: str, said: str) -> None:
    with pytest.raises(FactError, match=said):
        edit_vllm_text(text, kind, [Edit("set_env", RUNNER, "1")])


def test_a_key_that_would_not_read_back_is_refused() -> None:
    # systemd expands `$` and `%` in ExecStart=: a JSON holding them cannot be written safely.
    spec = json.dumps({"method": "dflash", "model": "/m/$HOME", "num_speculative_tokens": 16})
    text = f"[Service]\nExecStart=/v/vllm serve /m --speculative-config '{spec}'\n"
    with pytest.raises(FactError, match="into ExecStart= safely"):
        edit_vllm_text(text, "systemd", [Edit("set_key", TOKENS, "15")])
    # A key given twice is not edited around.
    key = '"num_speculative_tokens"'
    twice = f"vllm serve /m --speculative-config '{{{key}: 1, {key}: 2}}'\n"
    with pytest.raises(FactError, match="twice"):
        edit_vllm_text(twice, "script", [Edit("set_key", TOKENS, "15")])


def test_argv_edits() -> None:
    argv = ["vllm", "serve", "/m", "--speculative-config", SPEC, "--port", "1"]
    out = edit_vllm_argv(argv, [Edit("set_key", TOKENS, "15"), Edit("set_env", RUNNER, "1")])
    assert json.loads(out[4])["num_speculative_tokens"] == 15 and out[5:] == argv[5:]


def test_without_a_launch_file_the_edits_are_manual_steps() -> None:
    plan = plan_fixes(
        "h", results(TOKENS_FIX, RUNNER_FIX), source=None, source_text=None,
        source_launch=None, running=None, engine="vllm",
    )  # fmt: skip
    assert not plan.changes and not plan.edits
    assert plan.manual == [
        "DFD301: set num_speculative_tokens to 15 in --speculative-config",
        "DFD300: set VLLM_USE_V2_MODEL_RUNNER=1 where the launch sets it",
    ]
    assert any("give --launch FILE" in n for n in plan.notes)


def test_offline_fix_of_a_vllm_script_then_rollback(tmp_path: Path) -> None:
    """`fix --offline --launch` writes the edit (backed up), the gate's DFD301 then passes,
    `--rollback` restores the byte-identical file."""
    case = REPO / "fixtures/checks/DFD301/fires"
    shared = REPO / "fixtures/checks/_shared"
    (tmp_path / "deploy").mkdir()
    original = (case / "launch.sh").read_bytes()
    (tmp_path / "deploy/launch.sh").write_bytes(original)
    common = ["--drafter", str(shared / "kimi-k2.6-dflash"), "--target", str(shared / "kimi-k2.6")]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return doctor(*args, cwd=tmp_path, columns=None, timeout=60)

    def dfd301() -> str:
        p = run("gate", "deploy/launch.sh", *common, "--select", "DFD301", "--format", "json")
        (host,) = json.loads(p.stdout)["hosts"]
        return str(host["results"][0]["status"])

    assert dfd301() == "failed"
    p = run("fix", "--offline", "--launch", "deploy/launch.sh", *common, "--apply", "--yes")
    assert p.returncode == 0, p.stdout + p.stderr
    assert dfd301() == "passed"
    assert (tmp_path / "deploy/launch.sh").read_bytes() == original.replace(
        b'"num_speculative_tokens": 16}', b'"num_speculative_tokens": 15}'
    )
    p = run("fix", "--offline", "--launch", "deploy/launch.sh", *common, "--rollback", "--yes")
    assert p.returncode == 0 and (tmp_path / "deploy/launch.sh").read_bytes() == original


def test_a_vllm_unit_is_edited_by_the_vllm_source_and_restarted_by_systemd() -> None:
    """The fix loop carries a vLLM unit as its server command's words; the launch source
    it is edited, relaunched and described by is the vLLM one; the health wait asks vLLM's
    port (8000 unless `--port` says otherwise)."""
    unit = "/etc/systemd/system/vllm.service.d/override.conf"
    text = f"[Service]\nExecStart=\nExecStart=/v/bin/vllm serve /m --speculative-config '{SPEC}'\n"
    launch = parse_file(text.encode(), source=unit, path=unit, engine="vllm")
    assert launch.kind == "systemd" and launch.argv[:3] == ["/v/bin/vllm", "serve", "/m"]
    src = source_of(launch)
    assert isinstance(src, VllmUnit) and src.managed
    assert src.relaunch(unit, None) == [
        ["systemctl", "daemon-reload"],
        ["systemctl", "restart", "--", "vllm.service"],
    ]
    out = src.edit(text, launch, [Edit("set_key", TOKENS, "15")])
    assert out == text.replace(": 16}", ": 15}")
    applier = Applier(HostSpec.of("h"), LocalTransport("h"), health_timeout=1)
    assert applier.health_url(launch) == "http://127.0.0.1:8000/health"
    on_port = launch.model_copy(update={"argv": [*launch.argv, "--port", "8011"]})
    assert applier.health_url(on_port) == "http://127.0.0.1:8011/health"
    # An SGLang launch keeps SGLang's default port.
    sglang = launch.model_copy(update={"argv": ["python", "-m", "sglang.launch_server"]})
    assert applier.health_url(sglang) == "http://127.0.0.1:30000/health"


@pytest.mark.parametrize(
    "spec",
    [
        '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}",  # nested past any parser's stack
        '{"num_speculative_tokens": 16, "x": "' + "y" * 200_000 + '"}',  # a huge word
        '{"num_speculative_tokens": 16',  # truncated
        '{"num_speculative_tokens": 16}\udcff',  # not UTF-8 on the host
    ],
)
def test_hostile_json_words_are_one_line_refusals(spec: str) -> None:
    """What the fix loop reads first (the file's launch) and the edit itself each refuse
    with one line: no traceback, no recursion past the stack."""
    text = f"vllm serve /m --speculative-config '{spec}'\n"
    with pytest.raises(FactError) as err:
        parse_file(text.encode("utf-8", "surrogateescape"), source="s", path="s", engine="vllm")
    assert "\n" not in str(err.value) and len(str(err.value)) < 300
    if "\udcff" not in spec:
        with pytest.raises(FactError) as err:
            edit_vllm_text(text, "script", [Edit("set_key", TOKENS, "15")])
        assert "\n" not in str(err.value) and len(str(err.value)) < 300


@pytest.mark.parametrize(
    ("keys", "want"),
    [
        (["method", "num_spec_tokens", "draft_tp"],
         [("rename_key", "num_spec_tokens", "num_speculative_tokens"),
          ("remove_key", "draft_tp", None)]),
        # The key it resembles is given already: renaming would make a duplicate.
        (["num_spec_tokens", "num_speculative_tokens"], [("remove_key", "num_spec_tokens", None)]),
    ],
)  # fmt: skip
def test_dfd303_renames_one_slip_and_removes_the_rest(
    keys: list[str], want: list[tuple[str, str, str | None]]
) -> None:
    spec = VllmSpeculative(method="dflash", model="/d", keys=keys)
    launch = VllmLaunch(source="launch.sh", kind="script", speculative=spec)
    facts = HostFacts(
        host="h", engine=Fact.of("vllm"), vllm_launch=Fact.of(launch),
        vllm_version=Fact.of("0.34.0"),
    )  # fmt: skip
    (result,) = run_checks(facts, select=["DFD303"])
    fixes = [(f.action, (f.flag or "").split(".", 1)[1], f.value) for f in result.findings[0].fixes]
    assert fixes == want
