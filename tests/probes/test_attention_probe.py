"""The attention probe on CPU: served vs trained spans on real-shaped drafters, reduced lengths.

The spans come from SGLang's behaviour (see tests/probes/test_scenarios.py for file:line):
0.5.11-0.5.13 serve every layer over the whole context (0.5.13 srt/models/dflash.py:115-123);
0.5.14+ keep each sliding layer's window (0.5.14 srt/models/dflash.py:44-66); the draft
window flag clamps every layer to the page-aligned last N tokens (0.5.11
speculative/dflash_worker.py:423-439). The draft KV pool has one slot per target token in
every release (0.5.11 speculative/dflash_worker.py:88-98: the draft shares the target's
token_to_kv_pool_allocator), so the probe reports only that full size.

Previously the probe compared one fixed "windowed" vs "full" pair and allocated a windowed
draft KV cache; those expectations (window_covers_context, kv.windowed_bytes_measured) are
gone with that measurement.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dflash_doctor.errors import FactError
from dflash_doctor.facts.probe_result import ProbeResult
from dflash_doctor.hosts import load_recorded_host
from dflash_doctor.probes.host import ProbeOptions, probe_host
from dflash_doctor.probes.runner import default_contexts, probe_spec, run_probe
from dflash_doctor.transport.local import LocalTransport
from tests.conftest import FIXTURE_HOSTS, KIMI_DRAFTER, QWEN4B_DRAFTER, REPO, drafter_cfg

WINDOW = 128  # the seed drafter's 2048 scaled down so a CPU run stays short
TOKENS = 64  # draft tokens per scenario: enough for these checks, cheap on CPU
KIMI = json.loads(KIMI_DRAFTER.read_text())


def kimi(**kw: Any) -> ProbeResult:
    """The seed drafter (5 sliding layers + 1 full), TP 8, page 64, reduced window."""
    kw.setdefault("agreement_tokens", TOKENS)
    spec = probe_spec(
        drafter_cfg(KIMI_DRAFTER), KIMI, window=WINDOW, tp_size=8, page_size=64, device="cpu", **kw
    )
    return run_probe(LocalTransport("t"), spec, python=sys.executable)


@pytest.fixture(scope="module")
def seed_0513() -> ProbeResult:
    # SGLang 0.5.13, no draft window: the seed case.
    return kimi(honours_layer_types=False, contexts=[64, 96, 256, 512])


def test_agreement_where_served_spans_equal_trained(seed_0513: ProbeResult) -> None:
    r = seed_0513
    assert r.self_check is not None and r.self_check.passed
    same = [c for c in r.contexts if c.comparison("served").same_spans]  # type: ignore[union-attr]
    # The trained band covers the whole context up to window - block (128 - 16).
    assert [c.context for c in same] == [64, 96]
    for c in same:
        cmp = c.comparison("served")
        assert cmp is not None
        assert cmp.output.max_abs_diff <= r.self_check.tolerance
        assert cmp.top1_agreement == 1.0
        assert c.run_of("served").visible == c.run_of("trained").visible  # type: ignore[union-attr]


def test_divergence_where_served_spans_exceed_trained(seed_0513: ProbeResult) -> None:
    beyond = [c for c in seed_0513.contexts if c.context > WINDOW]
    assert [c.context for c in beyond] == [256, 512]
    for c in beyond:
        cmp = c.comparison("served")
        assert cmp is not None and not cmp.same_spans
        assert cmp.output.rel_l2 > 1e-2 and cmp.output.cosine < 0.9999
        # the first layer is sliding: it differs on its own
        assert cmp.layers[0].type == "sliding_attention" and cmp.layers[0].rel_l2 > 0
        served, trained = c.run_of("served"), c.run_of("trained")
        assert served is not None and trained is not None
        assert served.visible == [c.context] * 6  # 0.5.13 ignores layer_types
        assert trained.visible == [WINDOW - 1] * 5 + [c.context]
        assert served.read_bytes > trained.read_bytes
    near, far = (c.comparison("served") for c in beyond)
    assert near is not None and far is not None
    assert far.output.rel_l2 > 0.8 * near.output.rel_l2


def test_flag_fix_on_0_5_13_is_closer_than_served(seed_0513: ProbeResult) -> None:
    # The fix: --speculative-draft-window-size 128, every layer clamped to the last 128
    # (page-aligned to 64). Not exact: the compact cut is per request, the trained band per
    # query, and the full_attention layer is clamped too.
    assert seed_0513.scenarios[2].name == "fix"
    c = seed_0513.contexts[-1]
    fix, served = c.comparison("fix"), c.comparison("served")
    assert fix is not None and served is not None
    assert 0 < fix.output.rel_l2 < served.output.rel_l2
    assert c.run_of("fix").visible == [128] * 6  # type: ignore[union-attr]


def test_fix_equals_trained_on_0_5_14_when_the_flag_is_removed() -> None:
    # 0.5.14+ with the flag set on a mixed drafter: the flag clamps the full_attention layer.
    r = kimi(honours_layer_types=True, draft_window=WINDOW, contexts=[64, 512])
    long = r.contexts[-1]
    served, fix = long.comparison("served"), long.comparison("fix")
    assert served is not None and fix is not None
    assert served.layers[5].rel_l2 > served.layers[0].rel_l2  # the full layer is what differs
    assert not served.same_spans and served.output.rel_l2 > 1e-3
    for c in r.contexts:
        f = c.comparison("fix")
        assert f is not None and f.same_spans
        assert f.output.max_abs_diff == 0.0 and f.top1_agreement == 1.0
        assert c.run_of("fix").visible == c.run_of("trained").visible  # type: ignore[union-attr]


def test_served_as_trained_on_0_5_14_without_flag() -> None:
    r = kimi(honours_layer_types=True, contexts=[512])
    assert [s.name for s in r.scenarios] == ["trained", "served"]
    cmp = r.contexts[0].comparison("served")
    assert cmp is not None and cmp.same_spans and cmp.output.max_abs_diff == 0.0


def test_shards_every_projection_per_gpu_under_tp(seed_0513: ProbeResult) -> None:
    # Kimi drafter: 32 heads, 8 KV heads, head_dim 128, hidden 7168; TP 8 -> 4 and 1.
    r = seed_0513
    assert r.tp_size == 8 and r.shape is not None
    assert (r.shape.heads, r.shape.kv_heads) == (4, 1)
    assert (r.shape.heads_total, r.shape.kv_heads_total) == (32, 8)
    assert r.shard == {
        "q_proj": [4 * 128, 7168],
        "k_proj": [128, 7168],
        "v_proj": [128, 7168],
        "o_proj": [7168, 4 * 128],
    }


@pytest.mark.parametrize(
    ("tp", "heads", "kv_heads"), [(1, 32, 8), (2, 16, 4), (16, 2, 1)]
)  # TP 16 > 8 KV heads: each KV head is replicated, one per GPU
def test_shard_shapes_follow_tp(tp: int, heads: int, kv_heads: int) -> None:
    cfg = drafter_cfg(QWEN4B_DRAFTER)
    spec = probe_spec(
        cfg,
        json.loads(QWEN4B_DRAFTER.read_text()),
        honours_layer_types=True,
        contexts=[16],
        tp_size=tp,
        device="cpu",
        agreement_tokens=16,
    )
    r = run_probe(LocalTransport("t"), spec, python=sys.executable)
    assert r.shard["q_proj"] == [heads * 128, 2560] and r.shard["o_proj"] == [2560, heads * 128]
    assert r.shard["k_proj"] == [kv_heads * 128, 2560] == r.shard["v_proj"]


def test_unknown_layer_types_are_not_guessed() -> None:
    from dflash_doctor.facts.model_config import parse_drafter_config

    config = {k: v for k, v in KIMI.items() if k != "layer_types"} | {"model_type": "glm_moe_dsa"}
    cfg = parse_drafter_config(json.dumps(config).encode(), "config.json")
    assert cfg.layer_types_source == "unknown"
    with pytest.raises(FactError, match="layer types are unknown"):
        probe_spec(cfg, config, honours_layer_types=False, contexts=[16])


def test_tp_that_does_not_split_the_heads_is_refused_in_one_line() -> None:
    spec = probe_spec(
        drafter_cfg(QWEN4B_DRAFTER),
        json.loads(QWEN4B_DRAFTER.read_text()),
        honours_layer_types=True,
        contexts=[16],
        tp_size=3,
        device="cpu",
    )
    with pytest.raises(FactError, match="TP 3 does not split 32 heads / 8 KV heads evenly"):
        run_probe(LocalTransport("t"), spec, python=sys.executable)


def test_reads_and_draft_kv_are_per_gpu_bytes(seed_0513: ProbeResult) -> None:
    # bf16 KV (the drafter's dtype, --kv-cache-dtype auto): 2 (K, V) x 1 KV head x 128 x 2 B
    per_layer_token = 2 * 1 * 128 * 2
    assert seed_0513.kv_dtype == "bfloat16"
    assert seed_0513.kv_bytes_per_token == 6 * per_layer_token
    for c in seed_0513.contexts:
        # one draft slot per target token, whatever the window
        assert c.draft_kv_bytes == c.context * 6 * per_layer_token
        for run in c.runs:
            assert run.read_bytes == sum(n + 16 for n in run.visible) * per_layer_token


def test_fp8_kv_cache_halves_the_reads() -> None:
    r = kimi(honours_layer_types=False, contexts=[256], kv_cache_dtype="fp8_e4m3")
    assert r.kv_dtype == "fp8_e4m3" and r.kv_bytes_per_token == 6 * 2 * 128
    run = r.contexts[0].run_of("served")
    assert run is not None and run.read_bytes == 6 * (256 + 16) * 2 * 128


def test_top1_agreement_is_measured_over_many_tokens() -> None:
    r = kimi(honours_layer_types=False, contexts=[512], agreement_tokens=100)
    assert r.agreement_tokens == 112  # rounded up to whole blocks of 16
    cmp = r.contexts[0].comparison("served")
    assert cmp is not None
    lo, hi = cmp.top1_ci95
    assert lo <= cmp.top1_agreement <= hi and hi - lo < 0.3
    assert cmp.top1_agreement * 112 == round(cmp.top1_agreement * 112)


def test_budget_skips_long_contexts() -> None:
    spec = probe_spec(
        drafter_cfg(QWEN4B_DRAFTER),
        json.loads(QWEN4B_DRAFTER.read_text()),
        honours_layer_types=True,
        contexts=[32, 1 << 22],
        device="cpu",
        budget_mib=512,
        agreement_tokens=16,
    )
    r = run_probe(LocalTransport("t"), spec, python=sys.executable)
    assert [c.context for c in r.contexts] == [32]
    assert r.skipped_contexts[0].context == 1 << 22 and "budget" in r.skipped_contexts[0].reason


def test_default_contexts() -> None:
    assert default_contexts(2048) == [512, 2048, 4096, 8192, 16384]


def test_bad_probe_output_is_one_line() -> None:
    spec = probe_spec(
        drafter_cfg(QWEN4B_DRAFTER), {}, honours_layer_types=True, contexts=[8], device="cpu"
    )
    with pytest.raises(FactError, match="probe output invalid"):
        run_probe(LocalTransport("t"), spec, python="/bin/echo")
    with pytest.raises(FactError, match="probe failed: KeyError"):
        run_probe(LocalTransport("t"), dict(spec, config={}), python=sys.executable)
    with pytest.raises(FactError, match="spans must hold one list per context"):
        bad = dict(spec, config=json.loads(QWEN4B_DRAFTER.read_text()), contexts=[8, 16])
        run_probe(LocalTransport("t"), bad, python=sys.executable)


@pytest.fixture(scope="module")
def python_without_torch(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A real Python that cannot import torch: a venv without the system site-packages."""
    venv = tmp_path_factory.mktemp("notorch") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    assert subprocess.run([python, "-c", "import torch"], capture_output=True).returncode != 0
    return python


def test_missing_torch_is_one_line_with_an_install_hint(python_without_torch: str) -> None:
    spec = probe_spec(
        drafter_cfg(QWEN4B_DRAFTER),
        json.loads(QWEN4B_DRAFTER.read_text()),
        honours_layer_types=True,
        contexts=[8],
        device="cpu",
    )
    with pytest.raises(FactError, match=r"needs torch.*pip install torch.*--python") as e:
        run_probe(LocalTransport("t"), spec, python=python_without_torch)
    assert "\n" not in str(e.value) and python_without_torch in str(e.value)


def test_cli_without_torch_exits_2_without_traceback(python_without_torch: str) -> None:
    p = probe_cli("--python", python_without_torch)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "needs torch" in lines[0] and "Traceback" not in p.stderr


def test_probe_over_ssh(sshd, ssh_options) -> None:  # type: ignore[no-untyped-def]
    # v0523: SGLang 0.5.23, the all-full Qwen3-4B drafter, and the 0.5.11 flag spelling
    # (removed in 0.5.20: the launch fails there; the probe shows what it would serve).
    spec = load_recorded_host(str(FIXTURE_HOSTS / "v0523")).model_copy(
        update={"address": sshd.address}
    )
    lines: list[str] = []
    r = probe_host(
        spec,
        ProbeOptions(contexts=[16, 256], device="cpu", agreement_tokens=16),
        ssh=ssh_options,
        on_progress=lines.append,
    )
    assert r.device == "cpu" and [c.context for c in r.contexts] == [16, 256]
    assert r.sliding_layers == [] and r.self_check is not None
    assert lines == ["context 16 (1/2) done in " + lines[0].split(" done in ")[1], lines[1]]
    assert lines[1].startswith("context 256 (2/2) done in ")


def test_check_with_probe_puts_numbers_in_findings(tmp_path: Path) -> None:
    """The probe feeds the span finding (the seed on 0.5.13, dflash.py 0.5.13:116-122)."""
    import shutil

    from dflash_doctor.demo import DEMO_DIR
    from dflash_doctor.pipeline import check_host

    # The seed case pinned to SGLang 0.5.13 (sliding drafter, no draft window), whatever
    # version the demo host records: a copy of its tree with the version set in host.yaml.
    host = tmp_path / "seed-0513"
    shutil.copytree(DEMO_DIR, host)
    (host / "host.yaml").write_text(
        "launch_file: /etc/sglang/launch.sh\nlog_path: /var/log/sglang/server.log\n"
        "sglang_version: 0.5.13\n"
    )
    report = check_host(
        load_recorded_host(str(host)),
        None,
        probe=ProbeOptions(contexts=[64, 512], window=WINDOW, device="cpu", agreement_tokens=32),
    )
    probed = [f for f in report.findings if "probe_context_tokens" in f.impact]
    assert probed, [f.check_id for f in report.findings]
    for finding in probed:
        assert finding.impact["probe_context_tokens"] == 512
        served = float(finding.impact["probe_rel_l2_served_vs_trained"])
        assert served > 1e-2 and float(finding.impact["probe_rel_l2_fix_vs_trained"]) < served
        text = next(e.text for e in finding.evidence if e.text.startswith("probe on cpu"))
        assert text.startswith("probe on cpu (trained window 128): at 512 tokens")
        assert "SGLang 0.5.13 (layer_types ignored)" in text
        assert "more draft KV" not in text  # the window saves no KV memory
    # The terminal shows the probe's numbers under words, never their keys (issue 26).
    import io

    from rich.console import Console

    from dflash_doctor.checks.impact_labels import CODE_KEY, IMPACT_LABELS
    from dflash_doctor.render.terminal import render_terminal
    from dflash_doctor.report import build_report

    keys = {k for f in probed for k in f.impact if CODE_KEY.match(k)}
    assert "probe_draft_reads_mib_per_step_served" in keys and keys <= IMPACT_LABELS.keys()
    buf = io.StringIO()
    render_terminal(build_report([report]), Console(file=buf, width=100, color_system=None))
    assert not [k for k in keys if f"{k}:" in buf.getvalue()]
    assert "Probe: relative L2 error, served vs trained attention: " in buf.getvalue()


def probe_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "dflash_doctor",
            "probe",
            "--demo",
            "--contexts",
            "16,256",
            "--window",
            "64",
            "--device",
            "cpu",
            "--agreement-tokens",
            "16",
            *args,
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )


def test_cli_json_on_stdout_progress_on_stderr() -> None:
    p = probe_cli("--format", "json")
    assert p.returncode == 0, p.stderr
    result = ProbeResult.model_validate_json(p.stdout)
    assert [c.context for c in result.contexts] == [16, 256]
    progress = [line for line in p.stderr.splitlines() if " done in " in line]
    assert [line.split(": context ")[1].split(" done")[0] for line in progress] == [
        "16 (1/2)",
        "256 (2/2)",
    ]


def test_plot_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "probe.png"
    p = probe_cli("--plot", str(out))
    assert p.returncode == 0, p.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_checked_before_the_run(tmp_path: Path) -> None:
    p = probe_cli("--plot", str(tmp_path / "missing" / "probe.png"))
    assert p.returncode == 2 and "no such directory" in p.stderr
    assert " done in " not in p.stderr  # refused before the probe ran


def test_missing_matplotlib_refused_before_the_run(tmp_path: Path) -> None:
    # A Python where `import matplotlib` fails: a module of that name that raises.
    (tmp_path / "matplotlib.py").write_text("raise ImportError('no matplotlib here')\n")
    p = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import sys; sys.path.insert(0, {str(tmp_path)!r}); sys.path.insert(0, {str(REPO)!r});"
            "from dflash_doctor.cli import main; sys.argv = ['dflash-doctor', 'probe', '--demo',"
            " '--device', 'cpu', '--plot', 'x.png']; main()",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert p.returncode == 2 and "--plot needs matplotlib" in p.stderr
    assert " done in " not in p.stderr


def test_budget_default_matches_the_script() -> None:
    from dflash_doctor.on_host import attention_probe
    from dflash_doctor.probes import runner

    assert runner.DEFAULT_BUDGET_MIB == attention_probe.DEFAULT_BUDGET_MIB
    assert runner.DEFAULT_AGREEMENT_TOKENS == attention_probe.DEFAULT_AGREEMENT_TOKENS


def test_cli_does_not_import_torch() -> None:
    code = "import sys, dflash_doctor.cli; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def write_safetensors(path: Path, tensors: dict[str, Any]) -> None:
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


def test_real_weights_are_read_from_safetensors(tmp_path: Path) -> None:
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

    def run(**kw: Any) -> ProbeResult:
        spec = probe_spec(
            cfg, config, honours_layer_types=False, contexts=[32, 256], device="cpu", **kw
        )
        return run_probe(LocalTransport("t"), spec, python=sys.executable)

    real = run(weights="real", weights_dir=str(tmp_path))
    assert real.weights == "real" and real.self_check is not None and real.self_check.passed
    rand = run()
    served = [c.comparison("served") for c in (real.contexts[1], rand.contexts[1])]
    assert served[0] is not None and served[1] is not None
    assert served[0].output.rel_l2 != served[1].output.rel_l2
    # TP 2: rank 0's rows of q/k/v and columns of o_proj, read from the same file
    half = run(weights="real", weights_dir=str(tmp_path), tp_size=2)
    assert half.shard == {
        "q_proj": [64, 128],
        "k_proj": [32, 128],
        "v_proj": [32, 128],
        "o_proj": [128, 64],
    }
    del tensors["layers.1.self_attn.o_proj.weight"]
    write_safetensors(tmp_path / "model.safetensors", tensors)
    with pytest.raises(FactError, match="safetensors lack 1 tensors"):
        run(weights="real", weights_dir=str(tmp_path))
