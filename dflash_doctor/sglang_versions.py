"""What each SGLang release accepts and does, for the DFlash settings this tool checks.

The facts come from SGLang's own source, read in the published wheels 0.5.11-0.5.23
(python/sglang/srt/server_args.py, srt/arg_groups/, srt/models/dflash.py,
srt/speculative/dflash_*.py); 0.5.23's real `ServerArgs.add_cli_args` was run too.
`drafter_honours_layer_types` agrees with every wheel's srt/models/dflash.py read as text
(tests/facts/test_sglang_code.py); the host's own file beats this table where readable.
Where the host's SGLang can be imported, its own parser is asked instead
(`on_host/sglang_args.py`), and that answer wins over this table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

Version = tuple[int, int, int]

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
# Setting fp8_e4m3 halves the draft pool; ... raise --mem-fraction-static" (stale: the pool is
# sized with the draft at that dtype, see DFD131).
DRAFT_KV_DTYPE_FLAG = "--speculative-draft-kv-cache-dtype"
DRAFT_KV_DTYPE_SINCE = (0, 5, 18)
# The KV budget prices the draft by its own geometry and dtype from 0.5.18
# (dflash_utils.dflash_draft_cell_size_per_token, 0.5.18:139-151); before, by scaling the
# target's bytes/token by (target + draft layers) / target layers
# (scale_kv_cell_size_per_token_for_dflash, 0.5.11:51-89; pool_configurator.py 0.5.11:95-111).
DRAFT_CELL_SIZE_SINCE = (0, 5, 18)

# How the DFLASH draft worker picks its attention backend, the same in every release:
# --speculative-draft-attention-backend, else the prefill backend, which is
# --prefill-attention-backend, else --attention-backend (`get_attention_backends`,
# srt/server_args.py 0.5.11:6738-6749; `attention_backends_of`, arg_groups/overrides.py
# 0.5.15:224-238), else the platform default (flashinfer on CUDA). A backend outside the
# release's list below is replaced by flashinfer (triton on ROCm, and on XPU from 0.5.20),
# with a `... Falling back to '...'` warning. Where the choice is made, per release:
DRAFT_BACKEND_RESOLVERS: tuple[tuple[Version, str], ...] = (
    # speculative/dflash_worker.py 0.5.11:101-104, 0.5.13:103-106
    ((0, 5, 11), "srt/speculative/dflash_worker.py"),
    # speculative/dflash_worker_v2.py 0.5.14:107-110
    ((0, 5, 14), "srt/speculative/dflash_worker_v2.py"),
    # `_resolve_dflash_draft_attention_backend`, run while ServerArgs is resolved:
    # arg_groups/speculative_hook.py 0.5.15:267-274, 0.5.23:930-932
    ((0, 5, 15), "srt/arg_groups/speculative_hook.py"),
)
# Backends the DFlash draft worker accepts, from the same places: dflash_worker.py
# 0.5.11:102, 0.5.13:104; dflash_worker_v2.py 0.5.14:108; speculative_hook.py 0.5.15:263,
# 0.5.17:443-450, 0.5.19:549-556; DRAFT_ATTENTION_BACKEND_CHOICES from 0.5.20
# (arg_groups/choices.py 0.5.20:107-115, 0.5.23:103-111).
DRAFT_BACKENDS_BY_VERSION: tuple[tuple[Version, tuple[str, ...]], ...] = (
    ((0, 5, 11), ("flashinfer", "fa3", "fa4", "triton")),
    ((0, 5, 13), ("flashinfer", "fa3", "fa4", "triton", "ascend")),
    ((0, 5, 17), ("flashinfer", "fa3", "fa4", "triton", "trtllm_mha", "ascend")),
    ((0, 5, 20), ("flashinfer", "fa3", "fa4", "triton", "ascend", "trtllm_mha", "intel_xpu")),
)
# When the version is unknown: what every version from 0.5.13 accepts.
DFLASH_DRAFT_BACKENDS = ("flashinfer", "fa3", "fa4", "triton", "ascend")
# trtllm_mha is always replaced through 0.5.16 (speculative_hook.py 0.5.16:455-462); from
# 0.5.17 it is kept only when the drafter's layer_types has one entry per layer, all
# sliding_attention, or its config says is_causal: true (speculative_hook.py 0.5.17:464-494,
# 0.5.23:945-978).
TRTLLM_DRAFT_SINCE: Version = (0, 5, 17)
# From 0.5.23 a trtllm_mha refused that way on an SM100 GPU (capability major 10,
# `is_sm100_supported`) falls back to fa4, not flashinfer (speculative_hook.py
# 0.5.23:968-970); every other fallback stays flashinfer.
TRTLLM_SM100_FA4_SINCE: Version = (0, 5, 23)


def draft_backends_for(version: Version) -> tuple[str, ...]:
    """The draft attention backends DFLASH accepts in this release."""
    chosen = DRAFT_BACKENDS_BY_VERSION[0][1]
    for since, backends in DRAFT_BACKENDS_BY_VERSION:
        if version >= since:
            chosen = backends
    return chosen


_VERSION_RE = re.compile(r"^\s*v?(\d+)\.(\d+)(?:\.(\d+))?")


def parse_version(text: str) -> Version | None:
    """`0.5.11`, `0.5.13.post1`, `v0.5.23rc0` -> (0, 5, x); None when it is not a version."""
    m = _VERSION_RE.match(text)
    if m is None:
        return None
    return (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))


def draft_backend_resolver(version: Version) -> str:
    """The file of this release that picks the DFLASH draft worker's attention backend."""
    chosen = DRAFT_BACKEND_RESOLVERS[0][1]
    for since, path in DRAFT_BACKEND_RESOLVERS:
        if version >= since:
            chosen = path
    return chosen


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
    # The file that picks the draft backend; trtllm_mha kept for an all-sliding or causal
    # drafter (0.5.17+); such a refusal falls back to fa4 on SM100 (0.5.23+).
    draft_backend_resolver: str = DRAFT_BACKEND_RESOLVERS[-1][1]
    trtllm_draft_conditional: bool = True
    trtllm_sm100_fa4: bool = True

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
        draft_backend_resolver=draft_backend_resolver(version),
        trtllm_draft_conditional=version >= TRTLLM_DRAFT_SINCE,
        trtllm_sm100_fa4=version >= TRTLLM_SM100_FA4_SINCE,
    )
