"""Ship the attention probe to a host, run it with the host's Python, validate its JSON."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from dflash_doctor.defaults import DEFAULT_AGREEMENT_TOKENS as DEFAULT_AGREEMENT_TOKENS
from dflash_doctor.defaults import DEFAULT_BUDGET_MIB as DEFAULT_BUDGET_MIB
from dflash_doctor.errors import FactError, validation_line
from dflash_doctor.facts.models import DrafterConfig
from dflash_doctor.facts.probe_result import ProbeResult
from dflash_doctor.probes.scenarios import scenarios_for, spans_input
from dflash_doctor.shipped import script_source
from dflash_doctor.transport.base import Transport

PROBE_TIMEOUT = 600.0
# The one line shown when the host's Python cannot import torch.
TORCH_HINT = (
    "install it there (CPU build: pip install torch --index-url "
    "https://download.pytorch.org/whl/cpu), or pass --python with a Python that has it"
)


def default_contexts(window: int | None) -> list[int]:
    """512, the window (trained, else the draft window), then 2x, 4x and 8x it."""
    if not window:
        return [512, 2048, 8192]
    return sorted({512, window, 2 * window, 4 * window, 8 * window})


def kv_storage_dtype(kv_cache_dtype: str | None, drafter: DrafterConfig) -> str:
    """How the draft KV is stored: --kv-cache-dtype, 'auto' meaning the drafter's dtype."""
    if kv_cache_dtype and kv_cache_dtype != "auto":
        return {"fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2"}.get(kv_cache_dtype, "bfloat16")
    return drafter.dtype if drafter.dtype in ("float32", "float16", "bfloat16") else "bfloat16"


def _require_layer_types(drafter: DrafterConfig) -> None:
    """The probe builds each layer by its type: it needs them known and of the two kinds."""
    if drafter.unknown_layer_types:
        raise FactError(
            f"cannot probe: layer_types has types SGLang does not build: "
            f"{drafter.unknown_layer_types}"
        )
    if (
        drafter.layer_types_source == "unknown"
        or len(drafter.layer_types) != drafter.num_hidden_layers
    ):
        raise FactError(
            f"cannot probe: the drafter's layer types are unknown (no layer_types, and "
            f"model_type {drafter.model_type!r} has no modelled derivation)"
        )


def probe_spec(
    drafter: DrafterConfig,
    config_json: dict[str, Any],
    *,
    honours_layer_types: bool | None,
    draft_window: int | None = None,
    contexts: list[int] | None = None,
    window: int | None = None,
    tp_size: int = 1,
    page_size: int = 1,
    kv_cache_dtype: str | None = None,
    version: str | None = None,
    budget_mib: int = DEFAULT_BUDGET_MIB,
    device: str = "auto",
    dtype: str = "float32",
    weights: str = "random",
    weights_dir: str | None = None,
    agreement_tokens: int = DEFAULT_AGREEMENT_TOKENS,
    seed: int = 0,
) -> dict[str, Any]:
    """The probe's input for one host's configuration.

    `window` replaces the drafter's trained sliding window for a reduced run; a draft
    window flag equal to the trained window follows it, so "flag at the window" stays so.
    """
    _require_layer_types(drafter)
    trained = drafter.effective_sliding_window
    if window and trained and draft_window == trained:
        draft_window = window
    # An override scales the trained window down; it never invents one.
    window = (window or trained) if trained else None
    lengths = contexts or default_contexts(window or draft_window)
    layer_types = list(drafter.layer_types)
    scenarios = scenarios_for(
        layer_types,
        window,
        honours_layer_types=honours_layer_types,
        draft_window=draft_window,
        page_size=page_size,
        version=version,
    )
    return {
        "config": config_json,
        "layer_types": layer_types,
        "tp_size": max(tp_size, 1),
        "contexts": lengths,
        "block_size": drafter.block_size or 16,
        "window": window,
        "scenarios": spans_input(scenarios, layer_types, window, lengths),
        "reference": "trained",
        "kv_dtype": kv_storage_dtype(kv_cache_dtype, drafter),
        "agreement_tokens": agreement_tokens,
        "budget_mib": budget_mib,
        "device": device,
        "dtype": dtype,
        "weights": weights,
        "weights_dir": weights_dir,
        "seed": seed,
    }


def run_probe(
    transport: Transport,
    spec: dict[str, Any],
    python: str = "python3",
    on_progress: Callable[[str], None] | None = None,
    *,
    launcher: list[str] | None = None,
) -> ProbeResult:
    """Run the probe; `on_progress` gets its progress lines (one per context) as they come.

    `launcher`: the argv that starts the host's Python safely (`host_exec.HostExec`).
    """
    # Shipped as text, never imported: the script imports torch, which the CLI must not pay for.
    argv = [
        *(launcher or [python]),
        "-c",
        script_source("on_host/attention_probe.py"),
        json.dumps(spec),
    ]
    on_stderr = None
    if on_progress is not None:
        report = on_progress

        def on_stderr(line: bytes) -> None:
            text = line.decode("utf-8", "replace").strip()
            if text.startswith("probe: "):
                report(text.removeprefix("probe: "))

    res = transport.run(argv, timeout=PROBE_TIMEOUT, on_stderr=on_stderr)
    text = res.stdout.decode("utf-8", "replace").strip().splitlines()
    if not text:
        err = res.stderr.decode("utf-8", "replace").strip().splitlines()
        last = err[-1] if err else f"exit {res.returncode}"
        raise FactError(f"{transport.host}: probe printed nothing ({last})")
    try:
        result = ProbeResult.model_validate_json(text[-1])
    except ValidationError as e:
        raise FactError(f"{transport.host}: probe output invalid: {validation_line(e)}") from None
    if result.missing == "torch":
        raise FactError(
            f"{transport.host}: the probe needs torch, which {result.python or python} "
            f"cannot import ({result.error}); {TORCH_HINT}"
        )
    if result.error:
        raise FactError(f"{transport.host}: probe failed: {result.error}")
    return result
