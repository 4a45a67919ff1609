"""DFD171: thinking mode on a DFlash drafter trained without thinking traces.

Which drafters are non-thinking is data (`dflash_doctor/data/drafter_thinking.json`, keyed by
Hugging Face repo id, from what z-lab/dflash publishes); whether the server thinks is read
from its launch (`--default-chat-template-kwargs`, `--chat-template`) or the running server's
resolved args, and from a bench whose responses carried reasoning tokens.
"""

from __future__ import annotations

import json
import posixpath
from functools import cache
from importlib import resources
from typing import Any

from dflash_doctor.checks.base import Evidence, Finding, Fix, Severity, Skip, check
from dflash_doctor.checks.views import argv_value, require_dflash, startup_release
from dflash_doctor.facts.models import BenchResult, HostFacts
from dflash_doctor.sglang_versions import Version, parse_version

DATA_FILE = "drafter_thinking.json"
KWARGS_FLAG = "--default-chat-template-kwargs"
# `--default-chat-template-kwargs` exists from 0.5.16 (srt/server_args.py 0.5.16:1152-1160).
KWARGS_SINCE: Version = (0, 5, 16)
THINKING_OFF = '{"enable_thinking": false}'
# A JSON object on a command line is short; a longer value is not read.
MAX_KWARGS_CHARS = 4096
# Keys chat templates read to turn thinking on or off (the flag's help names both).
THINKING_KEYS = ("enable_thinking", "thinking")


@cache
def known_drafters() -> dict[str, dict[str, Any]]:
    """The non-thinking drafters, by lower-cased repo id."""
    text = resources.files("dflash_doctor.data").joinpath(DATA_FILE).read_text("utf-8")
    drafters: dict[str, dict[str, Any]] = json.loads(text)["drafters"]
    return {repo.lower(): {"repo": repo, **row} for repo, row in drafters.items()}


def repo_candidates(path: str) -> list[str]:
    """Repo ids a drafter path may name: `org/name` itself, the `models--org--name` folder of
    a Hugging Face cache, or the last folder of a local copy (matched by name alone)."""
    parts = [p for p in path.replace("\\", "/").split("/") if p and p != "config.json"]
    found = []
    for part in parts:
        if part.startswith("models--") and part.count("--") >= 2:
            org, name = part[len("models--") :].split("--", 1)
            found.append(f"{org}/{name}")
    if len(parts) >= 2:
        found.append(f"{parts[-2]}/{parts[-1]}")
    if parts:
        found.append(parts[-1])
    return [c.lower() for c in found]


def known_drafter(paths: list[str]) -> dict[str, Any] | None:
    """The data row of the first path naming a known non-thinking drafter, else None."""
    table = known_drafters()
    by_name = {posixpath.basename(k): v for k, v in table.items()}
    for path in paths:
        for cand in repo_candidates(path):
            row = table.get(cand) or (by_name.get(cand) if "/" not in cand else None)
            if row is not None:
                return row
    return None


def _kwargs(facts: HostFacts) -> tuple[dict[str, Any] | None, str | None]:
    """The server's default chat template kwargs and where they were read (None: unset)."""
    runtime = facts.runtime.value
    value: object = runtime.arg("default_chat_template_kwargs") if runtime is not None else None
    where = "the running server's default_chat_template_kwargs"
    if value is None and facts.launch.value is not None:
        value = argv_value(facts.launch.value, KWARGS_FLAG)
        where = KWARGS_FLAG
    if isinstance(value, str) and len(value) <= MAX_KWARGS_CHARS:
        try:
            value = json.loads(value)
        except ValueError:
            return None, None
    return (value, where) if isinstance(value, dict) else (None, None)


def _chat_template(facts: HostFacts) -> str | None:
    runtime = facts.runtime.value
    value = runtime.arg("chat_template") if runtime is not None else None
    if value is None and facts.launch.value is not None:
        value = argv_value(facts.launch.value, "--chat-template")
    return str(value)[:200] if value else None


def thinking_on(facts: HostFacts, row: dict[str, Any]) -> tuple[bool, str]:
    """(thinking on, why): the kwargs the server applies to every chat request, else the
    target's chat template default; Skip where a custom template decides it unseen."""
    kwargs, where = _kwargs(facts)
    # The target's template reads one key: Qwen3's reads enable_thinking, never `thinking`
    # (SGLang's qwen3 parser agrees: serving_chat.py 0.5.11:1396-1401,
    # parser/reasoning_parser.py 0.5.23:441,483), so `{"thinking": false}` turns nothing off.
    keys = (row["thinking_key"],) if isinstance(row.get("thinking_key"), str) else THINKING_KEYS
    for key in keys:
        if kwargs is not None and isinstance(kwargs.get(key), bool):
            return bool(kwargs[key]), f"{where} sets {key}={str(kwargs[key]).lower()}"
    template = _chat_template(facts)
    if template is not None:
        raise Skip(f"the chat template {template} decides thinking, and it is not read")
    if row.get("target_thinks_by_default"):
        return True, (
            f"{row['target']}'s chat template thinks unless a request sends enable_thinking="
            f"false, and no {KWARGS_FLAG} turns it off"
        )
    return False, "the target's chat template does not think by default"


def bench_reasoning(result: BenchResult | None) -> tuple[int, int]:
    """(responses that carried reasoning tokens, responses checked) in a bench."""
    if result is None:
        return 0, 0
    rows = [r for c in result.cells for r in c.ok if r.reasoning is not None]
    return sum(1 for r in rows if r.reasoning), len(rows)


def _fixes(release: str | None) -> list[Fix]:
    version = parse_version(release) if release else None
    if version is not None and version < KWARGS_SINCE:
        note = (
            f"SGLang {release} has no {KWARGS_FLAG} (from 0.5.16): send chat_template_kwargs "
            f"{THINKING_OFF} with each chat request, or serve a --chat-template that does not "
            "think; or upgrade and set the flag"
        )
        return [Fix(action="manual", note=note)]
    note = (
        f"set {KWARGS_FLAG} '{THINKING_OFF}' (answers lose their reasoning; requests that "
        "need it can still send enable_thinking=true), or serve a drafter trained with thinking"
    )
    return [Fix(action="manual", flag=KWARGS_FLAG, value=THINKING_OFF, note=note)]


@check("DFD171", "thinking-on-non-thinking-drafter", Severity.WARNING, needs=("launch",))
def thinking_drafter(facts: HostFacts) -> list[Finding]:
    """Thinking mode is on, but the DFlash drafter was trained without thinking traces.

    **What it finds.** The drafter is one its publisher marks as trained without thinking
    (`dflash_doctor/data/drafter_thinking.json`: z-lab's `Qwen3-4B-DFlash-b16` and
    `Qwen3-8B-DFlash-b16`, labelled "(non-thinking)" in z-lab/dflash's README, whose
    benchmark refuses `--enable-thinking` for them: "DFlash draft models for Qwen3-4B and
    Qwen3-8B were not trained with thinking traces"; dflash/benchmark.py lines 503-506 at
    44947fb), matched by the repo id in the draft model path, its Hugging Face cache folder
    or a local copy's folder name. No drafter config field records it. And the server
    thinks: `--default-chat-template-kwargs` (or the running server's resolved value) sets
    `enable_thinking` true, or sets nothing and the target's own chat template thinks by
    default (Qwen3's does unless a request sends `enable_thinking: false`; SGLang's own
    rule for `--reasoning-parser qwen3`: "thinking by default, and can be disabled by
    setting enable_thinking=False", `entrypoints/openai/serving_chat.py` 0.5.11:1396-1401).
    `--reasoning-parser` itself turns nothing on: it only splits the reasoning out. A custom
    `--chat-template` decides it unseen: the check is then skipped. A bench whose
    responses carried reasoning tokens (`<think>`) is named in the evidence.

    **Why it hurts.** The drafter guesses the target's next tokens from what it was
    trained on; reasoning traces are text it never saw. z-lab/dflash#133 measured the
    acceptance of Qwen3-8B's drafter falling from 60 % to 25 % with thinking on. The server
    stays correct and merely slower, with nothing in its log.

    **Example.** `--model-path Qwen/Qwen3-8B --speculative-draft-model-path
    z-lab/Qwen3-8B-DFlash-b16 --reasoning-parser qwen3` and chat clients that send no
    `chat_template_kwargs`: every request thinks.

    **How to fix.** From 0.5.16, `--default-chat-template-kwargs '{"enable_thinking":
    false}'` turns thinking off for every chat request that does not ask for it
    (`entrypoints/openai/serving_chat.py` 0.5.16:783-787, 0.5.23:1805-1809: a request's own
    `chat_template_kwargs` still wins). Before 0.5.16, clients send `chat_template_kwargs:
    {"enable_thinking": false}`, or the server gets a `--chat-template` that does not think.
    Where answers need reasoning, serve a drafter trained with it instead.

    **Fix safety.** Manual: turning thinking off changes the answers (no reasoning before
    them), which only the operator can accept. `/generate` requests do not go through the
    chat template and are unaffected.

    **Versions.** Every release 0.5.11-0.5.23 applies the target's chat template; the
    server-wide kwargs flag exists from 0.5.16 (`srt/server_args.py` 0.5.16:1152-1160,
    `arg_groups/fields/serving.py` 0.5.23:209-217).
    """
    require_dflash(facts)
    launch = facts.launch.value
    assert launch is not None
    paths = [p for p in (launch.draft_model_path,) if p]
    if facts.drafter.value is not None:
        paths.append(facts.drafter.value.path)
    row = known_drafter(paths)
    if row is None:
        return []
    on, why = thinking_on(facts, row)
    if not on:
        return []
    evidence = [
        Evidence(
            kind="derived",
            text=f"{row['repo']} was trained without thinking traces ({row['source']})",
        ),
        Evidence(kind="flag", text=why, file=launch.source, key=KWARGS_FLAG),
    ]
    parser = argv_value(launch, "--reasoning-parser")
    if parser:
        evidence.append(
            Evidence(
                kind="flag",
                text=f"--reasoning-parser {parser[:40]}: the server expects reasoning output",
                file=launch.source,
                line=launch.flag_lines.get("--reasoning-parser"),
                key="--reasoning-parser",
            )
        )
    thought, checked = bench_reasoning(facts.bench.value)
    if checked:
        evidence.append(
            Evidence(
                kind="derived",
                text=f"{thought} of {checked} bench responses carried reasoning tokens",
            )
        )
    release = startup_release(facts)
    return [
        thinking_drafter.finding(
            title="thinking mode is on for a drafter trained without thinking",
            message=(
                f"The drafter {row['repo']} was trained without thinking traces, and the "
                f"server thinks: {why}. Acceptance falls on reasoning text (z-lab/dflash#133: "
                "60 % to 25 %)."
            ),
            evidence=evidence,
            fixes=_fixes(release),
        )
    ]
