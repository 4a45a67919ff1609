"""What a gate must be given to judge a launch, and the SGLang version a repository pins.

A gate with no host cannot ask an SGLang which release it is, and a launch it cannot place
in a release is a launch it cannot judge (DFD104, DFD110, DFD111 and the version table all
need one). So the gate fails closed: without a version, the drafter's config or the target's,
it exits 2 with one line naming what to pass (cli.gate). Where `--sglang-version` is not
given, the release is read from what the repository itself pins, and the output says where:

- a pinned requirement: `sglang==0.5.23` (also `sglang[all]==...`) in `requirements*.txt`,
  `pyproject.toml`, `setup.cfg`, `constraints*.txt`, a `Dockerfile`'s `pip install`;
- an image tag: `lmsysorg/sglang:v0.5.23-cu129` in a Dockerfile, compose or Kubernetes YAML.

vLLM's release is read the same way (`vllm==0.30.0`, `vllm/vllm-openai:v0.30.0`) for vLLM
launches; several vLLM pins are a note, not an input error.

Only this machine's repository files are read (the gate's own input, as policy.py reads the
waiver file): bounded in files, depth and bytes, never following links out of the root.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from dflash_doctor.regular_file import Unread, read_regular
from dflash_doctor.report import HostReport, wanted_facts
from dflash_doctor.sglang_versions import parse_version

# `sglang==0.5.23`, `sglang[all]==0.5.23.post1`; `>=` or `~=` pin nothing.
REQUIREMENT = re.compile(r"(?<![\w.-])sglang(?:\[[\w,\s-]*\])?\s*===?\s*([0-9][\w.+-]*)", re.I)
# `lmsysorg/sglang:v0.5.23`, `lmsysorg/sglang:v0.5.23.post1-cu129`, `...:0.5.23-cu126`.
IMAGE = re.compile(r"lmsysorg/sglang:v?(\d+\.\d+(?:\.\d+)?(?:\.?post\d+|rc\d+)?)", re.I)
# vLLM's (issue 29): `vllm==0.30.0`, `vllm[...]==...`, and the project's image
# `vllm/vllm-openai:v0.30.0`.
VLLM_REQUIREMENT = re.compile(r"(?<![\w.-])vllm(?:\[[\w,\s-]*\])?\s*===?\s*([0-9][\w.+-]*)", re.I)
VLLM_IMAGE = re.compile(r"vllm/vllm-openai:v?(\d+\.\d+(?:\.\d+)?)", re.I)
SGLANG_PINS = (REQUIREMENT, IMAGE)
VLLM_PINS = (VLLM_REQUIREMENT, VLLM_IMAGE)
PIN_FILES = re.compile(
    r"^(requirements.*\.(txt|in)|constraints.*\.txt|pyproject\.toml|setup\.cfg|"
    r"(.*\.)?dockerfile(\..*)?|containerfile|.*\.ya?ml|.*\.sh|.*\.service)$",
    re.I,
)
SKIP_DIRS = {".git", ".hg", ".venv", "venv", "node_modules", "__pycache__", ".tox", "dist"}
MAX_FILES = 2000
MAX_DEPTH = 4
MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class Pin:
    """One SGLang version the repository pins, and where (`path:line`)."""

    version: str
    where: str


def _candidates(root: str) -> Iterator[str]:
    """Files under `root` that may pin SGLang, breadth first, bounded."""
    seen = 0
    for top, dirs, files in os.walk(root, followlinks=False):
        depth = os.path.relpath(top, root).count(os.sep) + (top != root)
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and depth < MAX_DEPTH)
        for name in sorted(files):
            if PIN_FILES.match(name):
                seen += 1
                if seen > MAX_FILES:
                    return
                yield os.path.join(top, name)


def _pins_in(
    path: str, shown: str, patterns: tuple[re.Pattern[str], ...] = SGLANG_PINS
) -> Iterator[Pin]:
    """The pins one file holds, each with its line."""
    try:
        # A regular file only, opened without blocking or following a link (a FIFO named
        # requirements.txt would hang the gate); one it cannot read pins nothing.
        text = read_regular(path, MAX_BYTES, follow=False).decode("utf-8", "replace")
    except Unread:
        return
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("#"):
            continue  # a pin commented out pins nothing
        for pattern in patterns:
            for m in pattern.finditer(line):
                if parse_version(m.group(1)) is not None:
                    yield Pin(m.group(1), f"{shown}:{number}")


def pinned_sglang(
    root: str,
    launch_files: Iterable[str] = (),
    patterns: tuple[re.Pattern[str], ...] = SGLANG_PINS,
) -> list[Pin]:
    """Every SGLang pin found (vLLM's with `patterns=VLLM_PINS`): the launch files' own
    first (a compose file's image), then the repository's. Empty when none is found or
    `root` is not a directory."""
    pins: list[Pin] = []
    done: set[str] = set()
    for path in [*launch_files, *(_candidates(root) if os.path.isdir(root) else ())]:
        real = os.path.realpath(path)
        if real in done:
            continue
        done.add(real)
        pins.extend(_pins_in(path, _shown(path, root), patterns))
    return pins


def chosen_pin(
    pins: list[Pin], launch_files: Iterable[str], root: str, engine: str = "SGLang"
) -> Pin | str | None:
    """The version to gate with: the launch file's own pin, else the one version the
    repository pins; a line saying why not where it pins several; None where none."""
    # Post releases differ from their base (0.5.23.post1 is not 0.5.23): compare as written.
    files = [_shown(f, root) + ":" for f in launch_files]
    own = [p for p in pins if p.where.startswith(tuple(files))]
    if own and len({p.version for p in own}) == 1:
        return own[0]
    if len({p.version for p in pins}) == 1:
        return pins[0]
    if not pins:
        return None
    listed = ", ".join(f"{p.version} ({p.where})" for p in pins[:4])
    return f"the repository pins several {engine} versions: {listed}"


def _shown(path: str, root: str) -> str:
    """`path` as the output names it: relative to `root` when under it."""
    absolute, base = os.path.abspath(path), os.path.abspath(root)
    inside = os.path.commonpath([absolute, base]) == base
    return (os.path.relpath(absolute, base) if inside else path).replace(os.sep, "/")


def missing_inputs(hosts: list[HostReport], given: Mapping[str, str]) -> list[str]:
    """Per host whose launch the gate cannot judge, one line naming what to pass.

    A host fails so where a check it ran could not judge (report.wanted_facts) and an input
    is missing: the version; the drafter where the launch runs DFLASH (or names a draft
    model); the target (the launch's model). `given`: fact -> the option that named it
    (`drafter` -> `--drafter models/x`): one it named but could not be read is said with
    the rest, in the same line. Checks left out by --select need none.
    """
    lines: list[tuple[str, str]] = []
    for host in hosts:
        facts = host.facts
        if facts is None or facts.launch.value is None:
            continue  # no launch: `no check could run` says so (report.build_report)
        if not any(wanted_facts(r) for r in host.results):
            continue  # every check it ran judged: nothing it lacks was needed
        launch = facts.launch.value
        wants = []
        if facts.sglang_version.value is None:
            wants.append("--sglang-version X.Y.Z (the repository pins no sglang== or image tag)")
        dflash = (launch.speculative_algorithm or "").upper() == "DFLASH"
        if (dflash or launch.draft_model_path) and facts.drafter.value is None:
            wants += [] if "drafter" in given else ["--drafter DIR"]
        if facts.target.value is None and "target" not in given:
            wants.append("--target DIR")
        if wants:
            bad = [
                f"{given[k]} could not be read"
                for k in ("drafter", "target")
                if k in given and getattr(facts, k).value is None
            ]
            line = f"the gate cannot judge this launch without {_and(wants)}"
            lines.append((host.host, line + "".join(f"; {b}" for b in bad)))
    return _folded(lines)


def _folded(lines: list[tuple[str, str]]) -> list[str]:
    """One line per cause, naming its hosts (ten hosts lacking a target: one line)."""
    hosts: dict[str, list[str]] = {}
    for host, text in lines:
        hosts.setdefault(text, []).append(host)
    return [f"{', '.join(names)}: {text}" for text, names in hosts.items()]


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
