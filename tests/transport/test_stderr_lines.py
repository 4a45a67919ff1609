"""`run(..., on_stderr=...)`: stderr lines handed over while the command runs (probe progress)."""

from __future__ import annotations

import sys
import time

import pytest

from dflash_doctor.errors import TransportError
from dflash_doctor.transport.base import LineSplitter
from dflash_doctor.transport.local import LocalTransport

SCRIPT = (
    "import sys, time\n"
    "for i in range(3):\n"
    "    sys.stderr.write(f'step {i}\\n'); sys.stderr.flush(); time.sleep(0.3)\n"
    "sys.stderr.write('tail without newline')\n"
    "print('{\"done\": true}')\n"
)


def test_lines_arrive_while_the_command_runs() -> None:
    seen: list[tuple[float, bytes]] = []
    start = time.monotonic()
    res = LocalTransport("t").run(
        [sys.executable, "-c", SCRIPT],
        timeout=60,
        on_stderr=lambda line: seen.append((time.monotonic() - start, line)),
    )
    end = time.monotonic() - start
    assert res.ok and res.stdout.strip() == b'{"done": true}'
    assert [line for _, line in seen] == [b"step 0", b"step 1", b"step 2", b"tail without newline"]
    assert seen[0][0] < end - 0.5  # the first line came well before the command ended
    assert res.stderr.startswith(b"step 0\nstep 1\n")


def test_timeout_kills_the_command() -> None:
    with pytest.raises(TransportError, match="timed out after 1s"):
        LocalTransport("t").run(
            [sys.executable, "-c", "import time; time.sleep(30)"],
            timeout=1,
            on_stderr=lambda line: None,
        )


def test_line_splitter_joins_pieces() -> None:
    lines: list[bytes] = []
    split = LineSplitter(lines.append)
    for piece in (b"ab", b"c\nde", b"f\n\ng", b""):
        split.feed(piece)
    split.close()
    assert lines == [b"abc", b"def", b"", b"g"]
