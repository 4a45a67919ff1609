"""Files beside the drafter's config.json that SGLang's loader reads: the safetensors index
and the `mask_embedding.pt` sidecar. Both are hostile input: bounded, parsed, never executed.

- `model.safetensors.index.json` names every tensor of a sharded checkpoint (its
  `weight_map`). SGLang's `DFlashDraftModel.load_weights` skips a name it has no parameter
  for (`# Ignore unexpected weights`, models/dflash.py 0.5.11:381-383, 0.5.23:944-946), so
  packed or quantized tensors (`*.weight_packed`, `*.weight_scale`, `*.qweight`, ...) of a
  layer built unquantized are dropped without a word.
- `mask_embedding.pt` is a `torch.save` zip whose `data.pkl` holds `{"embedding": tensor,
  "mask_token_id": int, ...}` (speculative/dflash_worker_v2.py 0.5.20:1196-1202). The token id
  is read by disassembling the pickle's opcodes (`pickletools.genops`, which decodes and never
  runs or imports anything), never by unpickling: host files are never `torch.load`ed.
"""

from __future__ import annotations

import io
import json
import pickletools
import zipfile
from typing import Any

from dflash_doctor.errors import FactError

# Bounds: an index of a drafter is tens of KiB, a mask embedding one vector (hidden_size
# values, <= 64 KiB in bf16/fp32) plus the zip's records; anything far larger is not that.
MAX_INDEX_BYTES = 1024 * 1024
MAX_SIDECAR_BYTES = 1024 * 1024
MAX_PICKLE_BYTES = 64 * 1024
MAX_OPCODES = 20_000
MAX_NAMES = 8  # quantized tensor names kept as evidence
INDEX_FILE = "model.safetensors.index.json"
SIDECAR_FILE = "mask_embedding.pt"

# Tensor-name suffixes that only quantized checkpoints carry: compressed-tensors
# (weight_packed, weight_scale, weight_zero_point, weight_global_scale, weight_shape,
# input_scale), GPTQ/AWQ (qweight, qzeros, scales, g_idx), ModelOpt FP8/NVFP4 (weight_scale,
# weight_scale_2, input_scale), bitsandbytes (SCB, absmax, quant_map, quant_state).
QUANTIZED_SUFFIXES = (
    ".weight_packed",
    ".weight_scale",
    ".weight_scale_2",
    ".weight_scale_inv",
    ".weight_zero_point",
    ".weight_global_scale",
    ".weight_shape",
    ".input_scale",
    ".input_global_scale",
    ".qweight",
    ".qzeros",
    ".scales",
    ".g_idx",
    ".SCB",
    ".absmax",
    ".quant_map",
)


def is_quantized_name(name: str) -> bool:
    """A tensor name only a quantized checkpoint carries."""
    return name.endswith(QUANTIZED_SUFFIXES) or ".quant_state." in name


def parse_safetensors_index(data: bytes) -> tuple[int, int, list[str]]:
    """(tensors named, quantized ones, the first MAX_NAMES of those) of an index file."""
    if len(data) > MAX_INDEX_BYTES:
        raise FactError(f"{len(data)} bytes, larger than {MAX_INDEX_BYTES}")
    try:
        obj: Any = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise FactError(f"not UTF-8 text (byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise FactError(f"malformed JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
    except RecursionError:
        raise FactError("JSON nested too deeply") from None
    weight_map = obj.get("weight_map") if isinstance(obj, dict) else None
    if not isinstance(weight_map, dict):
        raise FactError("no 'weight_map' object")
    quantized = sorted(n for n in weight_map if isinstance(n, str) and is_quantized_name(n))
    return len(weight_map), len(quantized), [n[:120] for n in quantized[:MAX_NAMES]]


def sidecar_mask_token_id(data: bytes) -> tuple[int | None, bool | None, str | None]:
    """(`mask_token_id`, `per_position`, why the id was not read) of a mask_embedding.pt."""
    if len(data) > MAX_SIDECAR_BYTES:
        return None, None, f"{len(data)} bytes, larger than {MAX_SIDECAR_BYTES}: not read"
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            names = [i for i in zf.infolist() if i.filename.endswith("/data.pkl")]
            if len(names) != 1 or names[0].file_size > MAX_PICKLE_BYTES:
                return None, None, "not a torch.save zip with one small data.pkl"
            pickle = zf.open(names[0]).read(MAX_PICKLE_BYTES + 1)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError):
        return None, None, "not a zip archive (legacy torch.save format): the id is not read"
    try:
        found = _scalars_in_pickle(pickle)
    except (ValueError, EOFError, IndexError, UnicodeDecodeError, OverflowError):
        return None, None, "data.pkl is not a readable pickle stream"
    token, per_position = found.get("mask_token_id"), found.get("per_position")
    flag = per_position if isinstance(per_position, bool) else None
    if isinstance(token, int) and not isinstance(token, bool):
        return token, flag, None
    if "mask_token_id" in found:
        return None, flag, "mask_token_id is not saved as a plain integer"
    return None, flag, "no mask_token_id key in data.pkl"


_KEYS = ("mask_token_id", "per_position")
_MEMO_OPS = ("MEMOIZE", "BINPUT", "LONG_BINPUT", "PUT")
_INT_OPS = ("BININT", "BININT1", "BININT2", "LONG1", "INT", "LONG")
_BOOL_OPS = {"NEWTRUE": True, "NEWFALSE": False}


def _scalars_in_pickle(pickle: bytes) -> dict[str, object]:
    """The value after each string key of _KEYS in the opcode stream: an int, a bool, or
    None when it is anything else (a tensor, a reference). Decoded, never executed."""
    found: dict[str, object] = {}
    key: str | None = None
    for count, (op, arg, _) in enumerate(pickletools.genops(pickle)):
        if count > MAX_OPCODES:
            break
        if key is not None:
            if op.name in _MEMO_OPS:
                continue
            if op.name in _BOOL_OPS:
                found.setdefault(key, _BOOL_OPS[op.name])
            elif op.name in _INT_OPS and isinstance(arg, int) and not isinstance(arg, bool):
                found.setdefault(key, arg)
            else:
                found.setdefault(key, None)
            key = None
        elif isinstance(arg, str) and arg in _KEYS:
            key = arg
    return found
