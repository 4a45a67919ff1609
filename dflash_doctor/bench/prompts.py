"""What a bench sends: real text by default, the user's prompts, or random ids.

- `code` and `prose` (the default): excerpts of the frozen corpus
  (`data/bench_corpus.json`, CPython's standard-library source and `pydoc_data.topics`,
  PSF-2.0, made by `scripts/gen_bench_corpus.py`). Each request starts at an anchor (a
  top-level `def`, a topic header) and ends with a task on it (write tests for that
  function; summarise that section), so the answer depends on the start of a long context.
  The host sizes each excerpt to the cell's context with the server's tokenizer.
- `FILE.jsonl`: the user's own prompts, one `{"prompt": "..."}` per line, sent as given.
- `random`: seeded uniform token ids with `ignore_eos`: a content-free A/B control, never
  what a user's traffic looks like (random ids overstate speculative throughput).

The text travels compressed inside the one command line of the shipped HTTP client, which
a host's kernel bounds (128 KiB per argument): an op's payload stays under MAX_OP_B64.
"""

from __future__ import annotations

import base64
import hashlib
import json
import zlib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from dflash_doctor.errors import UsageError

CORPUS_KINDS = ("code", "prose")
RANDOM = "random"
DEFAULT_PROMPTS = "code,prose"
RANDOM_LABEL = "random (content-free control)"
# Upper bound of characters per token for sizing an excerpt (tokenizers average 3-4.5).
CHARS_PER_TOKEN_MAX = 5.0
CHARS_PER_TOKEN_HINT = 3.6  # the host's first guess, refined with /v1/tokenize
MAX_OP_B64 = 96 * 1024  # the compressed payload of one cell, inside one argument
MAX_FILE_BYTES = 16 * 1024 * 1024
MAX_FILE_PROMPTS = 10_000
MAX_PROMPT_CHARS = 400_000


@dataclass(frozen=True)
class PromptSet:
    """One kind of prompt a sweep sends: `code`, `prose`, `random` or a file's."""

    kind: str  # "code" | "prose" | "random" | "file"
    label: str
    texts: tuple[str, ...] = ()

    @property
    def sized(self) -> bool:
        """Whether the cell's context length decides the prompt's size (not a file's)."""
        return self.kind != "file"


@cache
def corpus() -> dict[str, Any]:
    """The frozen corpus shipped in the package."""
    text = resources.files("dflash_doctor").joinpath("data/bench_corpus.json").read_text()
    data: dict[str, Any] = json.loads(text)
    return data


def _file_line(path: Path, number: int, line: str) -> str:
    """One prompt of a JSONL file, or a UsageError naming the file and line."""
    try:
        row = json.loads(line)
    except ValueError:
        row = None
    prompt = row.get("prompt") if isinstance(row, dict) else None
    if not isinstance(prompt, str) or not prompt.strip():
        raise UsageError(f'{path}:{number}: expected a JSON object with a string "prompt"')
    if len(prompt) > MAX_PROMPT_CHARS:
        raise UsageError(f"{path}:{number}: prompt over {MAX_PROMPT_CHARS} characters")
    return prompt


def load_file(path: Path) -> PromptSet:
    """The user's prompts from a JSONL file, validated: bounded, one clear line when bad."""
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise UsageError(f"{path}: over {MAX_FILE_BYTES // (1024 * 1024)} MiB")
        raw = path.read_bytes()
    except OSError as e:
        raise UsageError(f"{path}: cannot read: {e.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not UTF-8") from None
    prompts = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            prompts.append(_file_line(path, number, line))
        if len(prompts) > MAX_FILE_PROMPTS:
            raise UsageError(f"{path}: more than {MAX_FILE_PROMPTS} prompts")
    if not prompts:
        raise UsageError(f"{path}: no prompts")
    return PromptSet("file", f"file {path.name}", tuple(prompts))


def parse_prompts(spec: str | None) -> list[PromptSet]:
    """`--prompts`: a comma list of code, prose, random and FILE.jsonl (default code,prose)."""
    out: list[PromptSet] = []
    for word in (spec or DEFAULT_PROMPTS).split(","):
        word = word.strip()
        if word in CORPUS_KINDS:
            ps = PromptSet(word, word)
        elif word == RANDOM:
            ps = PromptSet(RANDOM, RANDOM_LABEL)
        elif word.endswith(".jsonl"):
            ps = load_file(Path(word))
        else:
            raise UsageError(f"--prompts {word!r}: code, prose, random or a FILE.jsonl")
        if ps.label not in [p.label for p in out]:
            out.append(ps)
    return out


def _start(key: str, count: int) -> int:
    """A stable first index for a cell's key (the same prompts before and after a fix)."""
    return int(hashlib.sha256(key.encode()).hexdigest()[:12], 16) % count


def _pack(docs: list[str], requests: list[dict[str, Any]], size: int | None) -> dict[str, Any]:
    """The op's `text`: compressed documents and each request's place in them."""
    blob = zlib.compress(json.dumps({"docs": docs}).encode(), 9)
    return {
        "payload": base64.b64encode(blob).decode("ascii"),
        "requests": requests,
        "size": size,
        "chars_per_token": CHARS_PER_TOKEN_HINT,
    }


def _corpus_op(kind: str, picks: list[int], need: int) -> dict[str, Any]:
    """Excerpts of `need` characters from the anchors `picks`, merged where they overlap."""
    stream = corpus()[kind]
    text, anchors = stream["text"], stream["anchors"]
    doubled = text + text  # an excerpt that runs past the end continues from the start
    need = min(need, len(text))
    spans = sorted({int(anchors[p][0]) for p in picks})
    merged: list[list[int]] = []
    for a in spans:
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], a + need)
        else:
            merged.append([a, a + need])
    docs = [doubled[a:b] for a, b in merged]
    requests = []
    for p in picks:
        a = int(anchors[p][0])
        d = next(i for i, (lo, hi) in enumerate(merged) if lo <= a < hi)
        start = a - merged[d][0]
        requests.append({"doc": d, "start": start, "end": start + need, "task": anchors[p][1]})
    return _pack(docs, requests, None)


def _file_op(ps: PromptSet, picks: list[int]) -> dict[str, Any]:
    """The user's prompts `picks`, each shipped once, sent as given."""
    unique = sorted(set(picks))
    docs = [ps.texts[p] for p in unique]
    requests = [
        {"doc": unique.index(p), "start": 0, "end": len(ps.texts[p]), "task": ""} for p in picks
    ]
    return _pack(docs, requests, None)


def text_op(
    ps: PromptSet, key: str, context: int, n: int, repeat: int
) -> tuple[dict[str, Any], str | None]:
    """The `text` of one cell's op (n requests of repeat `repeat`) and a note when the text
    had to be shared or cycled to fit the host's command line."""
    pool = len(ps.texts) if ps.kind == "file" else len(corpus()[ps.kind]["anchors"])
    first = _start(key, pool)
    note = None
    distinct = min(n, pool)
    need = int(context * CHARS_PER_TOKEN_MAX) + 512
    while True:
        picks = [(first + repeat * n + i % distinct) % pool for i in range(n)]
        if ps.kind == "file":
            op = _file_op(ps, picks)
        else:
            op = _corpus_op(ps.kind, picks, need)
            op["size"] = context
        if len(op["payload"]) <= MAX_OP_B64:
            return op, note
        if distinct > 1:
            distinct = max(1, distinct // 2)
            note = (
                f"{ps.label} at {context} tokens x {n}: {distinct} distinct prompts "
                f"(too long to ship {n})"
            )
        elif ps.kind != "file" and need > 4096:
            need //= 2
            note = f"{ps.label} at {context} tokens: excerpts repeat their text (too long to ship)"
        else:
            raise UsageError(f"{ps.label}: a prompt too long to send to the host in one command")
