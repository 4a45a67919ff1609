"""The server process's environment variables that the check catalog reads, and only those.

`/proc/PID/environ` holds secrets (tokens, keys); this allow-list is the whole of what is
kept from it. Each name is here because a check reads it; none of them holds a secret.
"""

from __future__ import annotations

# name -> the check that reads it and what SGLang does with it (version, file:line).
CATALOG_ENV_NAMES: dict[str, str] = {
    # DFD120: lets the draft model run past its max_position_embeddings
    # (srt/configs/model_config.py `_derive_context_length`, 0.5.11:464, 0.5.23:1303).
    "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "DFD120",
    # DFD121: forces the accept length (EnvFloat, off when <= 0; srt/environ.py 0.5.11:206);
    # DFLASH honours it from 0.5.17 (speculative/dflash_worker_v2.py:1810).
    "SGLANG_SIMULATE_ACC_LEN": "DFD121",
    "SGLANG_SIMULATE_ACC_METHOD": "DFD121",
    # DFD122: removed in 0.5.14 (arg_groups/speculative_hook.py:69 warns), gone from 0.5.21.
    "SGLANG_ENABLE_SPEC_V2": "DFD122",
    # DFD125: 0.5.23 refuses DFLASH with dp attention when it is true
    # (arg_groups/speculative_hook.py:313; srt/environ.py:1558 EnvBool(False)).
    "SGLANG_ENABLE_DP_SPEC_PREFILL_COORDINATION": "DFD125",
}


def catalog_environ(data: bytes) -> dict[str, str]:
    """The catalog's names from NUL-separated `environ` bytes; everything else is dropped."""
    found: dict[str, str] = {}
    for item in data.split(b"\0"):
        key, sep, value = item.partition(b"=")
        name = key.decode("ascii", "replace")
        if sep and name in CATALOG_ENV_NAMES:
            # Bounded: these are flags and numbers; anything longer is not what SGLang reads.
            text = value[:256].decode("utf-8", "replace")
            # Host text reaches reports: printable characters only.
            found[name] = "".join(c if c.isprintable() else "?" for c in text)
    return found


def env_bool(value: str | None) -> bool | None:
    """SGLang's EnvBool (srt/environ.py 0.5.11:119-126, 0.5.23:143-150): true/1/yes/y,
    false/0/no/n (any case); any other text falls back to the default (None here)."""
    if value is None:
        return None
    low = value.lower()
    if low in ("true", "1", "yes", "y"):
        return True
    if low in ("false", "0", "no", "n"):
        return False
    return None


def env_float(value: str | None) -> float | None:
    """SGLang's EnvFloat: float(text), or the default (None here) when it does not parse."""
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return None
