"""Parsing with the host's own SGLang parser (the stand-in `sglang` package provides one)."""

from __future__ import annotations

import os
import sys

import pytest

from dflash_doctor.checks import CATALOG
from dflash_doctor.finders.launch import ask_sglang
from dflash_doctor.host_exec import HostExec
from dflash_doctor.hosts import HostSpec
from dflash_doctor.runner import run_check
from dflash_doctor.transport.local import LocalTransport
from fixtures.stand_in import stand_in_init
from tests.conftest import REPO, drafter_cfg, host_facts, launch

FAKE = str(REPO / "fixtures" / "fake_sglang")


_SITES: dict[str, str] = {}


def installed(version: str) -> str:
    """A stand-in `sglang` of that version installed in a directory of its own, as a host
    has it. (The host's interpreter runs with a clean environment (host_exec), so the
    doctor's FAKE_SGLANG_VERSION never reaches it.)"""
    if version not in _SITES:
        import shutil
        import tempfile

        site = os.path.join(tempfile.mkdtemp(prefix="fake-sglang-"), "site")
        shutil.copytree(FAKE, site, ignore=shutil.ignore_patterns("__pycache__"))
        with open(os.path.join(site, "sglang", "__init__.py"), "w") as f:
            f.write(stand_in_init(version))
        _SITES[version] = site
    return _SITES[version]


def native(monkeypatch: pytest.MonkeyPatch, version: str, *flags: str, with_sglang: bool = True):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("FAKE_SGLANG_VERSION", version)
    t = LocalTransport("h")
    env = {"PYTHONPATH": installed(version)} if with_sglang else {}
    args = launch(*flags).model_copy(update={"python": sys.executable})
    # (the version the host's SGLang reported, the launch as it parsed it)
    return ask_sglang(t, HostExec(t, HostSpec.of(name="h")), args, args.python, None, env)[::-1]


def test_own_parser_resolves_abbreviations(monkeypatch: pytest.MonkeyPatch) -> None:
    reported, args = native(monkeypatch, "0.5.23", "--speculative-draft-window", "2048")
    assert (args.parser, args.parser_version, reported) == ("sglang", "0.5.23", "0.5.23")
    assert args.draft_window_flag == "--speculative-draft-window-size"
    # SGLang's own default: page_size is None until ServerArgs resolves it
    # (srt/server_args.py:377 `page_size: Optional[int] = None` in 0.5.11; the same in 0.5.23)
    assert args.draft_window_size == 2048 and args.page_size is None
    facts = host_facts(drafter=drafter_cfg(), launch_args=args)
    # the resolved window is seen: on 0.5.23 it clamps the drafter's full layer 5 (DFD130)
    assert run_check(CATALOG["DFD130"], facts).status == "failed"
    assert run_check(CATALOG["DFD110"], facts).status == "passed"


def test_own_parser_says_which_spellings_exist(monkeypatch: pytest.MonkeyPatch) -> None:
    _, args = native(monkeypatch, "0.5.23", "--speculative-dflash-draft-window-size", "2048")
    assert args.accepted_window_flags == ["--speculative-draft-window-size"]
    assert args.unknown_args == ["--speculative-dflash-draft-window-size"]
    # version unknown to the tool: SGLang's own parser still decides DFD104
    r = run_check(CATALOG["DFD104"], host_facts(launch_args=args, version=None))
    assert r.status == "failed" and "its own parser" in r.findings[0].title
    assert r.findings[0].fixes[0].flag == "--speculative-draft-window-size"
    # DFD110 leaves the window flag to DFD104
    assert run_check(CATALOG["DFD110"], host_facts(launch_args=args)).status == "passed"


def test_unknown_flags_are_rejected_by_sglang(monkeypatch: pytest.MonkeyPatch) -> None:
    _, args = native(monkeypatch, "0.5.11", "--enable-dflash-magic", "--page-size", "64")
    r = run_check(CATALOG["DFD110"], host_facts(launch_args=args))
    (finding,) = r.findings
    assert "--enable-dflash-magic" in finding.message
    assert (
        finding.fixes[0].action == "remove_flag"
        and finding.fixes[0].flag == "--enable-dflash-magic"
    )


def test_stand_in_refuses_what_the_release_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stand-in parses from the option data: 0.5.23 refuses --cuda-graph-max-bs as an
    ambiguous prefix (no alias after 0.5.19 srt/server_args.py:3928), and the error carries
    prepare_server_args' prog `sglang serve` (srt/server_args.py:679 in 0.5.23)."""
    _, args = native(monkeypatch, "0.5.23", "--cuda-graph-max-bs", "32")
    assert args.sglang_rejects is not None
    assert args.sglang_rejects.startswith("sglang")
    assert "ambiguous option: --cuda-graph-max-bs could match" in args.sglang_rejects
    _, args = native(monkeypatch, "0.5.19", "--cuda-graph-max-bs", "32")
    assert args.sglang_rejects is None and args.cuda_graph_max_bs == 32


def test_stand_in_prints_sglang_deprecation_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """arg_groups/argparse_actions.py DeprecatedAliasStoreAction (0.5.13-0.5.19): the
    warning, in yellow, on stderr; `sglang serve: error:` for what the release refuses."""
    import subprocess

    def run(version: str, *flags: str) -> subprocess.CompletedProcess[str]:
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": FAKE, "FAKE_SGLANG_VERSION": version}
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "sglang.launch_server",
                "--model-path",
                "m",
                *flags,
                "--no-such",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )

    p = run("0.5.19", "--mamba-scheduler-strategy", "no_buffer")
    assert (
        "\x1b[1;33m'--mamba-scheduler-strategy' is deprecated and will be removed in a future "
        "release. Use '--mamba-radix-cache-strategy' instead.\x1b[0m" in p.stderr
    )
    p = run("0.5.23", "--mamba-scheduler-strategy", "no_buffer")
    assert p.returncode == 2
    assert p.stderr.strip().splitlines()[-1] == (
        "sglang serve: error: unrecognized arguments: --mamba-scheduler-strategy no_buffer "
        "--no-such"
    )


def test_without_sglang_the_fallback_stands(monkeypatch: pytest.MonkeyPatch) -> None:
    reported, args = native(
        monkeypatch, "0.5.23", "--speculative-draft-window", "2048", with_sglang=False
    )
    assert args.parser == "fallback" and reported is None
    assert args.draft_window_size is None  # the fallback does not guess abbreviations
    r = run_check(CATALOG["DFD110"], host_facts(launch_args=args))
    assert r.status == "skipped"
