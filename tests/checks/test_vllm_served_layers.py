"""DFD310: each DFlash draft layer as the running vLLM serves it, against what its config
declares it was trained with. The served side is checked against vLLM's own
`_resolve_layer_attention` compiled from the wheels at both ends of the releases read."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from dflash_doctor.checks.vllm_served_layers import IS_CAUSAL_READ
from dflash_doctor.facts.models import DrafterConfig, HostFacts
from dflash_doctor.runner import run_checks
from tests.checks.test_vllm_rules import drafter, facts
from tests.facts.test_vllm_drafter import vllm_resolver

WHEELS = Path("/work/wheels/vllm/src")
S, F = "sliding_attention", "full_attention"
ENDS = ("0.27.1", "0.34.0")


def kimi(**kw: object) -> DrafterConfig:
    """Five sliding layers of 2048 and one full one, as z-lab's mixed drafters."""
    base: dict[str, object] = {
        "num_hidden_layers": 6,
        "layer_types": [S] * 5 + [F],
        "sliding_window": 2048,
        "use_sliding_window": True,
    }
    return drafter(**(base | kw))


def judged(f: HostFacts) -> tuple[str, str, list[str]]:
    (result,) = run_checks(f, select=["DFD310"])
    if not result.findings:
        return result.status, "", []
    finding = result.findings[0]
    return result.status, finding.message, [e.text for e in finding.evidence]


@pytest.mark.parametrize("version", [*ENDS, None])
def test_stale_swa_window_is_served_over_sliding_window(version: str | None) -> None:
    status, message, evidence = judged(facts(version, kimi(swa_window_size=4096)))
    assert status == "failed"
    assert "layer(s) 0-4 trained over 2048 tokens are served 4096 tokens" in message
    assert any(
        "layers 0-4 (sliding_attention): trained 2048 tokens, served 4096 tokens" in t
        and "layer 5 (full_attention): trained the whole context, served the whole context" in t
        for t in evidence
    )


@pytest.mark.parametrize(
    "cfg",
    [
        kimi(),
        kimi(swa_window_size=2048),  # both keys agree
        drafter(layer_types=[F] * 5),  # standard DFlash: all full
        # MiMo style: use_swa with its window and no sliding layer type: every layer sliding
        drafter(dflash_use_swa=True, swa_window_size=128, layer_types_source="class_default"),
        kimi(is_causal_declared=False, dflash_causal=False),
    ],
)
@pytest.mark.parametrize("version", ENDS)
def test_served_as_declared(version: str, cfg: DrafterConfig) -> None:
    assert judged(facts(version, cfg))[0] == "passed"


@pytest.mark.parametrize(
    ("version", "status"),
    [("0.27.1", "failed"), ("0.28.0", "passed"), ("0.34.0", "passed")],
)
def test_is_causal_read_from_0_28(version: str, status: str) -> None:
    """`is_causal: true` alone: 0.27.1 serves the full layer bidirectional in the block."""
    got, message, evidence = judged(facts(version, kimi(is_causal_declared=True)))
    assert got == status
    if status == "failed":
        assert "layer(s) 5 are served with the other causality" in message
        assert any(
            "layer 5 (full_attention): trained the whole context, causal" in t for t in evidence
        )


def test_refusal_is_left_to_dfd302() -> None:
    cfg = kimi(sliding_window=None)
    (result,) = run_checks(facts("0.34.0", cfg), select=["DFD310"])
    assert (result.status, result.unjudged) == ("skipped", True)
    assert "requires a window size" in (result.reason or "")


def _served_by_vllm(version: str, cfg: DrafterConfig) -> list[tuple[int | None, bool]]:
    """Each layer as vLLM's own resolver of that release builds it."""
    resolve = vllm_resolver(version)
    hf: Any = SimpleNamespace(
        layer_types=cfg.layer_types,
        sliding_window=cfg.effective_sliding_window,
        dflash_config={"swa_window_size": cfg.swa_window_size}
        if cfg.swa_window_size is not None
        else {},
        num_hidden_layers=cfg.num_hidden_layers,
    )
    if cfg.is_causal_declared is not None:
        hf.is_causal = cfg.is_causal_declared
    return [resolve(hf, i) for i in range(cfg.num_hidden_layers)]


@pytest.mark.skipif(not WHEELS.is_dir(), reason="vLLM wheels not unpacked")
@pytest.mark.parametrize("version", ENDS)
def test_table_is_what_vllm_builds(version: str) -> None:
    """The served column of the evidence is vLLM's own resolver's answer."""
    cfg = kimi(swa_window_size=4096, is_causal_declared=True)
    built = _served_by_vllm(version, cfg)
    _, _, evidence = judged(facts(version, cfg))
    (table,) = [t for t in evidence if t.startswith("layer")]
    shown = served_column(table)
    for i, (window, causal) in enumerate(built):
        span = "the whole context" if window is None else f"{window} tokens"
        kind = "causal" if causal else "bidirectional in the block"
        assert shown[i] == f"{span}, {kind}", (i, table)


def served_column(table: str) -> dict[int, str]:
    """Layer -> its served text, from the folded rows (`layers 0-4, 6 (kind): ...`)."""
    shown: dict[int, str] = {}
    for row in table.split("; "):
        m = re.fullmatch(r"layers? ([0-9, -]+) \(\w+\): trained .*?, served (.*)", row)
        assert m is not None, row
        for part in m.group(1).split(", "):
            lo, _, hi = part.partition("-")
            for i in range(int(lo), int(hi or lo) + 1):
                shown[i] = m.group(2)
    return shown


@pytest.mark.skipif(not WHEELS.is_dir(), reason="vLLM wheels not unpacked")
def test_is_causal_release_from_the_wheels() -> None:
    """IS_CAUSAL_READ is the first release whose `_dflash_layer_causal` reads is_causal."""
    reading = sorted(
        tuple(int(p) for p in d.name.split("."))
        for d in WHEELS.iterdir()
        if 'getattr(config, "is_causal"'
        in (d / "vllm/model_executor/models/qwen3_dflash.py").read_text()
    )
    assert reading[0] == IS_CAUSAL_READ


@pytest.mark.parametrize(
    ("version", "value", "status", "says"),
    [
        # the V1 runner serves an all-sliding drafter: judged, and the runner is named
        ("0.27.1", "0", "failed", "runner: V1 (VLLM_USE_V2_MODEL_RUNNER=0)"),
        ("0.33.0", "1", "failed", "runner: V2 (VLLM_USE_V2_MODEL_RUNNER=1)"),
        ("0.34.0", None, "failed", "runner: V2 (the only one from 0.34.0)"),
        ("0.34.0", "0", "skipped", "refuses VLLM_USE_V2_MODEL_RUNNER=0 (DFD300)"),
    ],
)
def test_runner_named_or_refusal_left_to_dfd300(
    version: str, value: str | None, status: str, says: str
) -> None:
    cfg = kimi(layer_types=[S] * 6, swa_window_size=4096)
    environ = {"VLLM_USE_V2_MODEL_RUNNER": value} if value is not None else None
    (result,) = run_checks(facts(version, cfg, environ=environ), select=["DFD310"])
    assert result.status == status
    shown = [e.text for f in result.findings for e in f.evidence] + [result.reason or ""]
    assert any(says in t for t in shown), shown


@pytest.mark.parametrize("version", ["0.27.1", "0.33.0"])
def test_mixed_drafter_on_v1_is_dfd300s(version: str) -> None:
    environ = {"VLLM_USE_V2_MODEL_RUNNER": "0"}
    cfg = kimi(swa_window_size=4096)
    (result,) = run_checks(facts(version, cfg, environ=environ), select=["DFD310"])
    assert (result.status, result.reason) == (
        "skipped",
        "the V1 runner refuses this mixed sliding/full drafter (DFD300)",
    )
