"""Impact rows read as words with units: every code-spelled impact key a check emits on the
recorded hosts has a label, and the terminal report shows the label, never the key."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from dflash_doctor.checks.impact_labels import CODE_KEY, IMPACT_LABELS, impact_label
from dflash_doctor.demo import demo_host
from dflash_doctor.hosts import load_recorded_host
from dflash_doctor.pipeline import check_host
from dflash_doctor.render.terminal import render_terminal
from dflash_doctor.report import build_report
from tests.conftest import FIXTURE_HOSTS


def test_labels_are_words() -> None:
    for key, label in IMPACT_LABELS.items():
        assert CODE_KEY.match(key), key
        assert not CODE_KEY.match(label) and "_" not in label and label[0].isupper(), label
        assert " " in label, label
    assert impact_label("Trained window (tokens)") == "Trained window (tokens)"


@pytest.mark.parametrize("host", ["seed", "v0523-demo", "v0511", "v0513", "v0523", "tuned"])
def test_every_emitted_code_key_has_a_label(host: str) -> None:
    spec = (
        demo_host()
        if host == "seed"
        else demo_host("v0523")
        if host == "v0523-demo"
        else load_recorded_host(str(FIXTURE_HOSTS / host))
    )
    report = check_host(spec)
    keys = {k for f in report.findings for k in f.impact}
    assert {k for k in keys if CODE_KEY.match(k) and k not in IMPACT_LABELS} == set()
    buf = io.StringIO()
    render_terminal(build_report([report]), Console(file=buf, width=100, color_system=None))
    for key in keys:
        if CODE_KEY.match(key):
            assert f"{key}:" not in buf.getvalue()
            assert f"{IMPACT_LABELS[key]}:" in buf.getvalue()
