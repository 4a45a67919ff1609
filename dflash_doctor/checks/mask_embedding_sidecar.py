"""DFD163: a mask-embedding sidecar SGLang does not load, or whose token id disagrees."""

from __future__ import annotations

from dflash_doctor.checks.base import Evidence, Finding, Fix, Severity, Skip, check
from dflash_doctor.checks.views import config_evidence, drafter, require_dflash, version_evidence
from dflash_doctor.facts.models import DrafterConfig, DrafterFiles, HostFacts
from dflash_doctor.sglang_versions import format_version, parse_version

# `_maybe_merge_trained_mask_embedding`, called from the draft worker's __init__
# (speculative/dflash_worker_v2.py 0.5.20:492, 0.5.23:543); no earlier release reads the file.
SIDECAR_SINCE = (0, 5, 20)
# speculative/dflash_worker_v2.py 0.5.20:1204-1209, 0.5.23:1339-1344.
MISMATCH = (
    "DFLASH mask_embedding.pt was trained with mask_token_id={saved}, but the current "
    "resolved mask_token_id={mask}. These must match."
)
# speculative/dflash_worker_v2.py 0.5.20:1214-1218, 0.5.23:1349-1353.
PER_POSITION = (
    "DFLASH per-position mask embeddings are not supported in inference yet "
    "(mask_embedding.pt per_position=True)."
)


@check("DFD163", "mask-embedding-sidecar", Severity.ERROR, needs=("drafter", "sglang_version"))
def mask_embedding_sidecar(facts: HostFacts) -> list[Finding]:
    """A `mask_embedding.pt` beside the drafter that SGLang ignores or refuses.

    **What it finds.** A trained mask-token embedding saved beside the drafter
    (`mask_embedding.pt`) on a release that never loads it (before 0.5.20), or on 0.5.20+
    one whose saved `mask_token_id` differs from the drafter's
    `dflash_config.mask_token_id`, or that was saved `per_position`. The saved id is read
    by disassembling the file's pickle opcodes, never by unpickling (host files are never
    `torch.load`ed); a file that is not a small `torch.save` zip leaves that half unread
    (the check is skipped and says why). When the drafter sets no `mask_token_id`, SGLang
    resolves it from the target's tokenizer, which is not read: that half is skipped.

    **Why it hurts.** Before 0.5.20 the drafter runs on the target's own (untrained,
    added-vocabulary) mask-token row instead of the learned vector: the server starts and
    acceptance drops. From 0.5.20 the draft worker merges it into the target's embedding
    table and refuses to start on a mismatch (`DFLASH mask_embedding.pt was trained with
    mask_token_id=..., but the current resolved mask_token_id=.... These must match.`),
    and on a per-position sidecar (`DFLASH per-position mask embeddings are not supported
    in inference yet`).

    **Example.** A drafter directory holding `mask_embedding.pt` served by SGLang 0.5.19.

    **How to fix.** Upgrade SGLang to 0.5.20 or newer for the sidecar to be loaded; for a
    mismatch, use the sidecar saved with this drafter (or set `dflash_config.mask_token_id`
    to the id it was trained with); a per-position sidecar cannot be served: remove it.

    **Fix safety.** An upgrade changes more than this; re-run the whole check after it.
    The sidecar is never opened by this tool beyond its bounded, non-executing read.

    **Versions.** Loaded only by the v2 draft worker from 0.5.20
    (speculative/dflash_worker_v2.py 0.5.20:1183-1218, 0.5.23:1318-1353); 0.5.11-0.5.19 do
    not read it.
    """
    require_dflash(facts)
    cfg = drafter(facts)
    files = facts.drafter_files.value
    if files is None:
        raise Skip(f"files beside the drafter not read: {facts.drafter_files.error}")
    if files.sidecar_path is None:
        return []
    version = parse_version(facts.sglang_version.value or "")
    if version is None:
        raise Skip(f"SGLang version unknown: {facts.sglang_version.error}")
    if version < SIDECAR_SINCE:
        return [_not_loaded(facts, files)]
    # SGLang compares the token id first, then refuses a per-position sidecar.
    saved = files.sidecar_mask_token_id
    if saved is not None and cfg.mask_token_id is not None and saved != cfg.mask_token_id:
        return [_mismatch(facts, cfg, files)]
    if files.sidecar_per_position:
        return [_per_position(facts, files)]
    if cfg.mask_token_id is None:
        raise Skip("the drafter sets no mask_token_id (SGLang resolves it from the tokenizer)")
    if saved is None:
        raise Skip(f"the sidecar's mask_token_id was not read: {files.sidecar_note}")
    return []


def _sidecar_evidence(files: DrafterFiles) -> Evidence:
    saved = files.sidecar_mask_token_id
    return Evidence(
        kind="config",
        text="mask_embedding.pt beside the drafter"
        + (f" (saved mask_token_id={saved})" if saved is not None else "")
        + (f"; {files.sidecar_note}" if files.sidecar_note else ""),
        file=files.sidecar_path,
        key="mask_token_id" if saved is not None else None,
    )


def _not_loaded(facts: HostFacts, files: DrafterFiles) -> Finding:
    """The sidecar on a release that never reads it."""
    since = format_version(SIDECAR_SINCE)
    return mask_embedding_sidecar.finding(
        title=f"mask_embedding.pt is ignored: SGLang loads it from {since}",
        message=(
            f"SGLang {facts.sglang_version.value} never reads mask_embedding.pt, so the "
            "drafter runs on the target's own, untrained mask-token row instead of the "
            "learned one: the server starts, and acceptance drops."
        ),
        evidence=[_sidecar_evidence(files), version_evidence(facts)],
        fixes=[Fix(action="upgrade_sglang", value=since)],
    )


def _mismatch(facts: HostFacts, cfg: DrafterConfig, files: DrafterFiles) -> Finding:
    """The sidecar's saved token id differs from the drafter's: SGLang refuses to start."""
    text = MISMATCH.format(saved=files.sidecar_mask_token_id, mask=cfg.mask_token_id)
    return mask_embedding_sidecar.finding(
        title="mask_embedding.pt was saved for another mask_token_id",
        message=f"SGLang {facts.sglang_version.value} refuses to start: `{text}`",
        evidence=[
            _sidecar_evidence(files),
            config_evidence(cfg, "mask_token_id", f"mask_token_id={cfg.mask_token_id}"),
            version_evidence(facts),
        ],
        fixes=[Fix(action="manual", note="use the mask_embedding.pt saved with this drafter")],
    )


def _per_position(facts: HostFacts, files: DrafterFiles) -> Finding:
    """A per-position sidecar: 0.5.20+ refuses it at startup."""
    return mask_embedding_sidecar.finding(
        title="mask_embedding.pt holds per-position embeddings SGLang cannot serve",
        message=f"SGLang {facts.sglang_version.value} refuses to start: `{PER_POSITION}`",
        evidence=[_sidecar_evidence(files), version_evidence(facts)],
        fixes=[Fix(action="manual", note="remove the per-position mask_embedding.pt")],
    )
