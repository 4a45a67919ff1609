"""The CUDA compute capability major of an NVIDIA GPU, from the name nvidia-smi prints.

SGLang gates kernels on the capability major (`is_sm90_supported`, `is_sm100_supported`,
`is_sm120_supported` in srt/utils/common.py 0.5.11:254-268: majors 9, 10, 12). nvidia-smi's
`name` is what every driver can report, so the major is looked up from it; a name that no
pattern matches gives None, and the checks say they could not judge it.
"""

from __future__ import annotations

import re

# (pattern on the nvidia-smi name, capability major). First match wins, so the specific
# Blackwell workstation/consumer names (SM120/SM121) come before the data-centre ones.
GPU_ARCH_PATTERNS: tuple[tuple[str, int], ...] = (
    (r"RTX PRO \d+ Blackwell|RTX 50[5-9]0|\bGB10\b", 12),  # SM120 / SM121
    (r"\bG?B(100|200|300)\b", 10),  # SM100 / SM103: B100, B200, GB200, B300, GB300
    (r"\bG?H(100|200|800|20)\b", 9),  # SM90: H100, H200, GH200, H800, H20
    (r"\bL40S?\b|\bL4\b|RTX 40[6-9]0|RTX \d+ Ada|\bL20\b", 8),  # SM89
    (r"\bA(100|800|10|10G|30|40|16|2)\b|RTX A\d+|RTX 30[5-9]0", 8),  # SM80 / SM86
    (r"\bT4\b|RTX 20[6-8]0|Quadro RTX", 7),  # SM75
    (r"\bV100\b", 7),  # SM70
)

ARCH_NAMES = {12: "Blackwell (SM120)", 10: "Blackwell (SM100)", 9: "Hopper (SM90)"}


def capability_major(name: str) -> int | None:
    for pattern, major in GPU_ARCH_PATTERNS:
        if re.search(pattern, name, re.IGNORECASE):
            return major
    return None


def arch_label(name: str) -> str:
    major = capability_major(name)
    if major is None:
        return "unknown architecture"
    return ARCH_NAMES.get(major, f"SM{major}x")
