"""What each SGLang release accepts and does, for the DFlash settings this tool checks.

The facts come from SGLang's own source, read in the published wheels 0.5.11-0.5.23
(python/sglang/srt/server_args.py, srt/arg_groups/, srt/models/dflash.py,
srt/speculative/dflash_*.py); 0.5.23's real `ServerArgs.add_cli_args` was run too.
`drafter_honours_layer_types` agrees with every wheel's srt/models/dflash.py read as text
(tests/facts/test_sglang_code.py); the host's own file beats this table where readable.
Where the host's SGLang can be imported, its own parser is asked instead
(`facts/sglang_args.py`), and that answer wins over this table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

OLD_WINDOW_FLAG = "--speculative-dflash-draft-window-size"
NEW_WINDOW_FLAG = "--speculative-draft-window-size"
WINDOW_FLAGS = (NEW_WINDOW_FLAG, OLD_WINDOW_FLAG)

# DFLASH first shipped in 0.5.11 with the dflash-specific spelling of the window flag.
FIRST_DFLASH = (0, 5, 11)
# 0.5.12 added --speculative-draft-window-size (shared with EAGLE-3), keeping the old
# spelling as a second option string of the same argument ...
NEW_FLAG_SINCE = (0, 5, 12)
# ... 0.5.13 turned the old spelling into a deprecated alias (DeprecatedAliasStoreAction,
# help=SUPPRESS) ...
OLD_DEPRECATED_SINCE = (0, 5, 13)
# ... and 0.5.20 removed it.
OLD_ALIAS_REMOVED = (0, 5, 20)
# The DFlash drafter reads config.layer_types (per-layer sliding attention) from 0.5.14;
# 0.5.11-0.5.13 build every drafter layer with full attention.
LAYER_TYPES_SINCE = (0, 5, 14)
# --speculative-draft-kv-cache-dtype (the draft pool's own KV dtype; choices auto, fp8_e5m2,
# fp8_e4m3, bf16, bfloat16): srt/server_args.py 0.5.18:2187-2200, arg_groups/fields/spec.py
# 0.5.23:151-164. Its help: "The draft pool is allocated with one slot per target token ...
# Setting fp8_e4m3 halves the draft pool; ... raise --mem-fraction-static".
DRAFT_KV_DTYPE_FLAG = "--speculative-draft-kv-cache-dtype"
DRAFT_KV_DTYPE_SINCE = (0, 5, 18)
# The KV budget prices the draft by its own geometry and dtype from 0.5.18
# (dflash_utils.dflash_draft_cell_size_per_token, 0.5.18:139-151); before, by scaling the
# target's bytes/token by (target + draft layers) / target layers
# (scale_kv_cell_size_per_token_for_dflash, 0.5.11:51-89; pool_configurator.py 0.5.11:95-111).
DRAFT_CELL_SIZE_SINCE = (0, 5, 18)

# Backends the DFlash draft worker accepts; others log "... Falling back to 'flashinfer'".
# speculative/dflash_worker.py (0.5.11-0.5.16), arg_groups/speculative_hook.py (0.5.17-0.5.19),
# arg_groups/choices.py DRAFT_ATTENTION_BACKEND_CHOICES (0.5.20-0.5.23).
DRAFT_BACKENDS_BY_VERSION: tuple[tuple[tuple[int, int, int], tuple[str, ...]], ...] = (
    ((0, 5, 11), ("flashinfer", "fa3", "fa4", "triton")),
    ((0, 5, 13), ("flashinfer", "fa3", "fa4", "triton", "ascend")),
    ((0, 5, 17), ("flashinfer", "fa3", "fa4", "triton", "trtllm_mha", "ascend")),
    ((0, 5, 20), ("flashinfer", "fa3", "fa4", "triton", "ascend", "trtllm_mha", "intel_xpu")),
)
# When the version is unknown: what every version from 0.5.13 accepts.
DFLASH_DRAFT_BACKENDS = ("flashinfer", "fa3", "fa4", "triton", "ascend")


def draft_backends_for(version: tuple[int, int, int]) -> tuple[str, ...]:
    chosen = DRAFT_BACKENDS_BY_VERSION[0][1]
    for since, backends in DRAFT_BACKENDS_BY_VERSION:
        if version >= since:
            chosen = backends
    return chosen


Version = tuple[int, int, int]

_VERSION_RE = re.compile(r"^\s*v?(\d+)\.(\d+)(?:\.(\d+))?")


def parse_version(text: str) -> Version | None:
    """`0.5.11`, `0.5.13.post1`, `v0.5.23rc0` -> (0, 5, x); None when it is not a version."""
    m = _VERSION_RE.match(text)
    if m is None:
        return None
    return (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))


def format_version(v: Version) -> str:
    return ".".join(str(x) for x in v)


@dataclass(frozen=True)
class VersionFacts:
    version: Version
    dflash_supported: bool
    window_flags: tuple[str, ...]
    deprecated_window_flags: tuple[str, ...]
    drafter_honours_layer_types: bool
    draft_backends: tuple[str, ...]

    @property
    def preferred_window_flag(self) -> str | None:
        """The spelling to recommend: accepted, and not deprecated."""
        for flag in self.window_flags:
            if flag not in self.deprecated_window_flags:
                return flag
        return None

    @property
    def label(self) -> str:
        return format_version(self.version)


def facts_for(version: Version) -> VersionFacts:
    flags: list[str] = []
    deprecated: list[str] = []
    if version >= NEW_FLAG_SINCE:
        flags.append(NEW_WINDOW_FLAG)
    if FIRST_DFLASH <= version < OLD_ALIAS_REMOVED:
        flags.append(OLD_WINDOW_FLAG)
        if version >= OLD_DEPRECATED_SINCE:
            deprecated.append(OLD_WINDOW_FLAG)
    return VersionFacts(
        version=version,
        dflash_supported=version >= FIRST_DFLASH,
        window_flags=tuple(flags),
        deprecated_window_flags=tuple(deprecated),
        drafter_honours_layer_types=version >= LAYER_TYPES_SINCE,
        draft_backends=draft_backends_for(version),
    )
