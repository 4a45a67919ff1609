"""Issue 22: one malformed field of a host's bundle answer costs that one question a real
read, never the whole bundle or the host (transport/prefetch.py)."""

from __future__ import annotations

import base64
import json
import zlib
from pathlib import Path
from typing import Any

from dflash_doctor.transport.local import LocalTransport
from dflash_doctor.transport.prefetch import BUNDLE_VERSION, Answers, PrefetchTransport


def _packed(data: bytes) -> str:
    return base64.b64encode(zlib.compress(data)).decode("ascii")


def _transport(doc: dict[str, Any]) -> PrefetchTransport:
    t = PrefetchTransport(LocalTransport("gpu-7"), {})
    t._answers = Answers.parse(json.dumps({"version": BUNDLE_VERSION, **doc}).encode())
    return t


def test_a_malformed_entry_falls_back_alone(tmp_path: Path) -> None:
    good, bad = tmp_path / "good", tmp_path / "bad"
    good.write_bytes(b"on disk good")
    bad.write_bytes(b"on disk bad")
    t = _transport(
        {
            "files": {
                str(good): {"mode": 0o100644, "size": 11, "data": _packed(b"bundle good")},
                str(bad): {"mode": "not a mode", "size": 11, "data": _packed(b"bundle bad")},
                str(tmp_path / "junk"): {"mode": 0o100644, "size": 4, "data": "%%not packed%%"},
            },
            "runs": [
                {"rc": 0, "out": "x"},  # no argv: this entry alone is left out
                {
                    "argv": ["echo", "hi"],
                    "rc": 0,
                    "out": _packed(b"bundled\n"),
                    "err": _packed(b""),
                },
                {"argv": ["printf", "x"], "rc": "zero", "out": _packed(b"y"), "err": ""},
            ],
            "dirs": {str(tmp_path): "not a list"},
            "links": {str(tmp_path / "l"): ["not", "a", "target"]},
            "streams": "not a list",
        }
    )
    assert t.answers.error is None
    assert t.read_file(str(good), max_bytes=100) == b"bundle good"  # the bundle still answers
    assert t.read_file(str(bad), max_bytes=100) == b"on disk bad"  # the host's own read
    assert t.file_size(str(bad)) == len(b"on disk bad")
    (tmp_path / "junk").write_bytes(b"real")
    assert t.read_file(str(tmp_path / "junk"), max_bytes=100) == b"real"
    assert b"".join(t.stream_file(str(tmp_path / "junk"))) == b"real"
    assert t.run(["echo", "hi"]).stdout == b"bundled\n"
    assert t.run(["printf", "x"]).stdout == b"x"  # rc malformed: run for real
    assert sorted(t.list_dir(str(tmp_path))) == ["bad", "good", "junk"]
    (tmp_path / "l").symlink_to("good")
    assert t.readlink(str(tmp_path / "l")) == "good"
    assert t.hits == 2 and len(t.misses) == 7, (t.hits, t.misses)
