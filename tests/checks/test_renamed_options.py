"""DFD140: launch options the release renamed, deprecated or removed (data from the wheels)."""

from __future__ import annotations

import pytest

from dflash_doctor.checks import CATALOG
from dflash_doctor.checks.base import CheckResult
from dflash_doctor.facts.launch import parse_script
from dflash_doctor.fix.plan import plan_fixes
from dflash_doctor.runner import run_check
from tests.conftest import host_facts, launch

DFD140 = CATALOG["DFD140"]


def result(version: str | None, *flags: str) -> CheckResult:
    return run_check(DFD140, host_facts(launch_args=launch(*flags), version=version))


def test_cuda_graph_max_bs_clean_before_0_5_14() -> None:
    """0.5.13 srt/server_args.py:6506: --cuda-graph-max-bs is the option itself."""
    assert result("0.5.13.post1", "--cuda-graph-max-bs", "32").status == "passed"


@pytest.mark.parametrize("version", ["0.5.14", "0.5.19"])
def test_cuda_graph_max_bs_deprecated_0_5_14_to_0_5_19(version: str) -> None:
    """DeprecatedAliasStoreAction(new_flag="--cuda-graph-max-bs-decode"):
    0.5.14 srt/server_args.py:6358 ... 0.5.19 srt/server_args.py:3928."""
    (f,) = result(version, "--cuda-graph-max-bs", "32").findings
    assert f.severity == "warning" and "deprecated" in f.title
    assert "Use '--cuda-graph-max-bs-decode' instead." in f.message
    assert "the last release that accepts it is 0.5.19" in f.message
    fix = f.fixes[0]
    assert (fix.action, fix.flag, fix.replaces) == (
        "replace_flag",
        "--cuda-graph-max-bs-decode",
        "--cuda-graph-max-bs",
    )


@pytest.mark.parametrize("version", ["0.5.20", "0.5.23"])
def test_cuda_graph_max_bs_refused_from_0_5_20(version: str) -> None:
    """0.5.20 has only --cuda-graph-max-bs-decode / -prefill: argparse's prefix match makes
    --cuda-graph-max-bs ambiguous (alias last at 0.5.19 srt/server_args.py:3928)."""
    (f,) = result(version, "--cuda-graph-max-bs", "32").findings
    assert f.severity == "error" and "refuses" in f.title
    assert "ambiguous option: --cuda-graph-max-bs could match" in f.message
    assert f.fixes[0].flag == "--cuda-graph-max-bs-decode"
    # DFD110 leaves it to DFD140 (no second, manual fix for the same option)
    from dflash_doctor.facts.launch import replay_launch

    replayed = replay_launch(launch("--cuda-graph-max-bs", "32"), version)
    assert replayed.sglang_rejects is not None
    assert run_check(CATALOG["DFD110"], host_facts(launch_args=replayed)).status == "passed"


@pytest.mark.parametrize(
    ("version", "status"), [("0.5.13", "passed"), ("0.5.14", "failed"), ("0.5.23", "failed")]
)
def test_mamba_scheduler_strategy(version: str, status: str) -> None:
    """Plain option in 0.5.13 (srt/server_args.py:6224); alias of --mamba-radix-cache-strategy
    0.5.14 (srt/server_args.py:6349) to 0.5.19 (:3919); unrecognized from 0.5.20."""
    r = result(version, "--mamba-scheduler-strategy", "no_buffer")
    assert r.status == status
    if r.findings:
        assert r.findings[0].fixes[0].flag == "--mamba-radix-cache-strategy"


def test_window_spelling_is_left_to_dfd104() -> None:
    """--speculative-dflash-draft-window-size: alias 0.5.13-0.5.19 (0.5.13
    srt/server_args.py:5921), removed 0.5.20; DFD104 owns the window flag."""
    for version in ("0.5.13", "0.5.23"):
        r = result(version, "--speculative-dflash-draft-window-size", "2048")
        assert r.status == "passed"


def test_hint_that_is_not_a_flag_is_a_manual_fix() -> None:
    """--disable-cuda-graph: DeprecatedStoreTrueAction(new_flag=
    "--cuda-graph-backend-{decode,prefill}=disabled") from 0.5.14 (srt/server_args.py:6375)."""
    assert result("0.5.13", "--disable-cuda-graph").status == "passed"
    (f,) = result("0.5.23", "--disable-cuda-graph").findings
    assert f.fixes[0].action == "manual" and "{decode,prefill}" in (f.fixes[0].note or "")


def test_abbreviation_of_a_deprecated_alias() -> None:
    """argparse resolves `--mamba-scheduler` to the alias in 0.5.19 (allow_abbrev)."""
    (f,) = result("0.5.19", "--mamba-scheduler", "no_buffer").findings
    assert f.fixes[0].replaces == "--mamba-scheduler"


def test_new_flag_already_set_removes_the_old_one() -> None:
    r = result("0.5.19", "--cuda-graph-max-bs", "8", "--cuda-graph-max-bs-decode", "16")
    assert r.findings[0].fixes[0].action == "remove_flag"


def test_versions_outside_the_data() -> None:
    assert result("0.5.10", "--cuda-graph-max-bs", "32").status == "skipped"
    (f,) = result("0.5.30", "--cuda-graph-max-bs", "32").findings
    assert "newer than the option data" in f.message
    assert result("0.5.23", "--tp-size", "2").status == "passed"


def test_fix_rewrites_the_launch_script() -> None:
    text = (
        "python -m sglang.launch_server --model-path m \\\n"
        "  --cuda-graph-max-bs 32 \\\n"
        "  --mamba-scheduler-strategy no_buffer\n"
    )
    args = parse_script(text.encode(), source="s.sh")
    r = run_check(DFD140, host_facts(launch_args=args, version="0.5.23"))
    plan = plan_fixes("h", [r], source="s.sh", source_text=text, source_launch=args, running=None)
    assert plan.new_text == (
        "python -m sglang.launch_server --model-path m \\\n"
        "  --cuda-graph-max-bs-decode 32 \\\n"
        "  --mamba-radix-cache-strategy no_buffer\n"
    )


def test_option_set_in_the_config_yaml() -> None:
    """`--config FILE.yaml`: the merger turns each key into `--key`
    (srt/utils/server_args_config_parser.py `_add_scalar_arg`, 0.5.19): a renamed key is
    reported against the file, with a manual rename (the launch line is not where it is)."""
    from dflash_doctor.facts.launch import replay_launch

    files = {"/etc/sglang/c.yaml": b"mamba-scheduler-strategy: no_buffer\n"}
    args = replay_launch(launch("--config", "/etc/sglang/c.yaml"), "0.5.19", read=files.__getitem__)
    assert args.config_options == {"--mamba-scheduler-strategy": "/etc/sglang/c.yaml"}
    (f,) = run_check(DFD140, host_facts(launch_args=args, version="0.5.19")).findings
    assert f.fixes[0].action == "manual"
    assert f.fixes[0].note == (
        "in /etc/sglang/c.yaml, rename the key mamba-scheduler-strategy to "
        "mamba-radix-cache-strategy"
    )
    assert f.evidence[0].file == "/etc/sglang/c.yaml"
