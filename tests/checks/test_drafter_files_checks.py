"""DFD160-DFD163 (issue 25 items 1-4): quantized drafter, unread window/causality dialect,
unregistered drafter class, mask-embedding sidecar; and the facts they read."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from dflash_doctor.checks import CATALOG
from dflash_doctor.checks.base import CheckResult
from dflash_doctor.errors import FactError
from dflash_doctor.facts.drafter_files import (
    MAX_INDEX_BYTES,
    parse_safetensors_index,
    sidecar_mask_token_id,
)
from dflash_doctor.facts.models import DrafterFiles, Fact, HostFacts, SGLangCode
from dflash_doctor.facts.sglang_code import parse_dflash_model_source
from dflash_doctor.runner import run_check
from tests.conftest import REPO, drafter_cfg, host_facts, launch

SIDECAR = REPO / "fixtures/checks/DFD163/clean/drafter/mask_embedding.pt"
NEMOTRON: dict[str, Any] = {
    "quantization_config": {"quant_method": "modelopt", "quant_algo": "W4A16_NVFP4"},
    "has_embed_tokens": True,
    "has_lm_head": False,
    "dflash_config": {
        "mask_token_id": 163838,
        "target_layer_ids": [1, 12],
        "sample_from_anchor": False,
    },
    "eagle_aux_hidden_state_layer_ids": [2, 13],
}
PACKED = ["layers.0.self_attn.q_proj.weight_packed", "fc.weight_scale", "norm.weight"]


def files(**kw: Any) -> DrafterFiles:
    return DrafterFiles(directory="/models/d", **kw)


def run(check_id: str, facts: HostFacts) -> CheckResult:
    return run_check(CATALOG[check_id], facts)


def facts_with(
    version: str | None = "0.5.23",
    drafter_files: DrafterFiles | None = None,
    code: SGLangCode | None = None,
    flags: tuple[str, ...] = (),
    **cfg: Any,
) -> HostFacts:
    facts = host_facts(drafter=drafter_cfg(**cfg), launch_args=launch(*flags), version=version)
    update: dict[str, Any] = {}
    if drafter_files is not None:
        update["drafter_files"] = Fact.of(drafter_files, "d")
    if code is not None:
        update["sglang_code"] = Fact.of(code, code.path)
    return facts.model_copy(update=update)


# facts ------------------------------------------------------------------------------------


def test_index_names_the_quantized_tensors() -> None:
    data = json.dumps({"weight_map": {n: "a.safetensors" for n in PACKED}}).encode()
    assert parse_safetensors_index(data) == (3, 2, sorted(PACKED[:2]))


@pytest.mark.parametrize(
    "data",
    [b"\xff\xfe", b"[1]", b'{"weight_map": 3}', b"{" * 100_000, b" " * (MAX_INDEX_BYTES + 1)],
)
def test_a_hostile_index_is_one_fact_error(data: bytes) -> None:
    with pytest.raises(FactError):
        parse_safetensors_index(data)


def test_the_sidecar_token_id_is_read_from_a_real_torch_save() -> None:
    assert sidecar_mask_token_id(SIDECAR.read_bytes()) == (163838, False, None)


def _zip(pickle: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        zf.writestr("archive/data.pkl", pickle)
    return out.getvalue()


def test_a_sidecar_pickle_is_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    evil = b"cos\nsystem\n(S'touch " + str(marker).encode() + b"'\ntR."
    token, _, note = sidecar_mask_token_id(_zip(evil))
    assert token is None and note and not marker.exists()


@pytest.mark.parametrize(
    ("blob", "why"),
    [
        (b"not a zip", "not a zip"),
        (_zip(b"\x80\x02}q\x00X\r\x00\x00\x00mask_token_idq\x01X\x01\x00\x00\x00xs."), "plain"),
        (_zip(b"\x80\x02}q\x00."), "no mask_token_id"),
        (_zip(b"\x80\x02\xff"), "readable"),
    ],
)
def test_a_sidecar_that_cannot_be_read_safely_says_why(blob: bytes, why: str) -> None:
    token, _, note = sidecar_mask_token_id(blob)
    assert token is None and note is not None and why in note


def test_drafter_config_keeps_quantization_and_dialect_keys() -> None:
    cfg = drafter_cfg(
        quantization_config={"quant_method": "compressed-tensors"},
        is_causal=False,
        dflash_config={"use_swa": True, "swa_window_size": 512, "causal": True},
    )
    assert cfg.quantization == "compressed-tensors" and not cfg.nemotron_35_draft
    assert (cfg.dflash_use_swa, cfg.swa_window_size, cfg.dflash_causal) == (True, 512, True)
    assert cfg.is_causal_declared is False
    assert drafter_cfg(**NEMOTRON).nemotron_35_draft


@pytest.mark.parametrize(
    ("version", "names"),
    [
        ("0.5.11", ["DFlashDraftModel"]),
        ("0.5.19", ["DFlashDraftModel", "DFlashLagunaForCausalLM", "MuseGlimmerAssistantModel"]),
    ],
)
def test_entry_classes_of_the_wheels_dflash_py(version: str, names: list[str]) -> None:
    path = Path(f"/work/wheels/src/{version}/sglang/srt/models/dflash.py")
    if not path.is_file():
        pytest.skip("wheels not unpacked here")
    code = parse_dflash_model_source(path.read_bytes(), str(path))
    assert code.entry_classes is not None and code.entry_classes[: len(names)] == names
    assert ("DFlash2DraftModel" in code.entry_classes) is (version == "0.5.19")


# DFD160 -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "says"), [("0.5.11", "without quant_config"), ("0.5.23", "fc")]
)
def test_dfd160_fires_at_both_ends(version: str, says: str) -> None:
    r = run(
        "DFD160",
        facts_with(version, quantization_config={"quant_method": "compressed-tensors"}),
    )
    (f,) = r.findings
    assert r.status == "failed" and says in f.message
    assert f.fixes[0].action == "manual"


def test_dfd160_fires_on_packed_tensors_alone() -> None:
    found = files(
        index_path="/models/d/i.json", tensors=3, quantized_tensors=2, quantized_names=PACKED[:2]
    )
    (f,) = run("DFD160", facts_with("0.5.23", found)).findings
    assert any(e.file == "/models/d/i.json" and "2 of 3" in e.text for e in f.evidence)


def test_dfd160_nemotron_layout_quantized_from_0519() -> None:
    assert run("DFD160", facts_with("0.5.19", **NEMOTRON)).status == "passed"
    (f,) = run("DFD160", facts_with("0.5.18", **NEMOTRON)).findings
    assert (f.fixes[0].action, f.fixes[0].value) == ("upgrade_sglang", "0.5.19")


def test_dfd160_passes_an_unquantized_drafter() -> None:
    clean = files(index_path="/models/d/i.json", tensors=3)
    assert run("DFD160", facts_with("0.5.11", clean)).status == "passed"


def test_dfd160_an_unreadable_index_is_unjudged_not_passed() -> None:
    unread = files(index_error="h:/models/d/model.safetensors.index.json: larger than 16 MiB")
    r = run("DFD160", facts_with("0.5.23", unread))
    assert r.status == "skipped" and "could not be read" in (r.reason or "")
    quant: dict[str, Any] = {"quantization_config": {"quant_method": "compressed-tensors"}}
    assert run("DFD160", facts_with("0.5.23", unread, **quant)).status == "failed"


# DFD161 -----------------------------------------------------------------------------------

DIALECT: dict[str, Any] = {
    "mask_token_id": 163838,
    "use_swa": True,
    "swa_window_size": 2048,
    "causal": True,
}
NO_WINDOW: dict[str, Any] = {
    "layer_types": None,
    "sliding_window": None,
    "use_sliding_window": False,
}


@pytest.mark.parametrize("version", ["0.5.11", "0.5.23"])
def test_dfd161_reports_window_and_causality_per_layer(version: str) -> None:
    r = run("DFD161", facts_with(version, dflash_config=DIALECT, **NO_WINDOW))
    window, causal = r.findings
    assert window.impact["Trained window (tokens)"] == 2048
    assert window.impact["Layers served beyond their window"] == "0-5"
    assert causal.impact["Layers served non-causal"] == "0-5"


def test_dfd161_window_flag_at_the_trained_window_serves_it() -> None:
    r = run(
        "DFD161",
        facts_with(
            "0.5.23",
            flags=("--speculative-draft-window-size", "2048"),
            dflash_config={**DIALECT, "causal": None},
            **NO_WINDOW,
        ),
    )
    assert r.status == "passed"


def test_dfd161_is_causal_is_read_from_0517_only() -> None:
    full: dict[str, Any] = {"layer_types": ["full_attention"] * 6, "is_causal": True}
    causal: dict[str, Any] = {"mask_token_id": 163838, "causal": True}
    assert run("DFD161", facts_with("0.5.17", dflash_config=causal, **full)).status == "passed"
    (f,) = run("DFD161", facts_with("0.5.16", dflash_config=causal, **full)).findings
    assert f.fixes[0].value == "0.5.17"


def test_dfd161_skips_without_the_dialect() -> None:
    assert run("DFD161", facts_with("0.5.23")).status == "skipped"


def test_dfd161_nemotron_window_is_read() -> None:
    nem: dict[str, Any] = {
        **NEMOTRON,
        "dflash_config": {**NEMOTRON["dflash_config"], "swa_window_size": 2048},
    }
    assert run("DFD161", facts_with("0.5.23", **nem)).status == "passed"


# DFD162 -----------------------------------------------------------------------------------


def test_dfd162_dflash2_registered_from_0519() -> None:
    arch: dict[str, Any] = {"architectures": ["DFlash2DraftModel"]}
    (f,) = run("DFD162", facts_with("0.5.18", **arch)).findings
    assert (f.fixes[0].action, f.fixes[0].value) == ("upgrade_sglang", "0.5.19")
    assert run("DFD162", facts_with("0.5.19", **arch)).status == "passed"


@pytest.mark.parametrize("version", ["0.5.11", "0.5.23"])
def test_dfd162_nemo_class_registered_by_no_release(version: str) -> None:
    (f,) = run("DFD162", facts_with(version, architectures=["Qwen3DFlashDraftModel"])).findings
    assert f.fixes[0].action == "manual" and "not supported for now" in f.message


def test_dfd162_the_hosts_entry_class_decides() -> None:
    patched = SGLangCode(
        path="/site/sglang/srt/models/dflash.py",
        honours_layer_types=True,
        evidence="x",
        entry_classes=["DFlashDraftModel"],
        entry_line=9,
    )
    arch: dict[str, Any] = {"architectures": ["DFlash2DraftModel"]}
    (f,) = run("DFD162", facts_with("0.5.23", code=patched, **arch)).findings
    assert any(e.file == patched.path and e.line == 9 for e in f.evidence)
    # A class another module registers (models/dspark.py) is not dflash.py's to list.
    dspark: dict[str, Any] = {"architectures": ["Qwen3DSparkModel"]}
    assert run("DFD162", facts_with("0.5.23", code=patched, **dspark)).status == "passed"


# DFD163 -----------------------------------------------------------------------------------

SIDE = files(sidecar_path="/models/d/mask_embedding.pt", sidecar_mask_token_id=163838)


@pytest.mark.parametrize("version", ["0.5.11", "0.5.19"])
def test_dfd163_sidecar_not_loaded_before_0520(version: str) -> None:
    (f,) = run("DFD163", facts_with(version, SIDE)).findings
    assert (f.fixes[0].action, f.fixes[0].value) == ("upgrade_sglang", "0.5.20")


@pytest.mark.parametrize("version", ["0.5.20", "0.5.23"])
def test_dfd163_mismatch_is_sglangs_refusal(version: str) -> None:
    other = SIDE.model_copy(update={"sidecar_mask_token_id": 5})
    (f,) = run("DFD163", facts_with(version, other)).findings
    assert "mask_token_id=5, but the current resolved mask_token_id=163838" in f.message
    assert run("DFD163", facts_with(version, SIDE)).status == "passed"


def test_dfd163_unreadable_id_skips_that_half_and_no_sidecar_passes() -> None:
    unread = files(sidecar_path="/models/d/mask_embedding.pt", sidecar_note="not a zip")
    r = run("DFD163", facts_with("0.5.23", unread))
    assert r.status == "skipped" and r.reason and "not a zip" in r.reason
    assert run("DFD163", facts_with("0.5.23", files())).status == "passed"


def test_dfd163_per_position_sidecar_is_refused_from_0520() -> None:
    per = SIDE.model_copy(update={"sidecar_per_position": True})
    (f,) = run("DFD163", facts_with("0.5.20", per)).findings
    assert "per-position mask embeddings are not supported" in f.message
    # The token id is compared first: a mismatch is the refusal SGLang raises.
    both = per.model_copy(update={"sidecar_mask_token_id": 7})
    (f,) = run("DFD163", facts_with("0.5.23", both)).findings
    assert "mask_token_id=7" in f.message


def test_per_position_flag_is_read_from_the_opcodes() -> None:
    # protocol 2: {"mask_token_id": 5, "per_position": True}, as torch.save pickles a dict
    pkl = (
        b"\x80\x02}q\x00(X\r\x00\x00\x00mask_token_idq\x01K\x05"
        b"X\x0c\x00\x00\x00per_positionq\x02\x88u."
    )
    assert sidecar_mask_token_id(_zip(pkl)) == (5, True, None)


def test_a_silent_collapse_names_a_quantized_drafter_checkpoint() -> None:
    from dflash_doctor.checks.silent_collapse import likely_causes

    quant: dict[str, Any] = {"quantization_config": {"quant_method": "compressed-tensors"}}
    assert any("DFD160" in c for c in likely_causes(facts_with("0.5.23", **quant)))
    assert not any("DFD160" in c for c in likely_causes(facts_with("0.5.23", **NEMOTRON)))
    assert not any("DFD160" in c for c in likely_causes(facts_with("0.5.23")))


def test_the_finder_reads_hostile_files_beside_the_drafter_as_one_line_each(
    tmp_path: Path,
) -> None:
    from dflash_doctor.finders.drafter_files import find_drafter_files
    from dflash_doctor.transport.local import LocalTransport

    cfg = drafter_cfg().model_copy(update={"path": str(tmp_path / "config.json")})
    t = LocalTransport("h")
    found = find_drafter_files(t, "h", cfg).value
    assert found is not None and found.index_path is None and found.sidecar_path is None
    (tmp_path / "model.safetensors.index.json").write_bytes(b"{" * (MAX_INDEX_BYTES + 10))
    (tmp_path / "mask_embedding.pt").mkdir()  # not a regular file
    found = find_drafter_files(t, "h", cfg).value
    assert found is not None and found.index_error is not None
    assert found.index_error.startswith("h:") and "\n" not in found.index_error
    assert found.sidecar_path is not None and found.sidecar_mask_token_id is None
    assert found.sidecar_note and "\n" not in found.sidecar_note


def test_the_registry_data_holds_every_wheels_dflash_entry_class() -> None:
    """DFD162's fallback (dflash_capture.json `known`, scripts/gen_dflash_capture.py) agrees
    with each release's models/dflash.py EntryClass, read as the host's file is read."""
    from dflash_doctor.facts.capture_hooks import capture_support

    wheels = sorted(Path("/work/wheels/src").glob("0.5.*/sglang/srt/models/dflash.py"))
    if not wheels:
        pytest.skip("wheels not unpacked here")
    for path in wheels:
        version = path.parts[-5]
        code = parse_dflash_model_source(path.read_bytes(), str(path))
        assert code.entry_classes, version
        for name in code.entry_classes:
            answer = capture_support(version, name)
            assert answer is not None and answer.known and answer.module == "dflash", (
                version,
                name,
            )
