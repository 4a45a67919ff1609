"""The attention probe on CPU, on real-shaped drafter configs at reduced lengths."""

from __future__ import annotations

import json

import pytest

from dflash_doctor.errors import FactError
from dflash_doctor.facts.launch import parse_argv
from dflash_doctor.hosts import load_recorded_host
from dflash_doctor.kv_math import draft_kv
from dflash_doctor.probes.host import ProbeOptions, probe_host
from dflash_doctor.probes.runner import default_contexts, probe_spec, run_probe
from dflash_doctor.transport.local import LocalTransport
from tests.conftest import FIXTURE_HOSTS, KIMI_DRAFTER, QWEN4B_DRAFTER, drafter_cfg

WINDOW = 128  # the seed drafter's 2048 scaled down so a CPU run stays short


@pytest.fixture(scope="module")
def seed_result():  # type: ignore[no-untyped-def]
    cfg = drafter_cfg(KIMI_DRAFTER)
    launch = parse_argv(
        ["python", "-m", "sglang.launch_server", "--tp-size", "8", "--page-size", "64"],
        source="x",
        kind="script",
    )
    spec = probe_spec(
        cfg,
        json.loads(KIMI_DRAFTER.read_text()),
        contexts=[64, 96, 256, 512],
        window=WINDOW,
        launch=launch,
        device="cpu",
    )
    return cfg, launch, run_probe(LocalTransport("t"), spec, python=__import__("sys").executable)


def test_agreement_below_the_window(seed_result) -> None:  # type: ignore[no-untyped-def]
    _, _, r = seed_result
    assert r.self_check is not None and r.self_check.passed
    inside = [c for c in r.contexts if c.window_covers_context]
    assert [c.context for c in inside] == [64, 96]  # <= window - block (128 - 16)
    for c in inside:
        assert c.output.max_abs_diff <= r.self_check.tolerance
        assert c.top1_agreement == 1.0
        assert all(layer.max_abs_diff <= r.self_check.tolerance for layer in c.layers)


def test_divergence_above_the_window(seed_result) -> None:  # type: ignore[no-untyped-def]
    _, _, r = seed_result
    beyond = [c for c in r.contexts if not c.window_covers_context]
    assert [c.context for c in beyond] == [256, 512]
    for c in beyond:
        assert c.output.rel_l2 > 1e-2 and c.output.cosine < 0.9999
        # only sliding layers can differ at the first layer
        assert c.layers[0].type == "sliding_attention" and c.layers[0].rel_l2 > 0
    assert beyond[1].output.rel_l2 > beyond[0].output.rel_l2 * 0.8


def test_memory_formula_equals_measured_tensors(seed_result) -> None:  # type: ignore[no-untyped-def]
    cfg, _launch, r = seed_result
    for c in r.contexts:
        kv = draft_kv(cfg, context_tokens=c.context, window=WINDOW, page_size=64, tp_size=8)
        assert c.kv is not None
        assert c.kv.full_bytes_measured == kv.full_bytes == c.kv_formula_full_bytes
        assert c.kv.windowed_bytes_measured == kv.windowed_bytes == c.kv_formula_windowed_bytes
    assert r.contexts[-1].kv is not None
    assert r.contexts[-1].kv.windowed_tokens == WINDOW + 64  # a page of alignment slack


def test_full_attention_drafter_never_diverges() -> None:
    # The public z-lab Qwen3-4B drafter has no sliding layers: windowed == full everywhere.
    cfg = drafter_cfg(QWEN4B_DRAFTER)
    spec = probe_spec(
        cfg, json.loads(QWEN4B_DRAFTER.read_text()), contexts=[32, 512], window=64, device="cpu"
    )
    r = run_probe(LocalTransport("t"), spec, python=__import__("sys").executable)
    assert r.sliding_layers == []
    assert all(c.output.max_abs_diff == 0.0 for c in r.contexts)


def test_budget_skips_long_contexts() -> None:
    cfg = drafter_cfg(QWEN4B_DRAFTER)
    spec = probe_spec(
        cfg,
        json.loads(QWEN4B_DRAFTER.read_text()),
        contexts=[32, 1 << 22],
        window=64,
        device="cpu",
        budget_mib=1024,
    )
    r = run_probe(LocalTransport("t"), spec, python=__import__("sys").executable)
    assert [c.context for c in r.contexts] == [32]
    assert r.skipped_contexts[0].context == 1 << 22 and "budget" in r.skipped_contexts[0].reason


def test_default_contexts() -> None:
    assert default_contexts(2048) == [512, 2048, 4096, 8192, 16384]


def test_bad_probe_output_is_one_line() -> None:
    spec = probe_spec(drafter_cfg(QWEN4B_DRAFTER), {}, contexts=[8], device="cpu")
    with pytest.raises(FactError, match="probe output invalid"):
        run_probe(LocalTransport("t"), spec, python="/bin/echo")
    with pytest.raises(FactError, match="probe failed: KeyError"):
        run_probe(LocalTransport("t"), dict(spec, config={}), python=__import__("sys").executable)


def test_probe_over_ssh(sshd, ssh_options) -> None:  # type: ignore[no-untyped-def]
    spec = load_recorded_host(str(FIXTURE_HOSTS / "v0523")).model_copy(
        update={"address": sshd.address}
    )
    r = probe_host(spec, ProbeOptions(contexts=[16, 256], window=64, device="cpu"), ssh=ssh_options)
    assert r.device == "cpu" and [c.context for c in r.contexts] == [16, 256]
    assert r.self_check is not None  # the Qwen3-4B drafter has no sliding layers
    assert r.sliding_layers == []


def test_check_with_probe_puts_numbers_in_findings() -> None:
    """The probe feeds DFD103, the span finding (the seed on 0.5.13, dflash.py 0.5.13:116-122)."""
    from dflash_doctor.demo import demo_host
    from dflash_doctor.pipeline import check_host

    report = check_host(
        demo_host(), ["DFD103"], probe=ProbeOptions(contexts=[64, 512], window=WINDOW, device="cpu")
    )
    (finding,) = report.findings
    assert finding.impact["probe_context_tokens"] == 512
    assert float(finding.impact["probe_rel_l2_full_vs_windowed"]) > 1e-2
    assert any(e.text.startswith("probe on cpu (window 128)") for e in finding.evidence)


def test_plot_png(tmp_path) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("matplotlib")
    import subprocess
    import sys

    from tests.conftest import REPO

    out = tmp_path / "probe.png"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "dflash_doctor",
            "probe",
            "--host-dir",
            str(FIXTURE_HOSTS / "v0523"),
            "--contexts",
            "16,128",
            "--window",
            "64",
            "--device",
            "cpu",
            "--plot",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_budget_default_matches_the_script() -> None:
    from dflash_doctor.probes import attention_probe, runner

    assert runner.DEFAULT_BUDGET_MIB == attention_probe.DEFAULT_BUDGET_MIB


def test_cli_does_not_import_torch() -> None:
    import subprocess
    import sys

    code = "import sys, dflash_doctor.cli; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def write_safetensors(path, tensors) -> None:  # type: ignore[no-untyped-def]
    """The safetensors layout: 8-byte header length, JSON header, raw little-endian data."""
    import struct

    import torch

    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        data = t.to(torch.bfloat16).contiguous().view(torch.uint16).numpy().tobytes()
        header[name] = {
            "dtype": "BF16",
            "shape": list(t.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        blobs.append(data)
        offset += len(data)
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"".join(blobs))


def test_real_weights_are_read_from_safetensors(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import torch

    config = {
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 32,
        "hidden_size": 128,
        "use_sliding_window": True,
        "sliding_window": 64,
        "layer_types": ["sliding_attention", "full_attention"],
        "vocab_size": 1000,
        "rope_theta": 10000.0,
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    gen = torch.Generator().manual_seed(7)
    tensors = {}
    for i in range(2):
        for name, shape in (
            ("q_proj", (128, 128)),
            ("k_proj", (64, 128)),
            ("v_proj", (64, 128)),
            ("o_proj", (128, 128)),
        ):
            tensors[f"layers.{i}.self_attn.{name}.weight"] = (
                torch.randn(*shape, generator=gen) * 0.3
            )
        tensors[f"layers.{i}.self_attn.k_norm.weight"] = torch.ones(32) * 2
    write_safetensors(tmp_path / "model.safetensors", tensors)
    cfg = drafter_cfg(tmp_path / "config.json")
    python = __import__("sys").executable
    spec = probe_spec(
        cfg, config, contexts=[32, 256], device="cpu", weights="real", weights_dir=str(tmp_path)
    )
    real = run_probe(LocalTransport("t"), spec, python=python)
    assert real.weights == "real" and real.self_check is not None and real.self_check.passed
    rand = run_probe(
        LocalTransport("t"),
        probe_spec(cfg, config, contexts=[32, 256], device="cpu"),
        python=python,
    )
    assert real.contexts[1].output.rel_l2 != rand.contexts[1].output.rel_l2
    del tensors["layers.1.self_attn.o_proj.weight"]
    write_safetensors(tmp_path / "model.safetensors", tensors)
    with pytest.raises(FactError, match="safetensors lack 1 tensors"):
        run_probe(
            LocalTransport("t"),
            probe_spec(
                cfg, config, contexts=[32], device="cpu", weights="real", weights_dir=str(tmp_path)
            ),
            python=python,
        )


def test_fp8_kv_cache_measured_equals_formula() -> None:
    cfg = drafter_cfg(QWEN4B_DRAFTER)
    launch = parse_argv(
        ["python", "-m", "sglang.launch_server", "--kv-cache-dtype", "fp8_e4m3", "--tp-size", "2"],
        source="x",
        kind="script",
    )
    spec = probe_spec(
        cfg,
        json.loads(QWEN4B_DRAFTER.read_text()),
        contexts=[32, 256],
        window=64,
        launch=launch,
        device="cpu",
    )
    r = run_probe(LocalTransport("t"), spec, python=__import__("sys").executable)
    for c in r.contexts:
        assert c.kv is not None
        assert c.kv.full_bytes_measured == c.kv_formula_full_bytes
        assert c.kv.windowed_bytes_measured == c.kv_formula_windowed_bytes
    # 5 layers x 2 (K, V) x 4 kv heads per GPU (8 over TP 2) x 128 x 1 byte, 256 tokens
    assert (
        r.contexts[1].kv is not None
        and r.contexts[1].kv.full_bytes_measured == 5 * 2 * 4 * 128 * 256
    )
