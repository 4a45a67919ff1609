"""Files beside the drafter's config.json: its safetensors index and mask_embedding.pt sidecar
(facts/drafter_files.py parses them; both bounded, neither ever executed or unpickled)."""

from __future__ import annotations

import posixpath
from typing import Any

from dflash_doctor.errors import DoctorError, FactError, FileMissing
from dflash_doctor.facts.drafter_files import (
    INDEX_FILE,
    MAX_INDEX_BYTES,
    MAX_SIDECAR_BYTES,
    SIDECAR_FILE,
    parse_safetensors_index,
    sidecar_mask_token_id,
)
from dflash_doctor.facts.models import DrafterConfig, DrafterFiles, Fact
from dflash_doctor.finders.base import attempt
from dflash_doctor.transport.base import Transport


class _Unreadable(Exception):
    """Present but not read; the message names the host and path (the transport's line)."""


def _read(t: Transport, path: str, limit: int) -> bytes | None:
    """The file's bytes; None when it does not exist; _Unreadable when it cannot be read."""
    try:
        return t.read_file(path, max_bytes=limit)
    except FileMissing:
        return None
    except DoctorError as e:
        raise _Unreadable(str(e).splitlines()[0] if str(e) else path) from None


def find_drafter_files(t: Transport, host: str, cfg: DrafterConfig | None) -> Fact[DrafterFiles]:
    """The safetensors index and mask-embedding sidecar beside the drafter's config.json."""
    if cfg is None:
        return Fact[DrafterFiles]()
    directory = posixpath.dirname(cfg.path) or "."
    return attempt(host, directory, lambda: _drafter_files(t, host, directory))


def _drafter_files(t: Transport, host: str, directory: str) -> DrafterFiles:
    index = posixpath.join(directory, INDEX_FILE)
    sidecar = posixpath.join(directory, SIDECAR_FILE)
    return DrafterFiles(directory=directory, **_index(t, host, index), **_sidecar(t, sidecar))


def _index(t: Transport, host: str, index: str) -> dict[str, Any]:
    """The index's tensor counts, or why a present index was not read; {} when absent."""
    try:
        data = _read(t, index, MAX_INDEX_BYTES)
        if data is None:
            return {}
        count, quantized, names = parse_safetensors_index(data)
    except _Unreadable as e:
        return {"index_error": str(e)}
    except FactError as e:
        return {"index_error": f"{host}:{index}: {e}"}
    return {
        "index_path": index,
        "tensors": count,
        "quantized_tensors": quantized,
        "quantized_names": names,
    }


def _sidecar(t: Transport, sidecar: str) -> dict[str, Any]:
    """The sidecar's saved mask_token_id and per_position; {} when there is none."""
    try:
        blob = _read(t, sidecar, MAX_SIDECAR_BYTES)
    except _Unreadable as e:
        # Present but not read (too large, unreadable): its presence is still the fact.
        return {"sidecar_path": sidecar, "sidecar_note": str(e)}
    if blob is None:
        return {}
    token, per_position, note = sidecar_mask_token_id(blob)
    return {
        "sidecar_path": sidecar,
        "sidecar_mask_token_id": token,
        "sidecar_per_position": per_position,
        "sidecar_note": note,
    }
