"""Issue 11 catalog checks (DFD120-DFD129, DFD105's vLLM recipe): fires and clean at the
edges of each version range. Every SGLang fact is cited from the published wheels under
/work/wheels/src/<version>/sglang."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from dflash_doctor.checks import CATALOG
from dflash_doctor.checks.base import CheckResult, Severity
from dflash_doctor.facts.environment import CATALOG_ENV_NAMES, catalog_environ
from dflash_doctor.facts.gpu_arch import capability_major
from dflash_doctor.facts.model_config import parse_target_config
from dflash_doctor.facts.models import Fact, Gpu, HostFacts, LaunchArgs, TargetConfig
from dflash_doctor.runner import run_check
from tests.conftest import (
    DEMO_HOST,
    QWEN4B_DRAFTER,
    QWEN8B_DRAFTER,
    QWEN8B_TARGET,
    drafter_cfg,
    host_facts,
    launch,
    target_cfg,
)

WHEELS = Path("/work/wheels/src")
# The second built-in demo host: SGLang 0.5.23 with a running process and its environ.
DEMO_0523 = DEMO_HOST.parent / "v0523"


def facts(
    *,
    env: dict[str, str] | None = None,
    gpus: list[str] | None = None,
    **kw: Any,
) -> HostFacts:
    f = host_facts(**kw)
    if env is not None:
        f = f.model_copy(update={"environ": Fact.of(env, "/proc/4242/environ")})
    if gpus is not None:
        f = f.model_copy(
            update={
                "gpus": Fact.of([Gpu(index=i, name=n) for i, n in enumerate(gpus)], "nvidia-smi")
            }
        )
    return f


def run(check_id: str, **kw: Any) -> CheckResult:
    return run_check(CATALOG[check_id], facts(**kw))


def target_with(path: Path = QWEN8B_TARGET, **changes: Any) -> TargetConfig:
    obj = json.loads(path.read_text())
    obj.update(changes)
    return parse_target_config(json.dumps(obj, indent=2).encode(), str(path))


def severities(r: CheckResult) -> list[Severity]:
    return [f.severity for f in r.findings]


# DFD120 drafter shorter than the served context ---------------------------------------


@pytest.mark.parametrize("version", ["0.5.11", "0.5.23"])
def test_dfd120_fires_past_the_drafters_positions(version: str) -> None:
    """srt/configs/model_config.py `_derive_context_length` (0.5.11:452-483, 0.5.23:1291-1331):
    the draft ModelConfig gets the target's context_len (0.5.11 dflash_worker.py:139-141,
    0.5.23 draft_worker_common.py:100); larger than the drafter's derived length it raises
    unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN (0.5.11:464, 0.5.23:1303), else logs
    `Overriding the draft model's max_position_embeddings to N.` (0.5.11:472, 0.5.23:1311)."""
    cfg = drafter_cfg(QWEN8B_DRAFTER)  # max_position_embeddings 40960
    long = launch("--context-length", "131072")
    allowed = run(
        "DFD120",
        drafter=cfg,
        launch_args=long,
        version=version,
        env={"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1"},
    )
    (f,) = allowed.findings
    assert f.severity is Severity.WARNING
    assert "Overriding the draft model's max_position_embeddings to 131072." in f.message
    assert f.impact == {"served_context_tokens": 131072, "drafter_context_tokens": 40960}
    assert f.evidence[0].key == "max_position_embeddings" and f.evidence[0].line is not None
    refused = run("DFD120", drafter=cfg, launch_args=long, version=version, env={})
    (g,) = refused.findings
    assert g.severity is Severity.ERROR
    assert "set the env var SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1" in g.message
    # Environment not read: both outcomes are named, at warning.
    unknown = run("DFD120", drafter=cfg, launch_args=long, version=version)
    assert severities(unknown) == [Severity.WARNING]
    assert "Either SGLang refuses to start" in unknown.findings[0].message


@pytest.mark.parametrize("version", ["0.5.11", "0.5.23"])
def test_dfd120_clean_within_the_drafters_positions(version: str) -> None:
    """Same code as above: context_length <= the drafter's derived length passes silently."""
    cfg = drafter_cfg(QWEN8B_DRAFTER)
    for ctx in ("40960", "32768"):
        r = run("DFD120", drafter=cfg, launch_args=launch("--context-length", ctx), version=version)
        assert r.status == "passed", ctx
    # No --context-length: the target's own maximum (Qwen3-8B: 40960) is served.
    r = run("DFD120", drafter=cfg, target=target_cfg(QWEN8B_TARGET), launch_args=launch())
    assert r.status == "passed"


def test_dfd120_rope_scaling_counts_like_sglang() -> None:
    """get_context_length multiplies by rope_scaling.factor unless the scaling names
    original_max_position_embeddings (srt/utils/hf_transformers/common.py 0.5.11:365-382,
    0.5.23:677-694)."""
    scaled = drafter_cfg(QWEN8B_DRAFTER, rope_scaling={"rope_type": "yarn", "factor": 4.0})
    assert scaled.context_length == 163840
    r = run("DFD120", drafter=scaled, launch_args=launch("--context-length", "131072"))
    assert r.status == "passed"
    yarn_orig = drafter_cfg(
        QWEN8B_DRAFTER,
        rope_scaling={"factor": 4.0, "original_max_position_embeddings": 32768},
    )
    assert yarn_orig.context_length == 40960


def test_dfd120_target_rope_scaling_sets_the_served_context() -> None:
    """No --context-length: the target's ModelConfig serves get_context_length of its own
    config (srt/configs/model_config.py 0.5.23:1322-1328), rope factor included."""
    cfg = drafter_cfg(QWEN8B_DRAFTER)
    yarn = target_with(rope_scaling={"rope_type": "yarn", "factor": 4.0})
    r = run("DFD120", drafter=cfg, target=yarn, launch_args=launch(), version="0.5.23")
    assert r.findings[0].impact["served_context_tokens"] == 163840
    assert "as SGLang derives it" in r.findings[0].evidence[1].text


def test_dfd120_the_logged_override_proves_it() -> None:
    """`Overriding the draft model's max_position_embeddings to N.` (model_config.py
    0.5.11:472, 0.5.23:1311), read by the log scan as LogFacts.draft_max_position_override."""
    from dflash_doctor.facts.models import LogFacts

    cfg = drafter_cfg(QWEN8B_DRAFTER)
    log = LogFacts(path="/var/log/sglang.log", draft_max_position_override=65536)
    for version in ("0.5.11", "0.5.23"):
        r = run("DFD120", drafter=cfg, log=log, version=version)
        (f,) = r.findings
        assert f.severity is Severity.WARNING and f.message.startswith("SGLang logged")
        assert f.impact["served_context_tokens"] == 65536
        assert f.evidence[1].kind == "log" and f.evidence[1].file == "/var/log/sglang.log"
    fits = LogFacts(path="/var/log/sglang.log")
    assert run("DFD120", drafter=cfg, log=fits).status == "skipped"  # nothing says what runs


def test_dfd120_without_a_context_key_uses_the_config_class_default() -> None:
    """Qwen3Config.max_position_embeddings = 32768 (transformers 5.6.0-5.19.0
    models/qwen3/configuration_qwen3.py:70): SGLang's get_context_length reads it."""
    cfg = drafter_cfg(QWEN8B_DRAFTER, max_position_embeddings=None)
    r = run("DFD120", drafter=cfg, launch_args=launch("--context-length", "131072"))
    assert r.status == "failed", r.reason
    assert "32768" in r.findings[0].message + str(r.findings[0].evidence)
    unknown = drafter_cfg(QWEN8B_DRAFTER, max_position_embeddings=None, model_type="no_such")
    r = run("DFD120", drafter=unknown, launch_args=launch("--context-length", "131072"))
    assert r.status == "skipped" and "transformers' default" in (r.reason or "")


# DFD121 SGLANG_SIMULATE_ACC_LEN ----------------------------------------------------------


@pytest.mark.parametrize("version", ["0.5.17", "0.5.23"])
def test_dfd121_simulated_acceptance_is_an_error_from_0_5_17(version: str) -> None:
    """DFLASH forces the accept length when SIMULATE_ACC_LEN > 0 from 0.5.17
    (speculative/dflash_worker_v2.py 0.5.17:1810, 0.5.23:2268; spec_utils.py reads the
    EnvFloat(-1) of srt/environ.py 0.5.17:347, 0.5.23:527)."""
    r = run("DFD121", launch_args=launch(), version=version, env={"SGLANG_SIMULATE_ACC_LEN": "3.5"})
    (f,) = r.findings
    assert f.severity is Severity.ERROR and f.impact == {"simulated_accept_len": 3.5}
    assert f.evidence[0].text == "SGLANG_SIMULATE_ACC_LEN=3.5"


@pytest.mark.parametrize("version", ["0.5.17", "0.5.23"])
def test_dfd121_clean_when_unset_or_off(version: str) -> None:
    """`# turn off if < 0` (spec_utils.py 0.5.17:171); the worker tests `> 0`."""
    for env in ({}, {"SGLANG_SIMULATE_ACC_LEN": "-1"}, {"SGLANG_SIMULATE_ACC_LEN": "junk"}):
        assert run("DFD121", launch_args=launch(), version=version, env=env).status == "passed"


@pytest.mark.parametrize("version", ["0.5.11", "0.5.16"])
def test_dfd121_before_0_5_17_dflash_ignores_it(version: str) -> None:
    """No DFLASH file of 0.5.11-0.5.16 reads SIMULATE_ACC_LEN (speculative/dflash_*.py);
    only EAGLE/DSpark do: info, because an upgrade turns it on."""
    r = run("DFD121", launch_args=launch(), version=version, env={"SGLANG_SIMULATE_ACC_LEN": "3"})
    assert severities(r) == [Severity.INFO]


def test_dfd121_skips_without_the_environment() -> None:
    r = run("DFD121", launch_args=launch())
    assert r.status == "skipped" and "needs environ" in (r.reason or "")


# DFD122 SGLANG_ENABLE_SPEC_V2 ------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "logged"),
    [("0.5.14", True), ("0.5.20", True), ("0.5.21", False), ("0.5.23", False)],
)
def test_dfd122_removed_variable(version: str, logged: bool) -> None:
    """0.5.14-0.5.20 warn `SGLANG_ENABLE_SPEC_V2 has been removed: ...`
    (arg_groups/speculative_hook.py 0.5.14:69-74, 0.5.20:108-113); 0.5.21-0.5.23 read it
    nowhere. DFLASH runs DFlashWorkerV2 from 0.5.14 (speculative/spec_info.py 0.5.14:203)."""
    r = run("DFD122", launch_args=launch(), version=version, env={"SGLANG_ENABLE_SPEC_V2": "0"})
    (f,) = r.findings
    assert f.severity is Severity.WARNING
    assert ("has been removed" in f.message) is logged
    assert "--disable-overlap-schedule" in f.message
    stale = run("DFD122", launch_args=launch(), version=version, env={"SGLANG_ENABLE_SPEC_V2": "1"})
    assert severities(stale) == [Severity.INFO]
    sync = launch("--disable-overlap-schedule")
    done = run("DFD122", launch_args=sync, version=version, env={"SGLANG_ENABLE_SPEC_V2": "0"})
    assert severities(done) == [Severity.INFO]


@pytest.mark.parametrize("version", ["0.5.11", "0.5.13"])
def test_dfd122_clean_while_sglang_reads_it(version: str) -> None:
    """0.5.11-0.5.13 define EnvBool(True) (srt/environ.py 0.5.11:459, 0.5.13:620), read
    for EAGLE only; DFLASH refuses overlap there (speculative/spec_info.py 0.5.13:170-173)."""
    r = run("DFD122", launch_args=launch(), version=version, env={"SGLANG_ENABLE_SPEC_V2": "0"})
    assert r.status == "passed"


# DFD123 trtllm_mha vs GPU ---------------------------------------------------------------

TRT = ("--attention-backend", "trtllm_mha")


@pytest.mark.parametrize("version", ["0.5.11", "0.5.18"])
def test_dfd123_prefill_needs_sm100_through_0_5_18(version: str) -> None:
    """`TRTLLM MHA backend for prefill is only supported on Blackwell GPUs (SM100).`
    (server_args.py 0.5.11:2629-2632, 0.5.18:6016-6019; is_sm100_supported = major 10,
    srt/utils/common.py 0.5.11:259-263)."""
    for gpu in ("NVIDIA H100 80GB HBM3", "NVIDIA RTX PRO 6000 Blackwell Server Edition"):
        r = run("DFD123", launch_args=launch(*TRT), version=version, gpus=[gpu])
        (f,) = r.findings
        assert f.severity is Severity.ERROR and "only supported on Blackwell GPUs (SM100)" in (
            f.message
        )
    ok = launch(*TRT, "--page-size", "64")
    assert run("DFD123", launch_args=ok, version=version, gpus=["NVIDIA B200"]).status == "passed"


@pytest.mark.parametrize("version", ["0.5.19", "0.5.23"])
def test_dfd123_prefill_on_hopper_from_0_5_19(version: str) -> None:
    """0.5.19+ accept SM90/SM100/SM120 for prefill (arg_groups/attention_hook.py
    0.5.19:133-139, 0.5.23:200-206); decode needs the same (0.5.23:222-227)."""
    ok = launch(*TRT, "--page-size", "32")
    for gpu in ("NVIDIA H100 80GB HBM3", "NVIDIA GeForce RTX 5090", "NVIDIA B200"):
        assert run("DFD123", launch_args=ok, version=version, gpus=[gpu]).status == "passed"
    r = run("DFD123", launch_args=ok, version=version, gpus=["NVIDIA A100-SXM4-80GB"])
    assert [f.title.split(" cannot")[0] for f in r.findings] == [
        "trtllm_mha prefill",
        "trtllm_mha decode",
    ]
    assert "requires Hopper (SM90), Blackwell (SM100), or SM120" in r.findings[0].message
    assert {(f.fixes[0].flag, f.fixes[0].value) for f in r.findings} == {
        ("--attention-backend", "flashinfer")
    }
    split = launch("--prefill-attention-backend", "trtllm_mha", "--attention-backend", "fa3")
    (p,) = run(
        "DFD123", launch_args=split, version="0.5.18", gpus=["NVIDIA H100 80GB HBM3"]
    ).findings
    assert (p.fixes[0].flag, p.fixes[0].value) == ("--prefill-attention-backend", "fa3")


def test_dfd123_page_size_forced_to_64() -> None:
    """`changing page_size from N to 64` (0.5.11 server_args.py:2647-2651: 16/32/64;
    0.5.17 arg_groups/overrides.py:2081-2094: 16/32/64/128 and the draft backend counts)."""
    r = run("DFD123", launch_args=launch(*TRT), version="0.5.23", gpus=["NVIDIA B200"])
    (f,) = r.findings
    assert f.severity is Severity.INFO and "changing page_size from 1 to 64" in f.message
    # SGLang's text, word for word (arg_groups/overrides.py 0.5.23:1185).
    assert "only supports page_size of 16, 32, 64 or 128, changing page_size" in f.message
    p128 = launch(*TRT, "--page-size", "128")
    (g,) = run("DFD123", launch_args=p128, version="0.5.16", gpus=["NVIDIA B200"]).findings
    # srt/server_args.py 0.5.11:2649, arg_groups/overrides.py 0.5.16:1739.
    assert "only supports page_size of 16, 32 or 64, changing page_size from 128" in g.message
    assert run("DFD123", launch_args=p128, version="0.5.17", gpus=["NVIDIA B200"]).status == (
        "passed"
    )
    draft_only = launch("--speculative-draft-attention-backend", "trtllm_mha")
    h100 = ["NVIDIA H100 80GB HBM3"]
    assert run("DFD123", launch_args=draft_only, version="0.5.16", gpus=h100).status == "passed"
    assert severities(run("DFD123", launch_args=draft_only, version="0.5.17", gpus=h100)) == [
        Severity.INFO
    ]


def test_dfd123_clean_without_trtllm_and_skips_unknown_gpus() -> None:
    h100 = ["NVIDIA H100 80GB HBM3"]
    fa3 = launch("--attention-backend", "fa3")
    assert run("DFD123", launch_args=fa3, gpus=h100).status == "passed"
    r = run("DFD123", launch_args=launch(*TRT), gpus=["Mystery Accelerator 9000"])
    assert r.status == "skipped" and "Mystery" in (r.reason or "")
    assert run("DFD123", launch_args=launch(*TRT)).status == "skipped"  # no GPU facts


def test_gpu_names_map_to_capability_majors() -> None:
    names = {
        "NVIDIA B200": 10,
        "NVIDIA GB200": 10,
        "NVIDIA B300 SXM6 AC": 10,
        "NVIDIA H200": 9,
        "NVIDIA GH200 480GB": 9,
        "NVIDIA H20": 9,
        "NVIDIA RTX PRO 6000 Blackwell Workstation Edition": 12,
        "NVIDIA GB10": 12,
        "NVIDIA L40S": 8,
        "NVIDIA A10G": 8,
        "Tesla V100-SXM2-16GB": 7,
        "Tesla T4": 7,
    }
    assert {n: capability_major(n) for n in names} == names


# DFD124 pipeline parallelism --------------------------------------------------------------


@pytest.mark.parametrize("version", ["0.5.11", "0.5.23"])
def test_dfd124_pp_size(version: str) -> None:
    """`Currently DFLASH speculative decoding only supports pp_size == 1.` (server_args.py
    0.5.11:3325-3328, arg_groups/speculative_hook.py 0.5.23:319-322)."""
    r = run("DFD124", launch_args=launch("--pp-size", "2"), version=version)
    (f,) = r.findings
    assert "only supports pp_size == 1" in f.message and f.evidence[0].key == "--pp-size"
    alias = launch("--pipeline-parallel-size", "2")
    assert run("DFD124", launch_args=alias, version=version).status == "failed"
    assert run("DFD124", launch_args=launch("--pp-size", "1"), version=version).status == ("passed")


# DFD125 DP attention ----------------------------------------------------------------------

DP = ("--dp-size", "8", "--tp-size", "8", "--enable-dp-attention")


@pytest.mark.parametrize(
    ("version", "text"),
    [
        ("0.5.11", "does not support dp attention."),
        ("0.5.19", "does not support dp attention."),
        ("0.5.20", "does not support dp attention on non-NPU devices."),
        ("0.5.22", "does not support dp attention on non-NPU devices."),
    ],
)
def test_dfd125_refused_through_0_5_22(version: str, text: str) -> None:
    """server_args.py 0.5.11:3320-3323; arg_groups/speculative_hook.py 0.5.19:195-199,
    0.5.20:209-214, 0.5.22:295-300 (attn_dp_enabled_of, runtime_context.py 0.5.22:191-199)."""
    r = run("DFD125", launch_args=launch(*DP), version=version)
    (f,) = r.findings
    assert f.message.endswith(f"{text}`")
    # every DP flag goes: --dp-size alone would mean 8 model replicas
    assert [(x.action, x.flag) for x in f.fixes] == [
        ("remove_flag", "--enable-dp-attention"),
        ("remove_flag", "--dp-size"),
        ("upgrade_sglang", None),
    ]


def test_dfd125_0_5_23_needs_dp_lm_head() -> None:
    """0.5.23 arg_groups/speculative_hook.py:303-317: CUDA dp attention needs
    --enable-dp-lm-head and SGLANG_ENABLE_DP_SPEC_PREFILL_COORDINATION off."""
    r = run("DFD125", launch_args=launch(*DP), version="0.5.23")
    (f,) = r.findings
    assert "requires --enable-dp-lm-head" in f.message
    assert f.fixes[0].describe() == "set --enable-dp-lm-head"
    ok = launch(*DP, "--enable-dp-lm-head")
    assert run("DFD125", launch_args=ok, version="0.5.23", env={}).status == "passed"
    coord = run(
        "DFD125",
        launch_args=ok,
        version="0.5.23",
        env={"SGLANG_ENABLE_DP_SPEC_PREFILL_COORDINATION": "1"},
    )
    assert "SGLANG_ENABLE_DP_SPEC_PREFILL_COORDINATION=0" in coord.findings[0].message


def test_dfd125_dp_size_one_turns_dp_attention_off() -> None:
    """dp_size == 1 resets enable_dp_attention (server_args.py 0.5.11:2928-2931,
    arg_groups/overrides.py 0.5.17:2302-2305); --attn-dp-size from 0.5.22
    (arg_groups/fields/parallel.py 0.5.22:81-89)."""
    off = launch("--enable-dp-attention", "--tp-size", "8")
    assert run("DFD125", launch_args=off, version="0.5.11").status == "passed"
    attn = launch("--attn-dp-size", "4", "--tp-size", "8")
    assert run("DFD125", launch_args=attn, version="0.5.22").findings[0].evidence[0].key == (
        "--attn-dp-size"
    )


@pytest.mark.parametrize("version", ["0.5.22", "0.5.23"])
def test_dfd140_and_dfd125_agree_on_enable_dp_attention(version: str) -> None:
    """0.5.22 deprecates --enable-dp-attention for --attn-dp-size (srt/server_args.py
    0.5.22:417-423) and resolves it to attn_dp_size first (parallel_hook.py 0.5.22:39-61,
    pipeline.py 0.5.22:42-45), so DFLASH's refusal (speculative_hook.py 0.5.22:295-300)
    holds in either spelling: DFD140 must not advise the rename DFD125 says is refused.
    On 0.5.23 DP attention is allowed (with --enable-dp-lm-head): the rename stands."""
    args = launch(*DP)
    (renamed,) = run("DFD140", launch_args=args, version=version).findings
    dp = run("DFD125", launch_args=args, version=version).findings
    if version == "0.5.22":
        # SGLang's own warning is quoted; the doctor's advice to use it is gone.
        assert "Do not rename it" in renamed.message
        assert "Use --attn-dp-size <dp-size>." not in renamed.message
        assert renamed.fixes == dp[0].fixes[:-1]  # the same removals, less the upgrade
        assert [f.flag for f in renamed.fixes] == ["--enable-dp-attention", "--dp-size"]
    else:
        assert "Use --attn-dp-size <dp-size>." in renamed.message
        assert all(f.action != "remove_flag" for f in dp[0].fixes)
    # Not DFLASH: the rename is the whole advice.
    plain = launch(*DP)
    plain = plain.model_copy(update={"speculative_algorithm": None})
    assert not plain.is_dflash
    (other,) = run("DFD140", launch_args=plain, version=version).findings
    assert "Do not rename it" not in other.message


# DFD126 drafter heads vs TP --------------------------------------------------------------


@pytest.mark.parametrize("version", ["0.5.11", "0.5.23"])
def test_dfd126_heads_not_divisible(version: str) -> None:
    """DFlashAttention asserts (srt/models/dflash.py 0.5.11:51-65, 0.5.23:215-228)."""
    cfg = drafter_cfg(QWEN8B_DRAFTER)  # 32 heads, 8 KV heads
    for tp in ("1", "2", "4", "8", "16", "32"):
        r = run("DFD126", drafter=cfg, launch_args=launch("--tp-size", tp), version=version)
        assert r.status == "passed", tp
    r = run("DFD126", drafter=cfg, launch_args=launch("--tp-size", "3"), version=version)
    assert [f.evidence[0].key for f in r.findings] == ["num_attention_heads", "num_key_value_heads"]
    assert "total_num_heads divisible by tp_size" in r.findings[0].message
    odd_kv = drafter_cfg(QWEN8B_DRAFTER, num_key_value_heads=6)
    r = run("DFD126", drafter=odd_kv, launch_args=launch("--tp-size", "4"), version=version)
    assert "total_num_kv_heads divisible by tp_size when >= tp_size" in r.findings[0].message
    few_kv = drafter_cfg(QWEN8B_DRAFTER, num_key_value_heads=3, num_attention_heads=48)
    r = run("DFD126", drafter=few_kv, launch_args=launch("--tp-size", "16"), version=version)
    assert "tp_size divisible by total_num_kv_heads" in r.findings[0].message


# DFD127 quantized target lm_head --------------------------------------------------------

GPTQ_HEAD = {"quant_method": "gptq", "bits": 4, "lm_head": True}


@pytest.mark.parametrize(
    ("version", "text"),
    [
        ("0.5.11", "a vocab-parallel `lm_head` with `weight` and `shard_indices`"),
        ("0.5.13", "a vocab-parallel `lm_head` with `weight` and `shard_indices`"),
        ("0.5.14", "expose `lm_head` with `weight`."),
        ("0.5.17", "expose `lm_head` with `weight`."),
    ],
)
def test_dfd127_before_0_5_18_any_tp(version: str, text: str) -> None:
    """speculative/dflash_worker.py 0.5.11:552-561; dflash_worker_v2.py 0.5.14:1331-1333,
    0.5.17:1493-1496: a head without a dense `weight` (GPTQ reads quantization_config.lm_head,
    layers/quantization/gptq/gptq.py 0.5.18:153) fails the first speculative step."""
    target = target_with(quantization_config=GPTQ_HEAD)
    r = run("DFD127", target=target, launch_args=launch(), version=version)
    (f,) = r.findings
    assert text in f.message and f.evidence[0].key == "quantization_config.lm_head"


@pytest.mark.parametrize("version", ["0.5.18", "0.5.23"])
def test_dfd127_from_0_5_18_only_tp_above_1(version: str) -> None:
    """`DFLASH with a quantized target lm_head is only supported at tp=1, got tp_size=N.`
    (speculative/dflash_worker_v2.py 0.5.18:840-845, 0.5.23:1578-1583)."""
    target = target_with(quantization_config=GPTQ_HEAD)
    assert run("DFD127", target=target, launch_args=launch(), version=version).status == "passed"
    r = run("DFD127", target=target, launch_args=launch("--tp-size", "2"), version=version)
    assert "only supported at tp=1, got tp_size=2." in r.findings[0].message
    gguf = launch("--tp-size", "4", "--quantization", "gguf")
    assert run("DFD127", launch_args=gguf, version=version).status == "failed"


def test_dfd127_clean_for_unquantized_heads() -> None:
    plain = target_with(quantization_config={"quant_method": "fp8"})
    for version in ("0.5.11", "0.5.23"):
        r = run("DFD127", target=plain, launch_args=launch("--tp-size", "8"), version=version)
        assert r.status == "passed"


# DFD128 mask_token_id --------------------------------------------------------------------


@pytest.mark.parametrize("version", ["0.5.11", "0.5.23"])
def test_dfd128_mask_token_outside_vocab(version: str) -> None:
    """`DFLASH mask_token_id is outside the target vocab size.` when mask_token_id >=
    vocab_size (speculative/dflash_worker.py 0.5.11:451-458, dflash_worker_v2.py
    0.5.23:1401-1408), raised from the worker's __init__ (0.5.11:183, 0.5.23:533)."""
    cfg = drafter_cfg(QWEN8B_DRAFTER)  # mask_token_id 151669
    ok = run("DFD128", drafter=cfg, target=target_cfg(QWEN8B_TARGET), version=version)
    assert ok.status == "passed"  # vocab_size 151936
    small = target_with(vocab_size=151643)
    r = run("DFD128", drafter=cfg, target=small, version=version)
    (f,) = r.findings
    assert "mask_token_id=151669, vocab_size=151643." in f.message
    assert [e.key for e in f.evidence] == ["mask_token_id", "vocab_size"]
    edge = target_with(vocab_size=151669)
    assert run("DFD128", drafter=cfg, target=edge, version=version).status == "failed"


def test_dfd128_skips_without_a_mask_token_id() -> None:
    cfg = drafter_cfg(QWEN8B_DRAFTER, dflash_config={"target_layer_ids": [1]})
    r = run("DFD128", drafter=cfg, target=target_cfg(QWEN8B_TARGET))
    assert r.status == "skipped" and "tokenizer" in (r.reason or "")


# DFD129 hidden-state capture -------------------------------------------------------------


def test_dfd129_capture_hook_per_version() -> None:
    """Missing hook: `Model X does not implement set_dflash_layers_to_capture, ...`
    (model_executor/model_runner.py 0.5.11:825-829, 0.5.15:1056-1060); from 0.5.16
    `Model X implements neither set_dspark_layers_to_capture nor ...`
    (model_runner_components/attention_backend_setup.py 0.5.16:58-65, 0.5.23:65-71).
    gemma4_causal.py gains the hook in 0.5.14; qwen2.py never has it."""
    gemma = target_with(architectures=["Gemma4ForCausalLM"])
    r = run("DFD129", target=gemma, version="0.5.13.post1")
    (f,) = r.findings
    assert "does not implement set_dflash_layers_to_capture" in f.message
    assert (f.fixes[0].action, f.fixes[0].value) == ("upgrade_sglang", "0.5.14")
    assert run("DFD129", target=gemma, version="0.5.14").status == "passed"
    qwen2 = target_with(architectures=["Qwen2ForCausalLM"])
    for version in ("0.5.16", "0.5.23"):
        g = run("DFD129", target=qwen2, version=version).findings[0]
        assert "implements neither set_dspark_layers_to_capture" in g.message
        assert g.fixes[0].action == "manual"
    assert (
        run("DFD129", target=qwen2, version="0.5.15.post1")
        .findings[0]
        .message.count("does not implement")
    )
    for version in ("0.5.11", "0.5.23"):
        assert run("DFD129", target=target_cfg(QWEN8B_TARGET), version=version).status == ("passed")
        assert run("DFD129", target=target_cfg(), version=version).status == "passed"  # Kimi


def test_dfd129_newer_release_uses_the_newest_data() -> None:
    qwen2 = target_with(architectures=["Qwen2ForCausalLM"])
    f = run("DFD129", target=qwen2, version="0.5.24").findings[0]
    assert "from the 0.5.23 wheel's data (the newest release at or below 0.5.24)" in f.message
    assert run("DFD129", target=qwen2, version="0.5.10").status == "skipped"


@pytest.mark.skipif(not WHEELS.is_dir(), reason="published SGLang wheels not unpacked here")
@pytest.mark.parametrize("version", ["0.5.13.post1", "0.5.16"])
def test_capture_data_matches_the_wheels(version: str) -> None:
    """The committed data file is what scripts/gen_dflash_capture.py reads from the wheel."""
    import importlib.util

    from dflash_doctor.facts.capture_hooks import capture_support

    spec = importlib.util.spec_from_file_location(
        "gen_dflash_capture", Path(__file__).resolve().parents[2] / "scripts/gen_dflash_capture.py"
    )
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = gen  # dataclasses look their module up while defining
    spec.loader.exec_module(gen)
    found = gen.analyse(WHEELS / version / "sglang")
    assert found["Qwen3ForCausalLM"] == ("qwen3", True)
    assert found["Qwen2ForCausalLM"] == ("qwen2", False)
    for arch, (module, hook) in found.items():
        answer = capture_support(version, arch)
        assert answer is not None and answer.exact and answer.module == module
        assert answer.captures is hook, arch


# DFD105: a vLLM block-size recipe -------------------------------------------------------


@pytest.mark.parametrize("version", ["0.5.11", "0.5.23"])
def test_dfd105_names_the_vllm_recipe(version: str) -> None:
    """SGLang's block holds the verified anchor in slot 0 and block_size - 1 mask slots
    (speculative/dflash_worker.py 0.5.11:572-573, dflash_worker_v2.py 0.5.23:2553-2554), so
    --speculative-num-draft-tokens counts the anchor; vLLM's num_speculative_tokens does not."""
    cfg = drafter_cfg(QWEN4B_DRAFTER)
    assert cfg.block_size == 16
    r = run("DFD105", drafter=cfg, launch_args=launch("--speculative-num-draft-tokens", "15"))
    (f,) = r.findings
    assert "vLLM recipe" in f.message and f.impact["ported_from"] == "vllm num_speculative_tokens"
    other = run("DFD105", drafter=cfg, launch_args=launch("--speculative-num-draft-tokens", "8"))
    assert "vLLM" not in other.findings[0].message


# Gathering: only the catalog's names leave /proc/PID/environ --------------------------------


def test_catalog_environ_keeps_only_the_allow_list() -> None:
    data = (
        b"HF_TOKEN=hf_secret\0SGLANG_SIMULATE_ACC_LEN=3\0SGLANG_API_KEY=sk-x\0"
        b"SGLANG_ENABLE_SPEC_V2=False\0\xff\xfe=\x00junk\0"
        b"SGLANG_SIMULATE_ACC_METHOD=\x1b[31mred\n" + b"x" * 10_000 + b"\0"
    )
    found = catalog_environ(data)
    assert found["SGLANG_SIMULATE_ACC_LEN"] == "3" and found["SGLANG_ENABLE_SPEC_V2"] == "False"
    assert found["SGLANG_SIMULATE_ACC_METHOD"].startswith("?[31mred?x")
    assert len(found["SGLANG_SIMULATE_ACC_METHOD"]) == 256 and len(found) == 3
    assert not any("TOKEN" in n or "KEY" in n for n in CATALOG_ENV_NAMES)


def test_recorded_host_environ_reaches_the_checks(tmp_path: Path) -> None:
    from dflash_doctor.gather import gather
    from dflash_doctor.hosts import load_recorded_host
    from dflash_doctor.runner import run_checks
    from dflash_doctor.transport.open import open_transport

    host = tmp_path / "v0523"
    shutil.copytree(DEMO_0523, host)
    environ = host / "proc/4242/environ"
    environ.write_bytes(environ.read_bytes() + b"SGLANG_SIMULATE_ACC_LEN=2.5\0")
    spec = load_recorded_host(str(host))
    f = gather(spec, open_transport(spec))
    assert f.environ.value == {"SGLANG_SIMULATE_ACC_LEN": "2.5"}
    assert "hf_FAKE" not in f.model_dump_json()
    (r,) = run_checks(f, ["DFD121"])
    assert r.status == "failed" and r.findings[0].evidence[0].file == "/proc/4242/environ"


def test_launch_file_host_has_no_environment_reason() -> None:
    launch_args: LaunchArgs = launch()
    f = host_facts(launch_args=launch_args)
    assert f.environ.value is None and f.environ.error == "not gathered"


PATCHED_BASE = """
import torch
class PatchedBase(torch.nn.Module):
    def set_dflash_layers_to_capture(self, layer_ids):
        self.ids = layer_ids
"""
PATCHED_KIMI = """
from sglang.srt.models.patched_base import PatchedBase as Base
class KimiK25ForConditionalGeneration(Base):
    pass
EntryClass = [KimiK25ForConditionalGeneration]
"""


def test_dfd129_the_hosts_installed_files_decide(tmp_path: Path) -> None:
    """A patched build answers for itself: the target class's module is read from the
    host's site-packages as text (through a base class in another module), never imported."""
    from dflash_doctor.gather import gather
    from dflash_doctor.hosts import load_recorded_host
    from dflash_doctor.runner import run_checks
    from dflash_doctor.transport.open import open_transport

    host = tmp_path / "v0523"
    shutil.copytree(DEMO_0523, host)
    models = host / "opt/sglang/venv/lib/python3.11/site-packages/sglang/srt/models"
    models.mkdir(parents=True, exist_ok=True)
    (models / "kimi_k25.py").write_text(PATCHED_KIMI)
    (models / "patched_base.py").write_text(PATCHED_BASE)
    spec = load_recorded_host(str(host))

    def dfd129() -> CheckResult:
        f = gather(spec, open_transport(spec))
        (r,) = run_checks(f, ["DFD129"])
        return r

    f = gather(spec, open_transport(spec))
    assert f.capture_hook.value is not None and f.capture_hook.value.files_read == 2
    assert dfd129().status == "passed"
    (models / "patched_base.py").write_text(PATCHED_BASE.replace("set_dflash", "set_other"))
    r = dfd129()
    (finding,) = r.findings
    assert "decided from the host's installed" in finding.message
    assert finding.evidence[-1].file is not None and finding.evidence[-1].file.endswith(
        "sglang/srt/models/kimi_k25.py"
    )
    # No installed files (only the dist-info): the per-release data decides, and says why.
    (models / "kimi_k25.py").unlink()
    (models / "patched_base.py").unlink()
    f = gather(spec, open_transport(spec))
    assert f.capture_hook.value is None and "kimi_k25.py" in (f.capture_hook.error or "")
    assert dfd129().status == "passed"  # 0.5.23's KimiK25ForConditionalGeneration has it


def test_host_model_sources_are_hostile_input() -> None:
    """Deeply nested, binary or truncated host files parse to nothing, never raise."""
    from dflash_doctor.facts.capture_hooks import hook_in_sources, parse_module

    for text in ("(" * 200_000, "\x00\xff garbage", "class A(:\n", "x = [" * 5000):
        assert parse_module(text, "sglang.srt.models.x").classes == {}
    # Imports that leave sglang.srt.models are never read.
    asked: list[str] = []

    def read(module: str) -> str | None:
        asked.append(module)
        if module == "sglang.srt.models.m":
            return "from os import Base\nclass A(Base): pass\nEntryClass = A\n"
        return None

    hook = hook_in_sources("A", "sglang.srt.models.m", read, "/site/m.py")
    assert hook is not None and not hook.implements and asked == ["sglang.srt.models.m"]


SELECT_121 = ("--select", "DFD121", "--format", "json")


def test_cli_reports_a_faked_acceptance_from_the_process_environment(tmp_path: Path) -> None:
    """End to end: the recorded process's environ -> DFD121 error -> exit 1, and the
    secrets beside the variable never reach the report."""
    import subprocess

    from tests.conftest import REPO

    host = tmp_path / "v0523"
    shutil.copytree(DEMO_0523, host)
    environ = host / "proc/4242/environ"
    environ.write_bytes(environ.read_bytes() + b"SGLANG_SIMULATE_ACC_LEN=4\0")
    p = subprocess.run(
        [sys.executable, "-m", "dflash_doctor", "check", "--host-dir", str(host), *SELECT_121],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)},
    )
    assert p.returncode == 1, p.stderr
    (result,) = json.loads(p.stdout)["hosts"][0]["results"]
    assert (
        result["findings"][0]["title"] == "Accept length is simulated (SGLANG_SIMULATE_ACC_LEN=4)"
    )
    assert "hf_FAKE" not in p.stdout and "sk-fixture" not in p.stdout


# DFD107 the draft attention backend, per release ------------------------------------------

MIXED = drafter_cfg()  # five sliding layers and one full layer: trtllm_mha is refused
RANGE_ENDS = ("0.5.11", "0.5.13.post1", "0.5.14", "0.5.15", "0.5.16", "0.5.17", "0.5.22", "0.5.23")


@pytest.mark.parametrize("version", RANGE_ENDS)
def test_dfd107_the_draft_takes_the_prefill_backend_first(version: str) -> None:
    """Draft flag, else --prefill-attention-backend, else --attention-backend, in every
    release: `get_attention_backends` (srt/server_args.py 0.5.11:6738-6749) from
    dflash_worker.py 0.5.11:101-104 and dflash_worker_v2.py 0.5.14:107-110;
    `attention_backends_of` (arg_groups/overrides.py 0.5.15:224-238) from
    speculative_hook.py 0.5.15:267-274, 0.5.23:930-932."""
    missed = launch("--attention-backend", "fa3", "--prefill-attention-backend", "trtllm_mha")
    (f,) = run("DFD107", launch_args=missed, drafter=MIXED, version=version).findings
    assert f.fixes[0].value == "flashinfer" and "'trtllm_mha'" in f.title
    assert f.evidence[0].key == "--prefill-attention-backend"
    kept = launch("--attention-backend", "trtllm_mha", "--prefill-attention-backend", "fa3")
    assert run("DFD107", launch_args=kept, drafter=MIXED, version=version).status == "passed"
    own = launch(
        "--prefill-attention-backend", "trtllm_mha", "--speculative-draft-attention-backend", "fa3"
    )
    assert run("DFD107", launch_args=own, drafter=MIXED, version=version).status == "passed"


@pytest.mark.parametrize(
    ("version", "gpu", "fallback"),
    [
        ("0.5.22", "NVIDIA B200", "flashinfer"),
        ("0.5.23", "NVIDIA B200", "fa4"),
        ("0.5.23", "NVIDIA GB200", "fa4"),
        ("0.5.23", "NVIDIA H200", "flashinfer"),
        ("0.5.23", "NVIDIA RTX PRO 6000 Blackwell Server Edition", "flashinfer"),
        ("0.5.23", None, "flashinfer"),
    ],
)
def test_dfd107_a_refused_trtllm_mha_falls_back_to_fa4_on_sm100_from_0_5_23(
    version: str, gpu: str | None, fallback: str
) -> None:
    """speculative_hook.py 0.5.23:968-970: `get_platform().is_sm100` (capability major 10,
    srt/utils/common.py 0.5.23:309-312) picks fa4 for a drafter trtllm_mha refuses; 0.5.22
    (speculative_hook.py 0.5.22:870-903) and every other GPU keep flashinfer. The fix pins it."""
    trt = launch("--attention-backend", "trtllm_mha")
    gpus = [gpu] * 8 if gpu else None
    (f,) = run("DFD107", launch_args=trt, drafter=MIXED, version=version, gpus=gpus).findings
    assert f.fixes[0].value == fallback
    assert f"runs {fallback!r} instead" in f.message


@pytest.mark.parametrize("version", ["0.5.11", "0.5.23"])
def test_dfd107_other_unsupported_backends_fall_back_to_flashinfer_on_sm100(version: str) -> None:
    """The fa4 branch is the trtllm_mha refusal's only (speculative_hook.py 0.5.23:936-944
    falls back to get_fallback_backend(): flashinfer on CUDA)."""
    bad = launch("--speculative-draft-attention-backend", "flashmla")
    (f,) = run("DFD107", launch_args=bad, version=version, gpus=["NVIDIA B200"]).findings
    assert f.fixes[0].value == "flashinfer"


@pytest.mark.parametrize("version", ["0.5.17", "0.5.23"])
def test_dfd107_all_sliding_means_one_sliding_entry_per_layer(version: str) -> None:
    """`len(layer_types) == num_layers` (speculative_hook.py 0.5.17:481, 0.5.23:962): a
    layer_types shorter than num_hidden_layers is not all sliding (the config parser
    refuses such a file; a config built by hand can still carry one)."""
    trt = launch("--attention-backend", "trtllm_mha")
    short = MIXED.model_copy(update={"layer_types": ["sliding_attention"] * 4})  # six layers
    assert run("DFD107", launch_args=trt, drafter=short, version=version).status == "failed"
    full = drafter_cfg(layer_types=["sliding_attention"] * 6)
    assert run("DFD107", launch_args=trt, drafter=full, version=version).status == "passed"


@pytest.mark.parametrize(
    ("version", "resolver"),
    [
        ("0.5.11", "srt/speculative/dflash_worker.py"),
        ("0.5.13.post1", "srt/speculative/dflash_worker.py"),
        ("0.5.14", "srt/speculative/dflash_worker_v2.py"),
        ("0.5.15", "srt/arg_groups/speculative_hook.py"),
        ("0.5.23", "srt/arg_groups/speculative_hook.py"),
    ],
)
def test_dfd107_names_the_file_that_resolves_the_backend(version: str, resolver: str) -> None:
    bad = launch("--attention-backend", "flashmla")
    (f,) = run("DFD107", launch_args=bad, version=version).findings
    assert resolver in f.message


def _wheel_draft_backends(root: Path, resolver: str) -> tuple[str, ...]:
    """The backends a release's DFLASH resolver accepts, read from its source."""
    import ast

    text = (root / resolver).read_text()
    m = re.search(r"supported_draft_backends = (\([^)]*\))", text)
    if m is not None:
        return tuple(ast.literal_eval(m.group(1)))
    assert "supported_draft_backends = DRAFT_ATTENTION_BACKEND_CHOICES" in text
    choices = root / "srt/arg_groups/choices.py"
    text = choices.read_text() if choices.is_file() else (root / "srt/server_args.py").read_text()
    m = re.search(r"^DRAFT_ATTENTION_BACKEND_CHOICES = (\[[^\]]*\])", text, re.M)
    assert m is not None
    return tuple(ast.literal_eval(m.group(1)))


@pytest.mark.skipif(not WHEELS.is_dir(), reason="published SGLang wheels not unpacked here")
@pytest.mark.parametrize(
    "version", sorted(p.name for p in WHEELS.iterdir()) if WHEELS.is_dir() else []
)
def test_dfd107_version_table_matches_the_wheels(version: str) -> None:
    """sglang_versions' draft backend facts, read back from every release's resolver."""
    from dflash_doctor.sglang_versions import facts_for, parse_version

    parsed = parse_version(version)
    assert parsed is not None
    vf = facts_for(parsed)
    root = WHEELS / version / "sglang"
    text = (root / vf.draft_backend_resolver).read_text()
    assert "def _resolve_dflash_draft_attention_backend" in text or "DFLASH draft worker" in text
    # The draft flag first, then the prefill backend (get_attention_backends /
    # attention_backends_of return prefill_attention_backend, else attention_backend).
    assert re.search(r"draft_backend = \w+\.speculative_draft_attention_backend", text)
    assert re.search(
        r"draft_backend, _ = (\w+\.get_attention_backends\(\)|attention_backends_of)", text
    )
    assert _wheel_draft_backends(root, vf.draft_backend_resolver) == vf.draft_backends
    assert ("if not (all_sliding or all_causal)" in text) is vf.trtllm_draft_conditional
    assert ('fallback_backend = "fa4"' in text) is vf.trtllm_sm100_fa4
    for older in ("srt/speculative/dflash_worker.py", "srt/speculative/dflash_worker_v2.py"):
        if older != vf.draft_backend_resolver and (root / older).is_file():
            assert "speculative_draft_attention_backend = None" not in (root / older).read_text()
