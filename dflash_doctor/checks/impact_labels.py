"""Impact rows in words with units: the label for each impact key a check spells as code.

Checks should write impact keys as words with units ("Trained window (tokens)"); this table
gives the words for the older snake_case keys. The JSON report keeps the keys the check wrote
(stable for machines); the terminal report shows `impact_label(key)` and decides nothing.
A code key without a label here fails `tests/checks/test_impact_labels.py`.
"""

from __future__ import annotations

import re

IMPACT_LABELS: dict[str, str] = {
    "decode_samples": "Decode log lines compared",
    "server_block_size": "Block size the server verifies (tokens)",
    "drafter_block_size": "Block size the drafter was trained with (tokens)",
    "ported_from": "Value ported from",
    "served_context_tokens": "Served context length (tokens)",
    "drafter_context_tokens": "Drafter's trained context length (tokens)",
    "simulated_accept_len": "Simulated accept length (tokens per step)",
    "page_size": "Page size the backend forces (tokens)",
    "probe_context_tokens": "Probe context length (tokens)",
    "probe_rel_l2_full_vs_windowed": "Probe: relative L2 error, full context vs trained window",
    "probe_top1_agreement": "Probe: top-1 agreement, full context vs trained window (fraction)",
    "decode_lines": "Decode log lines compared",
    "graph_off_lines": "Decode log lines without CUDA graphs",
    "max_running_requests": "Running requests at most (SGLang's DFLASH default)",
    "rejected_requests": "Requests rejected (HTTP 400)",
    "first_line": "First log line",
    "last_line": "Last log line",
    "lines": "Log lines",
}

# A key spelled as code: lower case, no spaces (`decode_lines`, `lines`), not words.
CODE_KEY = re.compile(r"^[a-z][a-z0-9]*(?:_[a-z0-9]+)*$")


def impact_label(key: str) -> str:
    """The words (with units) for an impact key; keys already in words stay as they are."""
    return IMPACT_LABELS.get(key, key)
