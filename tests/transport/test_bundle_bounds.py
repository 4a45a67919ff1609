"""A host's bundle answer is never inflated past its bound (issue 22 item 8).

The bundle (`transport/prefetch.py`) carries every command output and file as base64 of
zlib. A hostile host can answer with a zlib bomb: 1 MiB that inflates to 1 GiB. Each packed
field is inflated to at most its bound, then refused with one line naming the host and what
was asked; memory stays under a stated ceiling (measured with tracemalloc).
"""

from __future__ import annotations

import base64
import json
import tracemalloc
import zlib
from typing import Any

import pytest

from dflash_doctor.errors import TransportError
from dflash_doctor.transport.local import LocalTransport
from dflash_doctor.transport.prefetch import BUNDLE_VERSION, Answers, PrefetchTransport

# Peak Python memory while the bomb is refused: the bomb itself (~1.4 MiB of base64 text, its
# decoded bytes) plus one bounded inflation (RUN_BYTES, 4 MiB) stays far below this.
CEILING_BYTES = 32 * 1024 * 1024
ARGV = ["nvidia-smi", "--query"]


def _bomb(inflated: int = 1 << 30) -> str:
    """base64 of zlib of `inflated` zero bytes (~1 MiB of zlib for 1 GiB), built in chunks."""
    c = zlib.compressobj(9)
    chunk = bytes(1 << 20)
    parts = [c.compress(chunk) for _ in range(inflated // len(chunk))]
    parts.append(c.flush())
    return base64.b64encode(b"".join(parts)).decode("ascii")


@pytest.fixture(scope="module")
def bomb() -> str:
    packed = _bomb()
    assert len(packed) < 2 * 1024 * 1024  # a small answer: ~1 MiB of zlib
    return packed


def _hostile(bomb: str, **fields: Any) -> PrefetchTransport:
    """A PrefetchTransport holding a host's answer as the doctor decodes it."""
    empty = base64.b64encode(zlib.compress(b"")).decode()
    doc = {
        "version": BUNDLE_VERSION,
        "runs": [{"argv": ARGV, "rc": 0, "out": bomb, "err": empty}],
        "streams": [],
        "files": {"/etc/bomb": {"mode": 0o100644, "size": 10, "data": bomb}},
        "dirs": {},
        "links": {},
        **fields,
    }
    t = PrefetchTransport(LocalTransport("gpu-7"), {})
    t._answers = Answers.parse(json.dumps(doc).encode())
    assert t._answers.error is None
    return t


def _peak(work: Any) -> tuple[BaseException | None, int]:
    tracemalloc.start()
    caught: BaseException | None = None
    try:
        work()
    except TransportError as e:
        caught = e
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return caught, peak


def test_command_output_bomb_is_one_line_and_bounded(bomb: str) -> None:
    t = _hostile(bomb)
    caught, peak = _peak(lambda: t.run(ARGV))
    assert caught is not None, "the bomb was inflated"
    assert "\n" not in str(caught) and str(caught).startswith("gpu-7: ")
    assert "nvidia-smi" in str(caught) and "expands past" in str(caught)
    assert peak < CEILING_BYTES, f"peak {peak} bytes"


def test_file_bomb_is_one_line_and_bounded(bomb: str) -> None:
    t = _hostile(bomb)
    caught, peak = _peak(lambda: t.read_file("/etc/bomb", max_bytes=1 << 31))
    assert caught is not None and "/etc/bomb" in str(caught), caught
    assert peak < CEILING_BYTES, f"peak {peak} bytes"
    caught, peak = _peak(lambda: list(t.stream_file("/etc/bomb")))
    assert caught is not None and "\n" not in str(caught)
    assert peak < CEILING_BYTES, f"peak {peak} bytes"


def test_garbage_field_is_asked_of_the_host() -> None:
    """Not base64, or not zlib: no binascii or zlib traceback; that one question goes to the
    host itself (issue 22: one malformed field costs one real read, not the host)."""
    for junk in ("%%%not base64%%%", base64.b64encode(b"not zlib at all").decode()):
        t = _hostile(junk)
        t.answers.runs[("echo", "real")] = {"rc": 0, "out": junk, "err": junk}
        assert t.run(["echo", "real"]).stdout == b"real\n"
        assert t.misses == ["run echo"]
