"""Parsing with the host's own SGLang parser (the stand-in `sglang` package provides one)."""

from __future__ import annotations

import sys

import pytest

from dflash_doctor.checks import CATALOG
from dflash_doctor.gather import Gatherer
from dflash_doctor.hosts import HostSpec
from dflash_doctor.runner import run_check
from dflash_doctor.transport.local import LocalTransport
from tests.conftest import REPO, drafter_cfg, host_facts, launch

FAKE = str(REPO / "fixtures" / "fake_sglang")


def native(monkeypatch: pytest.MonkeyPatch, version: str, *flags: str, with_sglang: bool = True):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("FAKE_SGLANG_VERSION", version)
    g = Gatherer(HostSpec(name="h"), LocalTransport("h"))
    if with_sglang:
        g.environ["PYTHONPATH"] = FAKE
    args = launch(*flags).model_copy(update={"python": sys.executable})
    return g, g.native(args)


def test_own_parser_resolves_abbreviations(monkeypatch: pytest.MonkeyPatch) -> None:
    g, args = native(monkeypatch, "0.5.23", "--speculative-draft-window", "2048")
    assert (args.parser, args.parser_version, g.native_version) == ("sglang", "0.5.23", "0.5.23")
    assert args.draft_window_flag == "--speculative-draft-window-size"
    assert args.draft_window_size == 2048 and args.page_size == 1  # SGLang's own default
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


def test_without_sglang_the_fallback_stands(monkeypatch: pytest.MonkeyPatch) -> None:
    g, args = native(monkeypatch, "0.5.23", "--speculative-draft-window", "2048", with_sglang=False)
    assert args.parser == "fallback" and g.native_version is None
    assert args.draft_window_size is None  # the fallback does not guess abbreviations
    r = run_check(CATALOG["DFD110"], host_facts(launch_args=args))
    assert r.status == "skipped"
