"""DFD131: what the draft KV cache costs, and the lever this SGLang has.

Served and trained spans per layer come from `dflash_doctor.spans`, which cites SGLang's
file:line for each rule.
"""

from __future__ import annotations

from dflash_doctor.checks.base import Evidence, Finding, Fix, Severity, check
from dflash_doctor.checks.views import (
    argv_value,
    context_length,
    drafter,
    require_dflash,
    version_facts,
)
from dflash_doctor.facts.models import DrafterConfig, HostFacts
from dflash_doctor.kv_math import (
    GIB,
    draft_bytes_per_token,
    kv_dtype_bytes,
    kv_heads_per_gpu,
    target_bytes_per_token,
)
from dflash_doctor.sglang_versions import (
    DRAFT_CELL_SIZE_SINCE,
    DRAFT_KV_DTYPE_FLAG,
    DRAFT_KV_DTYPE_SINCE,
    VersionFacts,
    format_version,
)

FP8_KV = ("fp8_e4m3", "fp8_e5m2")


@check(
    "DFD131",
    "draft-kv-memory",
    Severity.INFO,
    needs=("drafter",),
    needs_any=("launch", "log"),
)
def draft_kv_memory(facts: HostFacts) -> list[Finding]:
    """What the draft KV cache costs per token and per GPU, and the lever this SGLang has.

    **What it finds.** The draft pool's bytes per token slot on one GPU (2 x draft
    layers x KV heads per GPU x head_dim x KV dtype bytes; `dflash_draft_cell_size_per_token`,
    speculative/dflash_utils.py 0.5.18:139-151) with the target's, giving the share of the
    KV budget the draft takes. The draft pool has one slot per target token in every
    release (the draft shares the target's KV index space: speculative/dflash_worker.py
    0.5.11:87-98), so the share holds at any context and with or without a draft window.

    **Why it hurts.** That share is KV capacity the target does not get: fewer concurrent
    requests or shorter contexts. The draft window does **not** change it.

    **Example.** A 6-layer drafter with 8 KV heads at TP 8 in bf16: 3072 B per token per
    GPU beside Kimi-K2.6's 70272 B (MLA), about 4% of the KV budget.

    **How to fix.** From 0.5.18: `--speculative-draft-kv-cache-dtype fp8_e4m3` halves the
    draft pool. Those releases size the KV pool by target plus draft bytes per token, the
    draft priced at its own KV dtype, so the halved draft becomes target KV tokens within
    the same `--mem-fraction-static`; no other flag is needed (the flag's help text,
    `srt/server_args.py` 0.5.18:2187-2200, says to raise `--mem-fraction-static`: the code
    does not need it). Before 0.5.18 the draft follows `--kv-cache-dtype` (target and draft
    together). Listed as a manual step: an fp8 draft cache can change acceptance, measure it.

    **Fix safety.** A dtype change of the draft cache only; verify acceptance afterwards.

    **Versions.** Every release: one draft slot per target token (speculative/dflash_worker.py
    0.5.11:87-98). Before 0.5.18 SGLang budgets the draft by scaling the target's bytes per
    token by (target + draft layers) / target layers (speculative/dflash_utils.py
    0.5.11:51-89); from 0.5.18 by the draft's own cell size
    (speculative/dflash_utils.py 0.5.18:139-151) at the draft's own KV dtype
    (model_runner_components/spec_aux_hidden_state.py 0.5.18:182-218;
    mem_cache/draft_kv_budget.py 0.5.23:26-48; mem_cache/kv_cache_dtype.py 0.5.18:33-35)
    added to the target's (pool_configurator.py 0.5.18:227-233, 0.5.23:332-338;
    speculative/dflash_utils.py 0.5.18:178-185), with the draft-only dtype flag
    (`srt/server_args.py` 0.5.18:2187-2200). Replaces DFD108 (retired: it promised memory
    that a window cannot give back).
    """
    require_dflash(facts)
    cfg = drafter(facts)
    launch = facts.launch.value
    tp = launch.tp_size if launch else 1
    draft_dtype_flag = argv_value(launch, DRAFT_KV_DTYPE_FLAG) if launch else None
    kv_dtype = launch.kv_cache_dtype if launch else None
    vf = version_facts(facts)
    has_lever = vf is not None and vf.version >= DRAFT_KV_DTYPE_SINCE
    draft_dtype = draft_dtype_flag if has_lever and draft_dtype_flag else kv_dtype
    per_token = draft_bytes_per_token(cfg, tp_size=tp, kv_dtype=draft_dtype)
    elem = kv_dtype_bytes(draft_dtype, cfg.dtype)
    evidence = [
        Evidence(
            kind="derived",
            text=(
                f"draft KV per token per GPU: 2 x {cfg.num_hidden_layers} layers x "
                f"{kv_heads_per_gpu(cfg.num_key_value_heads, tp)} KV heads (of "
                f"{cfg.num_key_value_heads}, TP {tp}) x {cfg.head_dim} head_dim x {elem:g} B "
                f"= {int(per_token)} B; one slot per target token, with or without a draft "
                "window"
            ),
        )
    ]
    impact: dict[str, float | int | str] = {
        "Draft KV per token per GPU (bytes)": int(per_token),
    }
    ctx, ctx_evidence = context_length(facts)
    if ctx is not None and ctx_evidence is not None:
        evidence.append(ctx_evidence)
        impact["Draft KV per full-context request per GPU (GiB)"] = round(per_token * ctx / GIB, 3)
        if launch is not None and launch.max_running_requests:
            impact["Draft KV at max running requests per GPU (GiB)"] = round(
                per_token * ctx * launch.max_running_requests / GIB, 2
            )
    share = _kv_share(facts, cfg, vf, per_token, impact)
    if (draft_dtype or "auto") in FP8_KV:
        return []  # the draft KV already uses fp8: the lever is pulled
    lever, fixes = _kv_lever(vf, has_lever)
    share_text = f", {share:.1%} of the KV budget" if share is not None else ""
    return [
        draft_kv_memory.finding(
            title=f"Draft KV cache: {int(per_token)} B per token per GPU{share_text}",
            message=(
                f"The draft pool holds one slot per target token ({int(per_token)} B per "
                f"token per GPU{share_text}); a draft window does not change it. "
                f"Lever: {lever}."
            ),
            evidence=evidence,
            impact=impact,
            fixes=fixes,
        )
    ]


def _kv_share(
    facts: HostFacts,
    cfg: DrafterConfig,
    vf: VersionFacts | None,
    per_token: float,
    impact: dict[str, float | int | str],
) -> float | None:
    """The draft's share of the KV budget as this SGLang sizes it (adds it to impact)."""
    launch = facts.launch.value
    tp = launch.tp_size if launch else 1
    kv_dtype = launch.kv_cache_dtype if launch else None
    target = facts.target.value
    share: float | None = None
    if vf is not None and vf.version < DRAFT_CELL_SIZE_SINCE and target is not None:
        share = cfg.num_hidden_layers / (target.num_hidden_layers + cfg.num_hidden_layers)
        impact["Draft share of the KV budget"] = (
            f"{share:.1%} (SGLang {vf.label} scales the target's bytes/token by layer count)"
        )
    elif target is not None:
        target_bytes = target_bytes_per_token(target, tp_size=tp, kv_dtype=kv_dtype)
        if target_bytes:
            share = per_token / (per_token + target_bytes)
            impact["Target KV per token per GPU (bytes)"] = int(target_bytes)
            impact["Draft share of the KV budget"] = f"{share:.1%}"
    return share


def _kv_lever(vf: VersionFacts | None, has_lever: bool) -> tuple[str, list[Fix]]:
    """The way this SGLang offers to shrink the draft pool, and its fix when it has one."""
    if has_lever:
        # SGLang 0.5.18+ budgets the pool by target + draft bytes/token with the draft at
        # its own dtype (pool_configurator.py 0.5.18:227-233, spec_aux_hidden_state.py
        # 0.5.18:196-211), so the saving is KV capacity at the same --mem-fraction-static.
        lever = (
            f"set {DRAFT_KV_DTYPE_FLAG} fp8_e4m3: it halves the draft pool, and SGLang "
            f"{vf.label if vf is not None else '0.5.18+'} sizes the KV pool with the draft at that "
            "dtype, so the saving becomes target KV tokens at the same --mem-fraction-static; "
            "measure acceptance after"
        )
        return lever, [Fix(action="manual", flag=DRAFT_KV_DTYPE_FLAG, value="fp8_e4m3", note=lever)]
    if vf is not None:
        lever = (
            f"SGLang {vf.label} has no draft-only KV dtype ({DRAFT_KV_DTYPE_FLAG} arrives in "
            f"{format_version(DRAFT_KV_DTYPE_SINCE)}); --kv-cache-dtype fp8_e4m3 shrinks "
            "target and draft together"
        )
        return lever, []
    return f"SGLang version unknown ({DRAFT_KV_DTYPE_FLAG} needs 0.5.18 or newer)", []
