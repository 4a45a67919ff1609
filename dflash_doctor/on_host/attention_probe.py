"""Attention probe: the drafter's attention stack over the spans SGLang serves vs those it trained.

Self-contained (stdlib + torch, nothing from dflash_doctor): it is shipped to a host and run
with the host's Python, `python3 -c <this file> '<json>'`, and prints one JSON object on
stdout; progress goes to stderr, one line per context length.

Exit codes: 0 measured (or refused, with the reason in "refused"); 1 the input or a weight
file was wrong ("error" says which); 3 torch is not importable by this Python ("missing":
"torch", "error" says why). No traceback is printed in any of these cases.

Input (JSON), schema version 2:
  {"config": <drafter config.json>, "layer_types": [str] (as the package derived them),
   "tp_size": int, "contexts": [int], "block_size": int, "window": int|null (the trained
   sliding window, echoed in "shape" for labels),
   "scenarios": [{"name": str, "label": str,
                  "spans": [[{"band": int|null, "last": int|null}, ... one per layer]
                            ... one list per context]}],
   "reference": scenario name (what the others are compared against, "trained"),
   "kv_dtype": "bfloat16"|"float16"|"float32"|"fp8_e4m3"|"fp8_e5m2" (how the KV is stored),
   "agreement_tokens": int, "budget_mib": int, "device": "auto"|"cpu"|"cuda",
   "dtype": "float32"|"bfloat16", "weights": "random"|"real", "weights_dir": str|null,
   "seed": int}

A layer span says which committed context tokens one draft layer attends over:
  "band": W  a query at position p sees context positions > p - W (W tokens counting
             itself: HF's sliding_window; SGLang stores window_left = W - 1,
             speculative/dflash_utils.py:355-356 in 0.5.14); null: no band.
  "last": K  only the last K committed tokens are in the draft's view (the draft worker's
             compact req->token table under --speculative-draft-window-size, page
             alignment already applied by the caller); null: the whole context.
The package computes these spans per layer, per scenario, per context from SGLang's
behaviour; this script only measures them.

What it builds: rank 0's shard of every drafter layer as SGLang's tensor parallelism splits
it (q/k/v projection rows and o_proj columns for heads/tp query heads and ceil(kv/tp) KV
heads, KV heads replicated below one per GPU): RMSNorm -> q/k/v (GQA, per-head q_norm and
k_norm as in Qwen3, RoPE with the config's theta) -> attention of each draft block's
queries over [visible context K/V; the block's own K/V] (non-causal inside the block) ->
o_proj (rank 0's partial sum, before the all-reduce), residual. The context K/V are
injected into every layer, as DFlash injects the target's hidden features. MLPs are left
out: the probe measures attention. Weights are made once per run (seeded random, or the
attention tensors read from the drafter's safetensors with "weights": "real") and held in
bfloat16; the projections run in bfloat16 as SGLang serves the drafter, everything else
(norms, RoPE, attention, softmax, the residual stream) in "dtype" (float32 by default).

For each context every scenario runs on identical inputs: `agreement_tokens` draft tokens,
as independent blocks of `block_size` at the same position (one request's next draft step,
drawn many times). Reported per context: each scenario's visible context tokens per layer,
its draft attention reads per step (bytes of K/V one draft step reads, per GPU), and for
every scenario but the reference its divergence from the reference per layer and at the
output (max abs diff, relative L2, cosine) and the top-1 agreement of logits through one
random LM head, with a 95% Wilson interval. The draft KV one request holds is reported
full (one draft slot per target token, as in every SGLang release); no windowed KV cache
is measured, because SGLang never allocates one.
"""

from __future__ import annotations

import functools
import json
import math
import os
import platform
import resource
import struct
import sys
import time
from typing import Any

try:
    import torch
except (ImportError, OSError) as e:  # the host's Python has no usable torch
    TORCH_MISSING: str | None = f"{type(e).__name__}: {e}"
else:
    TORCH_MISSING = None

PROBE_VERSION = 2
EXIT_ERROR = 1
EXIT_NO_TORCH = 3
DEFAULT_BUDGET_MIB = 4096
# 512 draft tokens: the worst-case (p = 0.5) 95% half-width of the agreement is
# 1.96 * sqrt(0.25 / 512) = 0.043, and 0.026 near p = 0.9; 16 tokens (one block) gave
# steps of 1/16 and a half-width of 0.25.
DEFAULT_AGREEMENT_TOKENS = 256
HEAD_ROWS = 4096  # rows of the random LM head (vocab entries compared for top-1)
SCORE_CHUNK_BYTES = 8 << 20  # attention scores computed this many bytes at a time
CPU_THREADS = 1
STORE_DTYPE_NAME = "bfloat16"  # how weights and the LM head are held (the drafter's dtype)
SELF_CHECK_TOLERANCE = {"float32": 1e-4, "bfloat16": 5e-2}
DTYPE_NAMES = ("float32", "bfloat16")
# Bytes per element of the KV cache for each --kv-cache-dtype (and the model dtypes for 'auto').
KV_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "fp8_e4m3": 1, "fp8_e5m2": 1}


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None, eps: float = 1e-6) -> torch.Tensor:
    var = x.float().pow(2).mean(-1, keepdim=True)
    y = (x.float() * torch.rsqrt(var + eps)).to(x.dtype)
    return y * weight if weight is not None else y


@functools.lru_cache(maxsize=4)
def rope_table(
    start: int, stop: int, half: int, theta: float, dtype: torch.dtype, device: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin for positions start..stop-1, made once for every layer that needs them."""
    inv = 1.0 / (theta ** (torch.arange(0, half, dtype=torch.float64) / half))
    ang = torch.arange(start, stop, dtype=torch.float64)[:, None] * inv[None, :]
    return ang.cos().to(dtype).to(device)[:, None, :], ang.sin().to(dtype).to(device)[:, None, :]


def rope(x: torch.Tensor, start: int, theta: float, repeat: int = 1) -> torch.Tensor:
    """Neox-style rotary embedding; x is (repeat * n, heads, head_dim) at positions
    start..start+n-1, `repeat` times over (independent draft blocks at one position)."""
    half = x.shape[-1] // 2
    n = x.shape[0] // repeat
    cos, sin = rope_table(start, start + n, half, theta, x.dtype, str(x.device))
    if repeat > 1:
        cos, sin = cos.repeat(repeat, 1, 1), sin.repeat(repeat, 1, 1)
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def read_safetensors(
    directory: str,
    wanted: dict[str, tuple[int | None, int | None]],
    dtype: torch.dtype,
    *,
    required: bool = True,
) -> dict[str, torch.Tensor]:
    """Read the named tensors from a directory's *.safetensors files.

    `wanted` maps a name to (rows, cols): the rows to read from its top (the TP shard of a
    row-split projection; only those bytes are read) and the columns to keep from its left
    (a column-split one, cut as soon as it is read); None keeps them all. With `required`,
    a missing tensor is an error; without, it is left out.
    """
    codes = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}
    sizes = {"F32": 4, "F16": 2, "BF16": 2}
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
                if meta["dtype"] not in codes:
                    raise ValueError(f"{name}: {key} has dtype {meta['dtype']}, not F32/F16/BF16")
                shape = list(meta["shape"])
                start, end = meta["data_offsets"]
                rows, cols = wanted[key]
                if rows is not None and shape and rows < shape[0]:
                    end = start + rows * math.prod(shape[1:]) * sizes[meta["dtype"]]
                    shape[0] = rows
                f.seek(base + start)
                raw = bytearray(f.read(end - start))
                tensor = torch.frombuffer(raw, dtype=codes[meta["dtype"]]).reshape(shape)
                if cols is not None and len(shape) == 2:
                    tensor = tensor[:, :cols]
                found[key] = tensor.to(dtype).contiguous()
                del raw
    missing = sorted(set(wanted) - set(found))
    if missing and required:
        raise ValueError(f"safetensors lack {len(missing)} tensors, e.g. {missing[0]}")
    return found


def shape_of(config: dict[str, Any], tp: int, layer_types: list[str] | None) -> dict[str, Any]:
    """The drafter's attention shape, and rank 0's shard of it under tensor parallelism."""
    layers = int(config["num_hidden_layers"])
    heads = int(config["num_attention_heads"])
    hidden = int(config["hidden_size"])
    kv = int(config.get("num_key_value_heads") or heads)
    theta = (
        config.get("rope_theta")
        or (config.get("rope_parameters") or {}).get("rope_theta")
        or 10000.0
    )
    # SGLang's QKVParallelLinear needs TP to divide the heads, and the KV heads to split
    # evenly over the ranks or be replicated evenly.
    if heads % tp or (kv % tp if kv >= tp else tp % kv):
        raise ValueError(f"TP {tp} does not split {heads} heads / {kv} KV heads evenly")
    types = list(layer_types or config.get("layer_types") or ["full_attention"] * layers)
    if len(types) != layers:
        raise ValueError(f"{len(types)} layer types for {layers} layers")
    return {
        "layers": layers,
        "heads_total": heads,
        "kv_heads_total": kv,
        # SGLang splits query heads evenly over TP ranks; KV heads too, replicating each
        # KV head over several ranks once there are fewer KV heads than ranks.
        "heads": max(1, -(-heads // tp)),
        "kv_heads": max(1, -(-kv // tp)),
        "head_dim": int(config.get("head_dim") or hidden // heads),
        "hidden": hidden,
        "vocab": int(config.get("vocab_size") or 32000),
        "rope_theta": float(theta),
        "layer_types": types,
    }


class Layer:
    """Rank 0's shard of one drafter attention layer.

    The projections are kept in bfloat16, the drafter's own dtype (a float32 run holds half
    the memory) and applied in it; q, k and v are fused into one matrix.
    """

    def __init__(
        self,
        i: int,
        cfg: dict[str, Any],
        gen: torch.Generator,
        real: dict[str, torch.Tensor] | None,
        dtype: torch.dtype,
        device: str,
    ) -> None:
        hidden, d = cfg["hidden"], cfg["head_dim"]
        q_rows, kv_rows = cfg["heads"] * d, cfg["kv_heads"] * d
        self.dtype = dtype

        def w(name: str, rows: int, cols: int) -> torch.Tensor:
            if real is not None:
                t = real[f"layers.{i}.self_attn.{name}.weight"]
                # o_proj is split by columns (its input is the heads), the others by rows.
                t = t[:, :cols] if name == "o_proj" else t[:rows]
            else:
                t = torch.randn(rows, cols, generator=gen) / math.sqrt(cols)
            return t.to(getattr(torch, STORE_DTYPE_NAME)).contiguous().to(device)

        q, k, v = (
            w("q_proj", q_rows, hidden),
            w("k_proj", kv_rows, hidden),
            w("v_proj", kv_rows, hidden),
        )
        self.o = w("o_proj", hidden, q_rows)
        self.shard = {
            "q_proj": list(q.shape),
            "k_proj": list(k.shape),
            "v_proj": list(v.shape),
            "o_proj": list(self.o.shape),
        }
        # q, k and v in one matrix, as SGLang's QKVParallelLinear: one matmul per state.
        self.qkv = torch.cat([q, k, v])
        self.split = (q_rows, kv_rows, kv_rows)
        del q, k, v

        def norm(key: str) -> torch.Tensor | None:
            t = real.get(key) if real is not None else None
            return t.to(dtype).to(device) if t is not None else None

        self.q_norm = norm(f"layers.{i}.self_attn.q_norm.weight")
        self.k_norm = norm(f"layers.{i}.self_attn.k_norm.weight")
        self.in_norm = norm(f"layers.{i}.input_layernorm.weight")

    def kv_weights(self) -> tuple[torch.Tensor, torch.Tensor]:
        q_rows, kv_rows, _ = self.split
        return (
            self.qkv[q_rows : q_rows + kv_rows].to(self.dtype),
            self.qkv[q_rows + kv_rows :].to(self.dtype),
        )


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
        # Random features through the real projections, a chunk of rows at a time.
        ks, vs = [], []
        wk, wv = layer.kv_weights()
        for start in range(0, length, 1024):
            n = min(1024, length - start)
            feats = torch.randn(n, cfg["hidden"], generator=gen).to(dtype).to(device)
            ks.append((feats @ wk.T).view(n, kv, d))
            vs.append((feats @ wv.T).view(n, kv, d))
        k, v = torch.cat(ks), torch.cat(vs)
    else:
        # Random weights on random features give Gaussian K/V: draw them directly.
        k = torch.randn(length, kv, d, generator=gen).to(dtype).to(device)
        v = torch.randn(length, kv, d, generator=gen).to(dtype).to(device)
    k = rms_norm(k, layer.k_norm)
    k = rope(k, 0, cfg["rope_theta"])
    return k, v


def first_visible(length: int, block: int, span: dict[str, Any]) -> list[int]:
    """For each query of a block at positions length..length+block-1: its first visible
    context position (length when it sees no context)."""
    band, last = span.get("band"), span.get("last")
    cut = max(0, length - int(last)) if last is not None else 0
    starts = []
    for t in range(block):
        start = cut
        if band is not None:
            start = max(start, length + t - int(band) + 1)
        starts.append(min(max(start, 0), length))
    return starts


class Projected:
    """One layer's projections of one hidden state: shared by every scenario that holds it."""

    def __init__(
        self,
        layer: Layer,
        cfg: dict[str, Any],
        h: torch.Tensor,
        length: int,
        block: int,
        wqkv: torch.Tensor,
    ) -> None:
        heads, kv, d = cfg["heads"], cfg["kv_heads"], cfg["head_dim"]
        r = h.shape[0] // block
        x = rms_norm(h, layer.in_norm)
        theta = cfg["rope_theta"]
        q, k, v = torch.split((x.to(wqkv.dtype) @ wqkv.T).to(h.dtype), list(layer.split), dim=-1)
        q = rope(rms_norm(q.reshape(-1, heads, d), layer.q_norm), length, theta, r)
        kb = rope(rms_norm(k.reshape(-1, kv, d), layer.k_norm), length, theta, r)
        vb = v.reshape(-1, kv, d)
        group = heads // kv
        # (R*block, heads, d) -> (kv, R, group*block, d); row g*block + t is head kv*group+g.
        self.q = q.view(r, block, kv, group, d).permute(2, 0, 3, 1, 4).reshape(kv, r, -1, d)
        self.kb = kb.view(r, block, kv, d).permute(2, 0, 1, 3)  # (kv, R, block, d)
        self.vb = vb.view(r, block, kv, d).permute(2, 0, 1, 3)
        self.blocks, self.block, self.group = r, block, group


def attend(
    wo: torch.Tensor,
    cfg: dict[str, Any],
    h: torch.Tensor,
    proj: Projected,
    k_ctx: torch.Tensor,
    v_ctx: torch.Tensor,
    starts: list[int],
) -> torch.Tensor:
    """One layer on R independent draft blocks h (R*block, hidden) at the same position.

    Query t of every block sees context positions >= starts[t] and its whole block.
    """
    length = k_ctx.shape[0]
    heads, kv, d = cfg["heads"], cfg["kv_heads"], cfg["head_dim"]
    r, block, group = proj.blocks, proj.block, proj.group
    # Only the context that some query sees is read: slice it, then mask inside it.
    first = starts[0]
    kc = k_ctx[first:].permute(1, 0, 2)  # (kv, Lv, d)
    vc = v_ctx[first:].permute(1, 0, 2)
    lv = kc.shape[1]
    mask = None
    if any(s != first for s in starts):
        cols = torch.arange(first, length, device=h.device)
        rows = torch.tensor(starts, device=h.device)
        mask = (cols[None, :] >= rows[:, None]).repeat(group, 1)  # (group*block, Lv)
    per_block = kv * group * block * (lv + block) * 4 * 2
    step = max(1, min(r, SCORE_CHUNK_BYTES // max(per_block, 1)))
    outs = []
    scale = 1.0 / math.sqrt(d)
    for r0 in range(0, r, step):
        qc = proj.q[:, r0 : r0 + step]  # (kv, n, group*block, d)
        n = qc.shape[1]
        # context part as one batched matmul per KV head: (kv, n*group*block, Lv)
        sc = torch.bmm(qc.reshape(kv, -1, d), kc.transpose(1, 2)).float().mul_(scale)
        sc = sc.view(kv, n, group * block, lv)
        if mask is not None:
            sc.masked_fill_(~mask, float("-inf"))
        sb = (qc @ proj.kb[:, r0 : r0 + step].transpose(-1, -2)).float().mul_(scale)
        # softmax over [context; block] without concatenating them
        top = torch.maximum(sc.amax(-1, keepdim=True), sb.amax(-1, keepdim=True))
        ec, eb = sc.sub_(top).exp_(), sb.sub_(top).exp_()
        denom = ec.sum(-1, keepdim=True) + eb.sum(-1, keepdim=True)
        ctx = torch.bmm(ec.view(kv, -1, lv).to(vc.dtype), vc).view(kv, n, group * block, d)
        outs.append((ctx + eb.to(vc.dtype) @ proj.vb[:, r0 : r0 + step]) / denom.to(vc.dtype))
    out = torch.cat(outs, dim=1)  # (kv, R, group*block, d)
    out = out.view(kv, r, group, block, d).permute(1, 3, 0, 2, 4).reshape(-1, heads * d)
    return h + (out.to(wo.dtype) @ wo.T).to(h.dtype)


def compare(a: torch.Tensor, b: torch.Tensor) -> dict[str, float]:
    if a is b:  # one state shared by both scenarios
        return {"max_abs_diff": 0.0, "rel_l2": 0.0, "cosine": 1.0}
    a32, b32 = a.float().flatten(), b.float().flatten()
    diff = a32 - b32
    na, nb = float(a32.norm()), float(b32.norm())
    return {
        "max_abs_diff": float(diff.abs().max()),
        "rel_l2": float(diff.norm()) / max(nb, 1e-30),
        "cosine": float(a32 @ b32) / max(na * nb, 1e-30),
    }


def wilson(hits: int, n: int) -> list[float]:
    """The 95% Wilson score interval of a proportion."""
    if n == 0:
        return [0.0, 1.0]
    z = 1.96
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4)]


def rss_peak_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def weight_bytes(cfg: dict[str, Any]) -> int:
    """The shard's projections, held in bfloat16."""
    q_rows, kv_rows = cfg["heads"] * cfg["head_dim"], cfg["kv_heads"] * cfg["head_dim"]
    return int(cfg["layers"] * (2 * q_rows + 2 * kv_rows) * cfg["hidden"] * 2)


def estimate_bytes(
    cfg: dict[str, Any], length: int, tokens: int, scenarios: int, elt: int, real: bool
) -> int:
    """What one context adds to the weights: context K/V, states, scores, features."""
    kv_bytes = 2 * length * cfg["kv_heads"] * cfg["head_dim"] * 4 * 2
    states = (2 * scenarios + 2) * tokens * (cfg["hidden"] + 3 * cfg["heads"] * cfg["head_dim"]) * 4
    feats = 1024 * cfg["hidden"] * elt if real else 0
    return int(kv_bytes + states + SCORE_CHUNK_BYTES * 2 + feats)


def check_spans(spec: dict[str, Any], contexts: int, layers: int) -> list[dict[str, Any]]:
    scenarios = spec.get("scenarios") or []
    if not scenarios:
        raise ValueError("no scenarios to measure")
    for s in scenarios:
        spans = s.get("spans")
        if not isinstance(spans, list) or len(spans) != contexts:
            raise ValueError(f"scenario {s.get('name')!r}: spans must hold one list per context")
        for per_layer in spans:
            if not isinstance(per_layer, list) or len(per_layer) != layers:
                raise ValueError(
                    f"scenario {s.get('name')!r}: {layers} layer spans expected per context"
                )
            for span in per_layer:
                if not isinstance(span, dict) or any(
                    not (v is None or (isinstance(v, int) and v > 0))
                    for v in (span.get("band"), span.get("last"))
                ):
                    raise ValueError(
                        f"scenario {s.get('name')!r}: a span is {{'band': int|null, "
                        f"'last': int|null}} with positive ints, not {span!r:.80}"
                    )
    return list(scenarios)


def progress(text: str) -> None:
    sys.stderr.write(f"probe: {text}\n")
    sys.stderr.flush()


def run(spec: dict[str, Any]) -> dict[str, Any]:
    """Measure every context of the spec: the JSON object main() prints."""
    wall0, cpu0 = time.perf_counter(), time.process_time()
    tp = max(1, int(spec.get("tp_size", 1)))
    cfg = shape_of(spec["config"], tp, spec.get("layer_types"))
    contexts = [int(n) for n in spec["contexts"]]
    scenarios = check_spans(spec, len(contexts), cfg["layers"])
    names = [s["name"] for s in scenarios]
    reference = spec.get("reference") or names[0]
    if reference not in names:
        raise ValueError(f"reference scenario {reference!r} is not among {names}")
    want = spec.get("device", "auto")
    device = "cuda" if want in ("auto", "cuda") and torch.cuda.is_available() else "cpu"
    base: dict[str, Any] = {"probe": "attention", "version": PROBE_VERSION}
    if want == "cuda" and device != "cuda":
        return {**base, "refused": "no CUDA device"}
    dtype_name = spec.get("dtype", "float32")
    if dtype_name not in DTYPE_NAMES:
        raise ValueError(f"dtype {dtype_name!r} is not one of {', '.join(DTYPE_NAMES)}")
    budget = int(spec.get("budget_mib", DEFAULT_BUDGET_MIB)) * 1024 * 1024
    device_name, refused = _claim_device(device, budget)
    kv_dtype = spec.get("kv_dtype", "bfloat16")
    if refused is None and kv_dtype not in KV_BYTES:
        raise ValueError(f"kv_dtype {kv_dtype!r} is not one of {', '.join(KV_BYTES)}")
    if refused is None and weight_bytes(cfg) > budget:
        refused = (
            f"the attention weights of one GPU's shard need "
            f"{weight_bytes(cfg) / 2**20:.0f} MiB, over the {budget // 2**20} MiB budget"
        )
    if refused is not None:
        return {**base, "device": device_name, "refused": refused}
    sweep = _Sweep(spec, cfg, scenarios, reference, getattr(torch, dtype_name), device)
    results, skipped = sweep.all(contexts, budget)
    return {
        **base,
        "device": device_name,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "dtype": dtype_name,
        "weights": "real" if sweep.real else "random",
        "head": "random",
        "block_size": sweep.block,
        "tp_size": tp,
        "shape": _shape_report(cfg) | {"window": spec.get("window")},
        "shard": sweep.layers[0].shard if sweep.layers else {},
        "layer_types": cfg["layer_types"],
        "reference": reference,
        "scenarios": [{"name": s["name"], "label": s.get("label", s["name"])} for s in scenarios],
        "kv_dtype": kv_dtype,
        "kv_bytes_per_token": sweep.kv_per_token,
        "agreement_tokens": sweep.tokens,
        "contexts": results,
        "skipped_contexts": skipped,
        "self_check": _self_check(results, SELF_CHECK_TOLERANCE[dtype_name]),
        "resources": _resources(wall0, cpu0, device),
        "refused": None,
    }


def _resources(wall0: float, cpu0: float, device: str) -> dict[str, Any]:
    """What the probe cost since (wall0, cpu0): seconds and peak memory."""
    return {
        "wall_s": round(time.perf_counter() - wall0, 3),
        "cpu_s": round(time.process_time() - cpu0, 3),
        "peak_rss_bytes": rss_peak_bytes(),
        "peak_gpu_bytes": int(torch.cuda.max_memory_allocated()) if device == "cuda" else None,
    }


def _claim_device(device: str, budget: int) -> tuple[str, str | None]:
    """The device's name, and why the probe refuses to run there (None: it may run)."""
    if device != "cuda":
        # One thread: a host's CPUs serve other work, and several threads on busy cores
        # cost 3-4x the CPU seconds and wall time of one (measured on this 2-core machine
        # under load 9: 2.4 s vs 6.8-9.0 s of CPU for one context).
        torch.set_num_threads(CPU_THREADS)
        return "cpu", None
    free, _total = torch.cuda.mem_get_info()
    name = f"cuda:{torch.cuda.current_device()} ({torch.cuda.get_device_name()})"
    if free < budget:
        return name, (
            f"GPU has {free // 2**20} MiB free, below the "
            f"{budget // 2**20} MiB budget: not risking the server"
        )
    return name, None


def _real_tensors(spec: dict[str, Any], cfg: dict[str, Any], dtype: Any) -> dict[str, Any]:
    """Rank 0's shard of the attention tensors from the drafter's safetensors."""
    d = cfg["head_dim"]
    wanted: dict[str, tuple[int | None, int | None]] = {}
    for i in range(cfg["layers"]):
        prefix = f"layers.{i}.self_attn."
        wanted[prefix + "q_proj.weight"] = (cfg["heads"] * d, None)
        wanted[prefix + "k_proj.weight"] = (cfg["kv_heads"] * d, None)
        wanted[prefix + "v_proj.weight"] = (cfg["kv_heads"] * d, None)
        wanted[prefix + "o_proj.weight"] = (None, cfg["heads"] * d)
    tensors = read_safetensors(spec["weights_dir"], wanted, getattr(torch, STORE_DTYPE_NAME))
    norms: dict[str, tuple[int | None, int | None]] = {
        f"layers.{i}.{n}.weight": (None, None)
        for i in range(cfg["layers"])
        for n in ("self_attn.q_norm", "self_attn.k_norm", "input_layernorm")
    }
    # the norms are optional: read the ones that exist
    tensors.update(read_safetensors(spec["weights_dir"], norms, dtype, required=False))
    return tensors


class _Sweep:
    """What every context of one probe shares: the layers, the scenarios and the settings."""

    def __init__(
        self,
        spec: dict[str, Any],
        cfg: dict[str, Any],
        scenarios: list[dict[str, Any]],
        reference: str,
        dtype: Any,
        device: str,
    ) -> None:
        self.cfg, self.scenarios, self.reference = cfg, scenarios, reference
        self.dtype, self.device = dtype, device
        self.block = int(spec.get("block_size", 16))
        tokens = int(spec.get("agreement_tokens", DEFAULT_AGREEMENT_TOKENS))
        self.tokens = max(1, -(-tokens // self.block)) * self.block  # whole blocks
        self.seed = int(spec.get("seed", 0))
        self.real = spec.get("weights") == "real"
        kv_bytes = KV_BYTES[spec.get("kv_dtype", "bfloat16")]
        self.kv_per_token = 2 * cfg["layers"] * cfg["kv_heads"] * cfg["head_dim"] * kv_bytes
        tensors = _real_tensors(spec, cfg, dtype) if self.real else None
        gen = torch.Generator().manual_seed(self.seed)
        self.layers = [Layer(i, cfg, gen, tensors, dtype, device) for i in range(cfg["layers"])]

    def all(
        self, contexts: list[int], budget: int
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Each context measured, or skipped when it would need more than the budget."""
        elt = torch.finfo(self.dtype).bits // 8
        results: list[dict[str, Any]] = []
        skipped: list[dict[str, Any]] = []
        for idx, length in enumerate(contexts):
            where = f"context {length} ({idx + 1}/{len(contexts)})"
            need = weight_bytes(self.cfg) + estimate_bytes(
                self.cfg, length, self.tokens, len(self.scenarios), elt, self.real
            )
            if need > budget:
                reason = f"needs about {need / 2**20:.0f} MiB, budget {budget // 2**20} MiB"
                skipped.append({"context": length, "reason": reason})
                progress(f"{where} skipped: over the budget")
                continue
            t0 = time.perf_counter()
            entry = self.context(idx, length)
            entry["time_s"] = round(time.perf_counter() - t0, 6)
            results.append(entry)
            progress(f"{where} done in {time.perf_counter() - t0:.1f} s")
        return results, skipped

    def context(self, idx: int, length: int) -> dict[str, Any]:
        """Every scenario on the same inputs at context `idx` of the spec, against the
        reference."""
        cfg, block = self.cfg, self.block
        starts = {
            s["name"]: [first_visible(length, block, span) for span in s["spans"][idx]]
            for s in self.scenarios
        }
        diffs, finals = forward(
            self.layers,
            cfg,
            length,
            self.tokens,
            block,
            starts,
            self.reference,
            self.seed,
            self.dtype,
            self.device,
            self.real,
        )
        top1 = top1_tokens(finals, cfg["hidden"], cfg["vocab"], self.seed + length)
        runs = []
        for s in self.scenarios:
            visible = [length - st[0] for st in starts[s["name"]]]
            # One draft step reads the visible context's K and V and the block's own.
            reads = sum(n + block for n in visible) * self.kv_per_token // cfg["layers"]
            runs.append({"scenario": s["name"], "visible": visible, "read_bytes": int(reads)})
        ref = self.reference
        compared = []
        for name in (s["name"] for s in self.scenarios if s["name"] != ref):
            hits = int((top1[name] == top1[ref]).sum())
            compared.append(
                {
                    "scenario": name,
                    "against": ref,
                    "same_spans": starts[name] == starts[ref],
                    "layers": diffs[name],
                    "output": compare(finals[name], finals[ref]),
                    "top1_agreement": hits / self.tokens,
                    "top1_ci95": wilson(hits, self.tokens),
                }
            )
        return {
            "context": length,
            "draft_kv_bytes": length * self.kv_per_token,
            "runs": runs,
            "compared": compared,
        }


def _shape_report(cfg: dict[str, Any]) -> dict[str, Any]:
    keys = ("layers", "heads", "kv_heads", "head_dim", "hidden", "rope_theta")
    return {k: cfg[k] for k in (*keys, "heads_total", "kv_heads_total")}


def _self_check(results: list[dict[str, Any]], tol: float) -> dict[str, Any]:
    """Comparisons whose scenario has the reference's spans must agree to `tol`."""
    same = [
        comp["output"]["max_abs_diff"]
        for entry in results
        for comp in entry["compared"]
        if comp["same_spans"]
    ]
    return {
        "same_span_comparisons": len(same),
        "max_diff_same_spans": max(same) if same else None,
        "tolerance": tol,
        "passed": all(x <= tol for x in same) if same else None,
    }


def forward(
    layers: list[Layer],
    cfg: dict[str, Any],
    length: int,
    tokens: int,
    block: int,
    starts: dict[str, list[list[int]]],
    reference: str,
    seed: int,
    dtype: torch.dtype,
    device: str,
    real: bool,
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, torch.Tensor]]:
    """Run every scenario on identical inputs: per layer, each scenario's divergence from
    the reference; and each scenario's final hidden state.

    Scenarios that have seen the same spans so far hold the same state: it is projected
    once, and attended once per distinct span of the layer.
    """
    gen = torch.Generator().manual_seed(seed * 1_000_003 + length)
    h0 = torch.randn(tokens, cfg["hidden"], generator=gen).to(dtype).to(device)
    groups: list[tuple[list[str], torch.Tensor]] = [(list(starts), h0)]
    diffs: dict[str, list[dict[str, Any]]] = {name: [] for name in starts if name != reference}
    for i, layer in enumerate(layers):
        k_ctx, v_ctx = context_kv(layer, cfg, length, gen, dtype, device, real)
        # The projections run in the weights' bfloat16, as SGLang serves the drafter (and
        # 3x faster on CPUs with bf16 matmul); norms, RoPE, attention and the residual
        # stream in `dtype`.
        wqkv, wo = layer.qkv, layer.o
        split: list[tuple[list[str], torch.Tensor]] = []
        for members, h in groups:
            proj = Projected(layer, cfg, h, length, block, wqkv)
            by_span: dict[tuple[int, ...], list[str]] = {}
            for name in members:
                by_span.setdefault(tuple(starts[name][i]), []).append(name)
            for span, names in by_span.items():
                split.append((names, attend(wo, cfg, h, proj, k_ctx, v_ctx, list(span))))
            del proj
        groups = split
        state = {name: h for names, h in groups for name in names}
        for name, per_layer in diffs.items():
            per_layer.append(
                {
                    "layer": i,
                    "type": cfg["layer_types"][i],
                    **compare(state[name], state[reference]),
                }
            )
        del k_ctx, v_ctx, state
    return diffs, {name: h for names, h in groups for name in names}


def top1_tokens(
    finals: dict[str, torch.Tensor], hidden: int, vocab: int, seed: int
) -> dict[str, torch.Tensor]:
    """Each scenario's top-1 token per draft position through a random Gaussian LM head.

    A Gaussian head W times an orthonormal basis Q of the final states is again Gaussian,
    so W x = (W Q) R[:, j] is drawn from the states' QR coordinates: the same distribution
    as a full (HEAD_ROWS x hidden) head at k instead of `hidden` columns, where k is the
    number of distinct final states. Each position gets its own head, so the positions are
    independent draws and the agreement's binomial interval holds.
    """
    distinct: list[torch.Tensor] = []
    index: dict[str, int] = {}
    for name, h in finals.items():
        j = next((k for k, t in enumerate(distinct) if t is h), None)
        if j is None:
            distinct.append(h)
            j = len(distinct) - 1
        index[name] = j
    gen = torch.Generator().manual_seed(seed * 7919 + 1)
    rows = min(vocab, HEAD_ROWS)
    tops = []
    for start in range(0, distinct[0].shape[0], 32):  # 32 positions at a time: little memory
        x = torch.stack(
            [rms_norm(h[start : start + 32], None).float().cpu() for h in distinct], dim=-1
        )
        _, r = torch.linalg.qr(x)  # x = Q R: (n, hidden, k) and (n, k, k)
        g = torch.randn(x.shape[0], rows, r.shape[-1], generator=gen) / math.sqrt(hidden)
        tops.append((g @ r).argmax(dim=1))  # (n, k)
    top = torch.cat(tops)
    return {name: top[:, j] for name, j in index.items()}


def main() -> int:
    if TORCH_MISSING is not None:
        print(
            json.dumps(
                {
                    "probe": "attention",
                    "version": PROBE_VERSION,
                    "missing": "torch",
                    "python": sys.executable,
                    "error": TORCH_MISSING,
                }
            )
        )
        return EXIT_NO_TORCH
    try:
        spec = json.loads(sys.argv[1] if len(sys.argv) > 1 else sys.stdin.read())
        result = run(spec)
    except (ValueError, KeyError, TypeError, OSError, RuntimeError) as e:
        result = {
            "probe": "attention",
            "version": PROBE_VERSION,
            "error": f"{type(e).__name__}: {e}",
        }
    print(json.dumps(result))
    return 0 if "error" not in result else EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
