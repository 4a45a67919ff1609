"""Generate dflash_doctor/data/bench_corpus.json: the frozen text `bench --prompts` sends.

    python scripts/gen_bench_corpus.py [--check]

Run once with the CPython whose standard library the corpus quotes; the output records
that version. Nothing is downloaded, at generation or at run time:

- code: the source of a fixed list of pure-Python standard-library modules, each under a
  `# file: Lib/NAME` header, with an anchor at every top-level `def` (the task: write
  tests for that function, which the excerpt starts with);
- prose: the entries of `pydoc_data.topics` (the language reference and library text
  that `help()` shows), each under a `## TOPIC` header, with an anchor at every header
  (the task: summarise that section and answer a question about it).

Both are CPython's, under the PSF License Version 2 (PSF-2.0); the notice travels in the
file. `--check` exits 1 when the committed file differs from what this Python gives.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "dflash_doctor" / "data" / "bench_corpus.json"
# Pure-Python modules with many small top-level functions: a test-writing task has a target.
CODE_MODULES = (
    "textwrap.py", "heapq.py", "bisect.py", "shlex.py", "fnmatch.py", "glob.py",
    "colorsys.py", "posixpath.py", "base64.py", "quopri.py", "html/__init__.py",
    "json/encoder.py", "json/decoder.py", "urllib/parse.py", "statistics.py", "difflib.py",
    "calendar.py", "fractions.py", "string.py", "keyword.py", "operator.py", "copy.py",
    "random.py", "csv.py", "gettext.py", "locale.py", "ntpath.py", "tokenize.py",
)  # fmt: skip
MAX_CHARS = 240_000  # per kind: the package file stays well under 1 MiB
NOTICE = (
    "Text from CPython {version} (https://www.python.org): its standard library source and "
    "pydoc_data.topics. Copyright (c) 2001-2024 Python Software Foundation; All Rights "
    "Reserved. Used under the PSF License Agreement Version 2 (SPDX: PSF-2.0)."
)
DEF = re.compile(r"^def ([A-Za-z_][A-Za-z0-9_]*)\(", re.MULTILINE)


def code_stream() -> dict[str, object]:
    """The code text and its anchors: (offset of a top-level def, the task on it)."""
    lib = Path(sysconfig.get_paths()["stdlib"])
    text, anchors = "", []
    for name in CODE_MODULES:
        source = (lib / name).read_text(encoding="utf-8")
        head = f"# file: Lib/{name}\n"
        base = len(text) + len(head)
        for m in DEF.finditer(source):
            if base + m.start() < MAX_CHARS:
                task = (
                    f"Write pytest unit tests for the function `{m.group(1)}` that the code "
                    "above starts with: cover its normal cases and its edge cases."
                )
                anchors.append([base + m.start(), task])
        text += head + source + "\n"
        if len(text) >= MAX_CHARS:
            break
    return {"text": text[:MAX_CHARS], "anchors": anchors}


def prose_stream() -> dict[str, object]:
    """The prose text and its anchors: (offset of a `## TOPIC` header, the task on it)."""
    from pydoc_data.topics import topics

    text, anchors = "", []
    for name in sorted(topics):
        if len(text) >= MAX_CHARS:
            break
        task = (
            f"Summarise the section `{name}` that the text above starts with in five "
            "bullet points, then say which rule in it is easiest to get wrong, and why."
        )
        anchors.append([len(text), task])
        text += f"## {name}\n\n{topics[name].strip()}\n\n"
    return {"text": text[:MAX_CHARS], "anchors": anchors}


def corpus() -> dict[str, object]:
    """The whole corpus document."""
    version = platform.python_version()
    return {
        "schema": "dflash-doctor-bench-corpus/1",
        "generated_by": "scripts/gen_bench_corpus.py",
        "python": version,
        "license": "PSF-2.0",
        "notice": NOTICE.format(version=version),
        "code": code_stream(),
        "prose": prose_stream(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is stale")
    args = parser.parse_args()
    text = json.dumps(corpus(), indent=0, ensure_ascii=True) + "\n"
    if args.check:
        stale = not OUT.exists() or OUT.read_text(encoding="utf-8") != text
        print(f"{OUT}: {'stale' if stale else 'up to date'}")
        return 1 if stale else 0
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT} ({len(text)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
