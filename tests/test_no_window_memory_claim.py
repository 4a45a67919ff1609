"""No report, in any format, claims that the draft window reduces draft KV memory.

SGLang allocates the draft KV pool with one slot per target token in every release: the
draft worker keeps "a private compact req->token table over the same global KV index space"
(speculative/dflash_worker.py 0.5.11:87-98, dflash_worker_v2.py 0.5.14:284-291), and pool
sizing has no window term (model_executor/pool_configurator.py 0.5.11:95-111, 0.5.18:86-232).
"""

from __future__ import annotations

import re

import pytest

from tests.conftest import FIXTURE_HOSTS, REPO
from tests.test_cli import run as cli

HOSTS = ["tuned", "v0511", "v0513", "v0523"]
# A sentence that ties the window to less memory ...
CLAIM = re.compile(
    r"window[^.;\n]{0,80}?\b(?P<verb>sav\w*|reduc\w*|free\w*|cut\w*|shrink\w*|smaller|less|"
    r"wast\w*|keeps? only|would hold|holds?)\b[^.;\n]{0,60}\b(memory|KV|GiB|MiB|bytes)\b",
    re.IGNORECASE,
)
# ... unless the verb itself is negated ("saves no", "does not", "wrongly promised").
NEGATION = re.compile(r"\b(no|not|cannot|never|nothing|without)\b", re.IGNORECASE)
KEYS = re.compile(r"draft_kv_(windowed|saved)|saved_gib|windowed_gib")


def claims(text: str) -> list[str]:
    found = [m.group(0) for m in KEYS.finditer(text)]
    for sentence in re.split(r"(?<=[.;])\s+|\n{2,}", text):
        flat = re.sub(r"(\d)\.(\d)", r"\1\2", " ".join(sentence.split()))  # 0.2 GiB
        for m in CLAIM.finditer(flat):
            near = flat[max(0, m.start("verb") - 12) : m.end("verb") + 10]
            if not NEGATION.search(near):
                found.append(flat)
    return found


def run(*args: str) -> str:
    p = cli(*args)
    assert p.returncode in (0, 1), p.stderr
    return p.stdout


def test_the_detector_catches_the_old_claims() -> None:
    """The wording DFD101/DFD108 used before issue 9, and their impact keys."""
    assert claims("With a 2048-token draft window it would hold 0.2 GiB.")
    assert claims("A larger window keeps KV the drafter never attends to, wasting GPU memory.")
    assert claims('"draft_kv_saved_gib_per_request_per_gpu": 1.2')
    assert not claims("The draft window saves no KV memory.")
    assert not claims("a draft window does not change it")


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_no_check_report_claims_the_window_saves_memory(fmt: str) -> None:
    hosts = [a for h in HOSTS for a in ("--host-dir", str(FIXTURE_HOSTS / h))]
    out = run("check", "--demo", "--demo-host", "v0523", *hosts, "--format", fmt)
    assert "DFD103" in out and "DFD131" in out  # the seed's span error and the memory report
    assert claims(out) == []


@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "junit"])
def test_no_gate_report_claims_it(fmt: str) -> None:
    """SARIF carries every check's documentation as rule help: that is covered too."""
    seed = "dflash_doctor/demo_hosts/seed"
    target = next((REPO / seed / "data/hf/hub").rglob("config.json")).parent
    out = run(
        "gate",
        f"{seed}/etc/sglang/launch.sh",
        "--drafter",
        f"{seed}/models/Kimi-K2.6-DFlash",
        "--target",
        str(target),
        "--sglang-version",
        "0.5.13",
        "--format",
        fmt,
    )
    assert "DFD103" in out
    assert claims(out) == []


def test_no_explain_page_claims_it() -> None:
    from dflash_doctor.checks import CATALOG

    for cid in [*CATALOG, "DFD101", "DFD108"]:  # retired ids too
        assert claims(run("explain", cid)) == [], cid
