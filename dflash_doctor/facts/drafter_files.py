"""Files beside the drafter's config.json that SGLang's loader reads: the safetensors index
and the `mask_embedding.pt` sidecar. Both are hostile input: bounded, parsed, never executed.

- `model.safetensors.index.json` names every tensor of a sharded checkpoint (its
  `weight_map`). SGLang's `DFlashDraftModel.load_weights` skips a name it has no parameter
  for (`# Ignore unexpected weights`, models/dflash.py 0.5.11:371-374, 0.5.23:943-946), so
  packed or quantized tensors (`*.weight_packed`, `*.weight_scale`, `*.qweight`, ...) of a
  layer built unquantized are dropped without a word.
- `mask_embedding.pt` is a `torch.save` zip whose `data.pkl` holds `{"embedding": tensor,
  "mask_token_id": int, ...}` (speculative/dflash_worker_v2.py 0.5.20:1196-1210). The token id
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


def sidecar_mask_token_id(data: bytes) -> tuple[int | None, str | None]:
    """The `mask_token_id` saved in a mask_embedding.pt, or None and why it was not read."""
    if len(data) > MAX_SIDECAR_BYTES:
        return None, f"{len(data)} bytes, larger than {MAX_SIDECAR_BYTES}: not read"
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            names = [i for i in zf.infolist() if i.filename.endswith("/data.pkl")]
            if len(names) != 1 or names[0].file_size > MAX_PICKLE_BYTES:
                return None, "not a torch.save zip with one small data.pkl"
            pickle = zf.open(names[0]).read(MAX_PICKLE_BYTES + 1)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError):
        return None, "not a zip archive (legacy torch.save format): the id is not read"
    return _token_id_in_pickle(pickle)


_INT_OPS = ("BININT", "BININT1", "BININT2", "LONG1", "INT", "LONG")


def _token_id_in_pickle(pickle: bytes) -> tuple[int | None, str | None]:
    """The int that follows the string key `mask_token_id` in the opcode stream."""
    after_key = False
    try:
        for count, (op, arg, _) in enumerate(pickletools.genops(pickle)):
            if count > MAX_OPCODES:
                break
            if after_key:
                if op.name in _INT_OPS and isinstance(arg, int) and not isinstance(arg, bool):
                    return arg, None
                if op.name not in ("MEMOIZE", "BINPUT", "LONG_BINPUT", "PUT"):
                    return None, "mask_token_id is not saved as a plain integer"
            elif isinstance(arg, str) and arg == "mask_token_id":
                after_key = True
    except (ValueError, EOFError, IndexError, UnicodeDecodeError, OverflowError):
        return None, "data.pkl is not a readable pickle stream"
    return None, "no mask_token_id key in data.pkl"
