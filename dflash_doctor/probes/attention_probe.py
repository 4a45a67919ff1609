"""Attention probe: the drafter's attention stack with its trained sliding window vs full context.

Self-contained (stdlib + torch, nothing from dflash_doctor): it is shipped to a host and run
with the host's Python, `python3 attention_probe.py '<json>'`, and prints one JSON object.

Input (JSON): {"config": <drafter config.json>, "contexts": [int], "block_size": int,
"budget_mib": int, "device": "auto"|"cpu"|"cuda", "dtype": "float32"|"bfloat16",
"weights": "random"|"real", "weights_dir": str|null, "seed": int,
"window": int|null (override, for reduced runs), "kv_tokens": [[full, windowed]] per context}

What it builds: for every drafter layer, RMSNorm -> q/k/v projections (GQA, per-head
q_norm/k_norm as in Qwen3, RoPE with the config's theta) -> attention of the block's
queries over [context K/V; block K/V] (non-causal inside the block, as a DFlash drafter
attends) -> o_proj, residual. Context K/V are injected into every layer, as DFlash injects
the target's hidden features. The MLPs are left out: the probe measures attention.
Two runs on identical inputs: "windowed" (sliding_attention layers see only the last
`sliding_window` positions, what the drafter was trained with) and "full" (every layer sees
the whole context, what SGLang 0.5.11-0.5.13 run, and what an uncompacted cache allows).
Weights are seeded random unless "real" (then the attention tensors are read from the
drafter's safetensors); context features are seeded random either way.
"""

from __future__ import annotations

import json
import math
import os
import platform
import resource
import struct
import sys
import time
from typing import Any

import torch

PROBE_VERSION = 1
DEFAULT_BUDGET_MIB = 4096
SELF_CHECK_TOLERANCE = {"float32": 1e-4, "bfloat16": 5e-2}
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
# How SGLang stores the KV cache for each --kv-cache-dtype (and model dtypes, for 'auto').
KV_DTYPES = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "fp8_e4m3": torch.float8_e4m3fn,
    "fp8_e5m2": torch.float8_e5m2,
}


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None, eps: float = 1e-6) -> torch.Tensor:
    var = x.float().pow(2).mean(-1, keepdim=True)
    y = (x.float() * torch.rsqrt(var + eps)).to(x.dtype)
    return y * weight if weight is not None else y


def rope(x: torch.Tensor, positions: torch.Tensor, theta: float) -> torch.Tensor:
    """Neox-style rotary embedding; x is (T, heads, head_dim)."""
    half = x.shape[-1] // 2
    inv = 1.0 / (theta ** (torch.arange(0, half, dtype=torch.float64, device=x.device) / half))
    ang = positions.to(torch.float64)[:, None] * inv[None, :]
    cos = ang.cos().to(x.dtype)[:, None, :]
    sin = ang.sin().to(x.dtype)[:, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def read_safetensors(
    directory: str, wanted: set[str], dtype: torch.dtype
) -> dict[str, torch.Tensor]:
    """Read only the named tensors from the *.safetensors files of a directory."""
    codes = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}
    found: dict[str, torch.Tensor] = {}
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".safetensors"):
            continue
        with open(os.path.join(directory, name), "rb") as f:
            (size,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(size))
            base = 8 + size
            for key, meta in header.items():
                if key not in wanted or key == "__metadata__":
                    continue
                start, end = meta["data_offsets"]
                f.seek(base + start)
                raw = bytearray(f.read(end - start))
                tensor = torch.frombuffer(raw, dtype=codes[meta["dtype"]]).reshape(meta["shape"])
                found[key] = tensor.to(dtype)
    missing = sorted(wanted - set(found))
    if missing:
        raise ValueError(f"safetensors lack {len(missing)} tensors, e.g. {missing[0]}")
    return found


class Layer:
    def __init__(
        self,
        i: int,
        cfg: dict[str, Any],
        gen: torch.Generator,
        real: dict[str, torch.Tensor] | None,
        dtype: torch.dtype,
        device: str,
    ) -> None:
        hidden, heads, kv, d = cfg["hidden"], cfg["heads"], cfg["kv_heads"], cfg["head_dim"]

        def w(name: str, rows: int, cols: int) -> torch.Tensor:
            if real is not None:
                return real[f"layers.{i}.self_attn.{name}.weight"].to(device)
            return (torch.randn(rows, cols, generator=gen, dtype=dtype) / math.sqrt(cols)).to(
                device
            )

        self.q = w("q_proj", heads * d, hidden)
        self.k = w("k_proj", kv * d, hidden)
        self.v = w("v_proj", kv * d, hidden)
        self.o = w("o_proj", hidden, heads * d)

        def norm(key: str) -> torch.Tensor | None:
            t = real.get(key) if real is not None else None
            return t.to(device) if t is not None else None

        self.q_norm = norm(f"layers.{i}.self_attn.q_norm.weight")
        self.k_norm = norm(f"layers.{i}.self_attn.k_norm.weight")
        self.in_norm = norm(f"layers.{i}.input_layernorm.weight")


def context_kv(
    layer: Layer,
    cfg: dict[str, Any],
    length: int,
    gen: torch.Generator,
    dtype: torch.dtype,
    device: str,
    real: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    kv, d = cfg["kv_heads"], cfg["head_dim"]
    if real:
        feats = torch.randn(length, cfg["hidden"], generator=gen).to(dtype).to(device)
        k = (feats @ layer.k.T).view(length, kv, d)
        v = (feats @ layer.v.T).view(length, kv, d)
        del feats
    else:
        # Random weights on random features give Gaussian K/V: draw them directly.
        k = torch.randn(length, kv, d, generator=gen).to(dtype).to(device)
        v = torch.randn(length, kv, d, generator=gen).to(dtype).to(device)
    k = rms_norm(k, layer.k_norm)
    k = rope(k, torch.arange(length, device=device), cfg["rope_theta"])
    return k, v


def attend(
    layer: Layer,
    cfg: dict[str, Any],
    h: torch.Tensor,
    k_ctx: torch.Tensor,
    v_ctx: torch.Tensor,
    window: int | None,
) -> torch.Tensor:
    """One layer on the block's hidden states h (B, hidden); window None means full context."""
    b = h.shape[0]
    length = k_ctx.shape[0]
    heads, kv, d = cfg["heads"], cfg["kv_heads"], cfg["head_dim"]
    x = rms_norm(h, layer.in_norm)
    pos = torch.arange(length, length + b, device=h.device)
    q = rope(rms_norm((x @ layer.q.T).view(b, heads, d), layer.q_norm), pos, cfg["rope_theta"])
    kb = rope(rms_norm((x @ layer.k.T).view(b, kv, d), layer.k_norm), pos, cfg["rope_theta"])
    vb = (x @ layer.v.T).view(b, kv, d)
    keys = torch.cat([k_ctx, kb]).permute(1, 0, 2)  # (kv, L+B, d)
    vals = torch.cat([v_ctx, vb]).permute(1, 0, 2)
    group = heads // kv
    qg = q.permute(1, 0, 2).reshape(kv, group * b, d)  # (kv, group*B, d)
    scores = (qg.float() @ keys.float().transpose(1, 2)) / math.sqrt(d)  # (kv, group*B, L+B)
    if window is not None:
        key_pos = torch.arange(length + b, device=h.device)
        query_pos = pos.repeat(group)  # matches the (group, B) row order
        # Context keys inside the window of each query; the block itself is non-causal.
        visible = (key_pos[None, :] >= length) | (key_pos[None, :] > query_pos[:, None] - window)
        scores = scores.masked_fill(~visible[None], float("-inf"))
    out = torch.softmax(scores, dim=-1) @ vals.float()  # (kv, group*B, d)
    out = out.view(kv, group, b, d).permute(2, 0, 1, 3).reshape(b, heads * d).to(h.dtype)
    return h + out @ layer.o.T


def compare(a: torch.Tensor, b: torch.Tensor) -> dict[str, float]:
    a64, b64 = a.double().flatten(), b.double().flatten()
    diff = a64 - b64
    return {
        "max_abs_diff": float(diff.abs().max()),
        "rel_l2": float(diff.norm() / b64.norm().clamp_min(1e-30)),
        "cosine": float(torch.nn.functional.cosine_similarity(a64, b64, dim=0)),
    }


def rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def estimate_bytes(cfg: dict[str, Any], length: int, block: int, elt: int, real: bool) -> int:
    kv_bytes = 2 * length * cfg["kv_heads"] * cfg["head_dim"] * elt
    scores = cfg["heads"] * block * (length + block) * 4 * 3
    feats = length * cfg["hidden"] * elt if real else 0
    weights = (
        cfg["layers"]
        * (2 * cfg["heads"] + 2 * cfg["kv_heads"])
        * cfg["head_dim"]
        * cfg["hidden"]
        * elt
    )
    return int(kv_bytes + scores + feats + weights)


def shape_of(config: dict[str, Any], window_override: int | None) -> dict[str, Any]:
    layers = int(config["num_hidden_layers"])
    heads = int(config["num_attention_heads"])
    hidden = int(config["hidden_size"])
    types = config.get("layer_types")
    window = config.get("sliding_window") if config.get("use_sliding_window") else None
    if types is None:
        first = config.get("max_window_layers", layers)
        types = [
            "sliding_attention" if window and i >= first else "full_attention"
            for i in range(layers)
        ]
    if window_override:
        window = window_override
    theta = (
        config.get("rope_theta")
        or (config.get("rope_parameters") or {}).get("rope_theta")
        or 10000.0
    )
    return {
        "layers": layers,
        "heads": heads,
        "kv_heads": int(config.get("num_key_value_heads") or heads),
        "head_dim": int(config.get("head_dim") or hidden // heads),
        "hidden": hidden,
        "vocab": int(config.get("vocab_size") or 32000),
        "rope_theta": float(theta),
        "window": int(window) if window else None,
        "layer_types": list(types),
    }


def run(spec: dict[str, Any]) -> dict[str, Any]:
    cfg = shape_of(spec["config"], spec.get("window"))
    want = spec.get("device", "auto")
    device = "cuda" if want in ("auto", "cuda") and torch.cuda.is_available() else "cpu"
    if want == "cuda" and device != "cuda":
        return {"probe": "attention", "version": PROBE_VERSION, "refused": "no CUDA device"}
    dtype_name = spec.get("dtype", "float32")
    dtype = DTYPES[dtype_name]
    elt = torch.finfo(dtype).bits // 8
    budget = int(spec.get("budget_mib", DEFAULT_BUDGET_MIB)) * 1024 * 1024
    device_name = "cpu"
    if device == "cuda":
        free, _total = torch.cuda.mem_get_info()
        device_name = f"cuda:{torch.cuda.current_device()} ({torch.cuda.get_device_name()})"
        if free < budget:
            return {
                "probe": "attention",
                "version": PROBE_VERSION,
                "device": device_name,
                "refused": f"GPU has {free // 2**20} MiB free, below the "
                f"{budget // 2**20} MiB budget: not risking the server",
            }
    else:
        torch.set_num_threads(max(1, min(os.cpu_count() or 1, 8)))
    block = int(spec.get("block_size", 16))
    seed = int(spec.get("seed", 0))
    window = cfg["window"]
    real = spec.get("weights") == "real"
    tensors = None
    if real:
        names = set()
        for i in range(cfg["layers"]):
            for p in ("q_proj", "k_proj", "v_proj", "o_proj"):
                names.add(f"layers.{i}.self_attn.{p}.weight")
        tensors = read_safetensors(spec["weights_dir"], names, dtype)
        # norms are optional: read the ones that exist
        try:
            extra = {
                f"layers.{i}.{n}.weight"
                for i in range(cfg["layers"])
                for n in ("self_attn.q_norm", "self_attn.k_norm", "input_layernorm")
            }
            tensors.update(read_safetensors(spec["weights_dir"], extra, dtype))
        except ValueError:
            pass
    gen = torch.Generator().manual_seed(seed)
    layers = [Layer(i, cfg, gen, tensors, dtype, device) for i in range(cfg["layers"])]
    head = (
        (
            torch.randn(min(cfg["vocab"], 4096), cfg["hidden"], generator=gen)
            / math.sqrt(cfg["hidden"])
        )
        .to(dtype)
        .to(device)
    )
    results, skipped = [], []
    kv_tokens = spec.get("kv_tokens") or []
    for idx, length in enumerate(spec["contexts"]):
        need = estimate_bytes(cfg, length, block, elt, real)
        if need > budget:
            skipped.append(
                {
                    "context": length,
                    "reason": f"needs about {need / 2**20:.0f} MiB, budget {budget // 2**20} MiB",
                }
            )
            continue
        ctx_gen = torch.Generator().manual_seed(seed * 1_000_003 + length)
        h0 = torch.randn(block, cfg["hidden"], generator=ctx_gen).to(dtype).to(device)
        h_w, h_f = h0, h0.clone()
        per_layer = []
        t_w = t_f = 0.0
        peak_w = peak_f = 0
        rss0 = rss_bytes()
        for i, layer in enumerate(layers):
            k_ctx, v_ctx = context_kv(layer, cfg, length, ctx_gen, dtype, device, real)
            sliding = layer_window = None
            if cfg["layer_types"][i] == "sliding_attention" and window:
                sliding = layer_window = window
            for which in ("w", "f"):
                if device == "cuda":
                    torch.cuda.synchronize()
                    torch.cuda.reset_peak_memory_stats()
                start = time.perf_counter()
                if which == "w":
                    h_w = attend(layer, cfg, h_w, k_ctx, v_ctx, layer_window)
                else:
                    h_f = attend(layer, cfg, h_f, k_ctx, v_ctx, None)
                if device == "cuda":
                    torch.cuda.synchronize()
                    peak = torch.cuda.max_memory_allocated()
                else:
                    peak = rss_bytes() - rss0
                elapsed = time.perf_counter() - start
                if which == "w":
                    t_w += elapsed
                    peak_w = max(peak_w, peak)
                else:
                    t_f += elapsed
                    peak_f = max(peak_f, peak)
            per_layer.append(
                {"layer": i, "type": cfg["layer_types"][i], "window": sliding, **compare(h_f, h_w)}
            )
            del k_ctx, v_ctx
        logits_w = rms_norm(h_w, None) @ head.T
        logits_f = rms_norm(h_f, None) @ head.T
        agree = float((logits_w.argmax(-1) == logits_f.argmax(-1)).float().mean())
        entry: dict[str, Any] = {
            "context": length,
            "window_covers_context": window is None or length <= window - block,
            "layers": per_layer,
            "output": compare(h_f, h_w),
            "top1_agreement": agree,
            "time_windowed_s": round(t_w, 6),
            "time_full_s": round(t_f, 6),
            "peak_windowed_bytes": int(peak_w),
            "peak_full_bytes": int(peak_f),
        }
        if idx < len(kv_tokens):
            full_t, win_t = kv_tokens[idx]
            entry["kv"] = measure_kv(cfg, full_t, win_t, spec.get("kv_dtype", "bfloat16"), device)
        results.append(entry)
    below = [c["output"]["max_abs_diff"] for c in results if c["window_covers_context"]]
    tol = SELF_CHECK_TOLERANCE[dtype_name]
    return {
        "probe": "attention",
        "version": PROBE_VERSION,
        "device": device_name,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "dtype": dtype_name,
        "weights": "real" if real else "random",
        "head": "random",
        "block_size": block,
        "shape": {
            k: cfg[k]
            for k in ("layers", "heads", "kv_heads", "head_dim", "hidden", "rope_theta", "window")
        },
        "sliding_layers": [i for i, t in enumerate(cfg["layer_types"]) if t == "sliding_attention"],
        "contexts": results,
        "skipped_contexts": skipped,
        "self_check": {
            "contexts_below_window": len(below),
            "max_diff_below_window": max(below) if below else None,
            "tolerance": tol,
            "passed": bool(below) and max(below) <= tol,
        },
        "refused": None,
    }


def measure_kv(
    cfg: dict[str, Any], full_tokens: int, windowed_tokens: int, kv_dtype: str, device: str
) -> dict[str, int]:
    """Allocate the draft KV cache one request needs (per GPU), full and windowed; measure it."""
    dtype = KV_DTYPES.get(kv_dtype, torch.bfloat16)
    out = {"full_tokens": full_tokens, "windowed_tokens": windowed_tokens}
    for name, tokens in (("full", full_tokens), ("windowed", windowed_tokens)):
        cache = [
            torch.empty(2, tokens, cfg["kv_heads"], cfg["head_dim"], dtype=dtype, device=device)
            for _ in range(cfg["layers"])
        ]
        out[f"{name}_bytes_measured"] = sum(t.numel() * t.element_size() for t in cache)
        del cache
    return out


def main() -> int:
    spec = json.loads(sys.argv[1] if len(sys.argv) > 1 else sys.stdin.read())
    try:
        result = run(spec)
    except (ValueError, KeyError, OSError, RuntimeError) as e:
        result = {
            "probe": "attention",
            "version": PROBE_VERSION,
            "error": f"{type(e).__name__}: {e}",
        }
    print(json.dumps(result))
    return 0 if "error" not in result else 1


if __name__ == "__main__":
    sys.exit(main())
