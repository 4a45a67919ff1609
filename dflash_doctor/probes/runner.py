"""Ship the attention probe to a host, run it with the host's Python, validate its JSON."""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from dflash_doctor.errors import DoctorError, FactError, validation_line
from dflash_doctor.facts.models import DrafterConfig, LaunchArgs
from dflash_doctor.kv_math import draft_kv
from dflash_doctor.probes.models import ProbeResult
from dflash_doctor.shipped import script_source
from dflash_doctor.transport.base import Transport

PROBE_TIMEOUT = 600.0
DEFAULT_BUDGET_MIB = 4096  # the probe's own default too (attention_probe.DEFAULT_BUDGET_MIB)


def default_contexts(window: int | None) -> list[int]:
    """512, the window, then 2x, 4x and 8x it (the memory budget caps the long ones)."""
    if not window:
        return [512, 2048, 8192]
    return sorted({512, window, 2 * window, 4 * window, 8 * window})


def probe_spec(
    drafter: DrafterConfig,
    config_json: dict[str, Any],
    *,
    contexts: list[int] | None = None,
    window: int | None = None,
    launch: LaunchArgs | None = None,
    budget_mib: int = DEFAULT_BUDGET_MIB,
    device: str = "auto",
    dtype: str = "float32",
    weights: str = "random",
    weights_dir: str | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    window = window or drafter.effective_sliding_window
    lengths = contexts or default_contexts(window)
    tp = launch.tp_size if launch else 1
    page = (launch.page_size if launch else None) or 1
    kv_dtype = (launch.kv_cache_dtype if launch else None) or "auto"
    sizes = [
        draft_kv(
            drafter,
            context_tokens=n,
            window=window or n,
            page_size=page,
            tp_size=tp,
            kv_cache_dtype=kv_dtype,
        )
        for n in lengths
    ]
    # The probe measures KV per GPU: heads split over TP ranks as on the server.
    shaped = dict(config_json)
    shaped["num_key_value_heads"] = max(1, -(-drafter.num_key_value_heads // max(tp, 1)))
    return {
        "config": shaped,
        "contexts": lengths,
        "block_size": drafter.block_size or 16,
        "window": window,
        "budget_mib": budget_mib,
        "device": device,
        "dtype": dtype,
        # the dtype the KV cache is stored in: --kv-cache-dtype, 'auto' meaning the model's
        "kv_dtype": kv_dtype if kv_dtype != "auto" else (drafter.dtype or "bfloat16"),
        "weights": weights,
        "weights_dir": weights_dir,
        "seed": seed,
        "kv_tokens": [[kv.full_tokens, kv.windowed_tokens] for kv in sizes],
        "_kv_formula": [[kv.full_bytes, kv.windowed_bytes] for kv in sizes],
    }


def run_probe(transport: Transport, spec: dict[str, Any], python: str = "python3") -> ProbeResult:
    formula = spec.pop("_kv_formula", None)
    # Shipped as text, never imported: the script imports torch, which the CLI must not pay for.
    argv = [python, "-c", script_source("probes/attention_probe.py"), json.dumps(spec)]
    try:
        res = transport.run(argv, timeout=PROBE_TIMEOUT)
    except DoctorError:
        raise
    text = res.stdout.decode("utf-8", "replace").strip().splitlines()
    if not text:
        err = res.stderr.decode("utf-8", "replace").strip().splitlines()
        last = err[-1] if err else f"exit {res.returncode}"
        raise FactError(f"{transport.host}: probe printed nothing ({last})")
    try:
        result = ProbeResult.model_validate_json(text[-1])
    except ValidationError as e:
        raise FactError(f"{transport.host}: probe output invalid: {validation_line(e)}") from None
    if result.error:
        raise FactError(f"{transport.host}: probe failed: {result.error}")
    if formula:
        by_length = dict(zip(spec["contexts"], formula, strict=True))
        for c in result.contexts:
            c.kv_formula_full_bytes, c.kv_formula_windowed_bytes = by_length[c.context]
    return result
