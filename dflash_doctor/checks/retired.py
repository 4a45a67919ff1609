"""Check ids that were retired: never reused, explained by `dflash-doctor explain ID`.

An id is retired rather than given a new meaning, so that waivers, baselines and CI
dashboards keyed on it never silently start to mean something else.
"""

from __future__ import annotations

RETIRED: dict[str, str] = {
    "DFD101": (
        "DFD101 sliding-drafter-without-draft-window (retired).\n\n"
        "It reported every sliding-window drafter served without a draft window as an error, "
        "on two premises that SGLang's wheels disprove: a memory premise (the draft KV "
        "pool has one slot per target token whatever the window, speculative/"
        "dflash_worker.py 0.5.11:87-98) and an accuracy premise that holds only on "
        "0.5.11-0.5.13: from 0.5.14 srt/models/dflash.py serves sliding layers with their own "
        "window (srt/models/dflash.py 0.5.14:44-66), so no flag is the right setting there.\n\n"
        "Replaced by: DFD103 (sliding layers served beyond their trained window, "
        "0.5.11-0.5.13), DFD102 (a window that truncates them), DFD130 (a window that clamps "
        "full_attention layers) and DFD131 (what the draft KV really costs)."
    ),
    "DFD108": (
        "DFD108 long-context-without-compaction (retired).\n\n"
        "It rested on a memory premise the wheels disprove. SGLang never allocates a "
        "windowed draft cache: the draft pool has one slot "
        "per target token in every release and pool sizing has no window term "
        "(model_executor/pool_configurator.py 0.5.11:95-111, 0.5.18:86-232). It also repeated "
        "DFD101's evidence and fix.\n\n"
        "Replaced by: DFD131 draft-kv-memory (bytes per token per GPU, share of the KV "
        "budget, and the real lever: --speculative-draft-kv-cache-dtype fp8_e4m3 from 0.5.18, "
        "then a higher --mem-fraction-static)."
    ),
}
