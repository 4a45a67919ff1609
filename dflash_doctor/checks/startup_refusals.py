"""DFD111: launches that SGLang parses, then refuses to start (its post-parse hooks and the
draft model's construction), predicted from the launch and the drafter's config.

Each refusal is one row of RULES: a crash signature of data/log_patterns.json (SGLang's own
text, its releases and its file:line in each, generated from the wheels by
scripts/gen_log_patterns.py) and a pure predicate over the facts. A rule applies to the
releases whose wheel raises its text, so the version ranges are the data's, never typed here.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from dflash_doctor.checks.base import Evidence, Finding, Fix, Severity, Skip, Unjudged, check
from dflash_doctor.checks.views import (
    config_evidence,
    flag_evidence,
    remove_window_fix,
    require_dflash,
    startup_release,
)
from dflash_doctor.facts.log_patterns import LogFormat, LogPattern, pattern
from dflash_doctor.facts.models import DrafterConfig, HostFacts, LaunchArgs

# SGLang's DFLASH block size when neither flag nor the drafter's config names one
# (`inferred_block_size = 16`: srt/server_args.py 0.5.11:3413-3414,
# arg_groups/speculative_hook.py 0.5.23:415-416).
DEFAULT_BLOCK_SIZE = 16
SINK_FLAG = "--speculative-draft-sink-size"
BLOCK_FLAG = "--speculative-dflash-block-size"
TOKENS_FLAG = "--speculative-num-draft-tokens"


@dataclass(frozen=True)
class Refusal:
    """What one rule found: the values SGLang's text is filled with, evidence and fixes."""

    values: dict[str, object]
    evidence: list[Evidence]
    fixes: list[Fix]


Rule = Callable[[HostFacts, LaunchArgs], Refusal | None]


def _window(launch: LaunchArgs) -> Evidence:
    flag = launch.draft_window_flag or "--speculative-draft-window-size"
    return flag_evidence(launch, flag, f"{flag} {launch.draft_window_size}")


def window_not_positive(facts: HostFacts, launch: LaunchArgs) -> Refusal | None:
    """The window flag at zero or below (SGLang's type=int takes it; the hook refuses it)."""
    if launch.draft_window_size is None or launch.draft_window_size > 0:
        return None
    return Refusal(
        {"window_size": launch.draft_window_size},
        [_window(launch)],
        [remove_window_fix(facts)],
    )


def served_block_size(launch: LaunchArgs, cfg: DrafterConfig | None) -> tuple[int, str]:
    """The block size SGLang compares the window with, and where it came from: the flags,
    else the drafter's block_size (`resolve_block_size`), else 16."""
    if launch.dflash_block_size is not None:
        return launch.dflash_block_size, BLOCK_FLAG
    if launch.num_draft_tokens is not None:
        return launch.num_draft_tokens, TOKENS_FLAG
    if cfg is not None and cfg.block_size is not None:
        return cfg.block_size, f"drafter {cfg.block_size_key or 'block_size'}"
    return DEFAULT_BLOCK_SIZE, "SGLang's default"


def window_below_block(facts: HostFacts, launch: LaunchArgs) -> Refusal | None:
    """A positive window smaller than the block size the server verifies."""
    window = launch.draft_window_size
    if window is None or window <= 0:
        return None
    block, source = served_block_size(launch, facts.drafter.value)
    if window >= block:
        return None
    evidence = [_window(launch)]
    cfg = facts.drafter.value
    if source.startswith("--"):
        evidence.append(flag_evidence(launch, source, f"{source} {block}"))
    elif cfg is not None and source.startswith("drafter"):
        key = cfg.block_size_key or "block_size"
        evidence.append(config_evidence(cfg, key, f"{key}={block}"))
    fixes = [remove_window_fix(facts)]
    return Refusal(
        {"window_size": window, "draft_tokens": block, "speculative_draft_window_size": window},
        evidence,
        fixes,
    )


def sink_without_window(facts: HostFacts, launch: LaunchArgs) -> Refusal | None:
    """A sink size with no draft window."""
    # A window flag whose value is unknown offline is still a window.
    if launch.draft_sink_size is None or launch.draft_window_flag is not None:
        return None
    return Refusal(
        {},
        [flag_evidence(launch, SINK_FLAG, f"{SINK_FLAG} {launch.draft_sink_size}")],
        [Fix(action="remove_flag", flag=SINK_FLAG)],
    )


def sink_negative(facts: HostFacts, launch: LaunchArgs) -> Refusal | None:
    """A sink size below zero (checked before the window's presence)."""
    if launch.draft_sink_size is None or launch.draft_sink_size >= 0:
        return None
    return Refusal(
        {"sink_size": launch.draft_sink_size},
        [flag_evidence(launch, SINK_FLAG, f"{SINK_FLAG} {launch.draft_sink_size}")],
        [Fix(action="remove_flag", flag=SINK_FLAG)],
    )


def drafter_block_not_positive(facts: HostFacts, launch: LaunchArgs) -> Refusal | None:
    """The drafter's block_size below 1: `parse_dflash_draft_config` raises while the draft
    model is built, whatever the flags say (the hook's own inference swallows it)."""
    cfg = facts.drafter.value
    if cfg is None or cfg.block_size is None or cfg.block_size > 0:
        return None
    key = cfg.block_size_key or "block_size"
    return Refusal(
        {"comparator": "positive", "parsed": cfg.block_size},
        [config_evidence(cfg, key, f"{key}={cfg.block_size}")],
        [Fix(action="manual", note=f"set the drafter's {key} to the block it was trained with")],
    )


def drafter_block_invalid(facts: HostFacts, launch: LaunchArgs) -> Refusal | None:
    """The drafter's block_size is not something `int()` takes."""
    cfg = facts.drafter.value
    if cfg is None or cfg.block_size_invalid is None:
        return None
    key = cfg.block_size_key or "block_size"
    return Refusal(
        {"value": cfg.block_size_invalid},
        [config_evidence(cfg, key, f"{key}={cfg.block_size_invalid}")],
        [
            Fix(
                action="manual",
                note=f"set the drafter's {key} to the integer block it was trained with",
            )
        ],
    )


def unsupported_layer_type(facts: HostFacts, launch: LaunchArgs) -> Refusal | None:
    """A layer_types entry that is neither sliding_attention nor full_attention."""
    cfg = facts.drafter.value
    if cfg is None or not cfg.unknown_layer_types:
        return None
    layer, kind = next(
        (i, t) for i, t in enumerate(cfg.layer_types) if t in cfg.unknown_layer_types
    )
    return Refusal(
        {"layer_id": layer, "layer_type": repr(kind)},
        [config_evidence(cfg, "layer_types", f"layer_types[{layer}]={kind!r}")],
        [Fix(action="manual", note="write each layer as sliding_attention or full_attention")],
    )


def block_size_not_positive(facts: HostFacts, launch: LaunchArgs) -> Refusal | None:
    """--speculative-dflash-block-size at zero or below."""
    if launch.dflash_block_size is None or launch.dflash_block_size > 0:
        return None
    return Refusal(
        {"speculative_dflash_block_size": launch.dflash_block_size},
        [flag_evidence(launch, BLOCK_FLAG, f"{BLOCK_FLAG} {launch.dflash_block_size}")],
        [Fix(action="remove_flag", flag=BLOCK_FLAG)],
    )


def block_flags_differ(facts: HostFacts, launch: LaunchArgs) -> Refusal | None:
    """Both block-size flags, with different values."""
    tokens, block = launch.num_draft_tokens, launch.dflash_block_size
    if tokens is None or block is None or block <= 0 or tokens == block:
        return None
    return Refusal(
        {"speculative_num_draft_tokens": tokens, "speculative_dflash_block_size": block},
        [
            flag_evidence(launch, TOKENS_FLAG, f"{TOKENS_FLAG} {tokens}"),
            flag_evidence(launch, BLOCK_FLAG, f"{BLOCK_FLAG} {block}"),
        ],
        [Fix(action="remove_flag", flag=BLOCK_FLAG)],
    )


def sliding_window_missing(facts: HostFacts, launch: LaunchArgs) -> Refusal | None:
    """Sliding layers whose transformers config class leaves no sliding_window."""
    cfg = facts.drafter.value
    if cfg is None or "sliding_attention" not in cfg.layer_types or not cfg.sliding_window_unset:
        return None
    layers = [i for i, t in enumerate(cfg.layer_types) if t == "sliding_attention"]
    if cfg.sliding_window_source == "use_sliding_window":
        why = (
            f"model_type {cfg.model_type!r}: transformers' Qwen3Config sets sliding_window to "
            "None unless use_sliding_window is true"
        )
        note = 'set "use_sliding_window": true in the drafter\'s config.json'
        key = "use_sliding_window"
    else:
        why = "sliding_window is null or absent and the config class gives no default"
        note = 'set "sliding_window" to the trained window in the drafter\'s config.json'
        key = "sliding_window"
    source = "derived by the config class" if cfg.layer_types_derived else "layer_types"
    return Refusal(
        {},
        [
            config_evidence(
                cfg, "layer_types", f"layers {layers} are sliding_attention ({source})"
            ),
            config_evidence(cfg, key, why),
        ],
        [Fix(action="manual", note=note)],
    )


# Every refusal DFD111 predicts. SGLang raises the first that applies, in its own order: the
# post-parse checks by their line in the one function that runs them (srt/server_args.py up
# to 0.5.12.post1, where the block size comes before the window, 0.5.11:3358-3428;
# arg_groups/speculative_hook.py from 0.5.13, where the window and sink come first,
# 0.5.23:202-235 then 368-435), then the draft model's construction in this order
# (dflash_utils.py's block size at model build, models/dflash.py 0.5.23:293; its layers,
# 0.5.23:166-190). The sites are the crash data's, so the order is read, not typed.
RULES: tuple[tuple[str, str, Rule], ...] = (
    ("crash_window_positive_0511", "Draft window is not positive", window_not_positive),
    ("crash_window_positive", "Draft window is not positive", window_not_positive),
    ("crash_sink_negative", "Draft sink size is negative", sink_negative),
    ("crash_sink_without_window", "Draft sink size without a draft window", sink_without_window),
    ("crash_block_size_positive", "DFlash block size is not positive", block_size_not_positive),
    ("crash_block_size_flags_differ", "The two block-size flags disagree", block_flags_differ),
    ("crash_window_below_block", "Draft window below the DFlash block size", window_below_block),
    (
        "crash_draft_block_size_invalid",
        "The drafter's block_size is not an integer",
        drafter_block_invalid,
    ),
    (
        "crash_draft_block_size_positive",
        "The drafter's block_size is not positive",
        drafter_block_not_positive,
    ),
    (
        "crash_unsupported_layer_type",
        "A drafter layer type SGLang does not build",
        unsupported_layer_type,
    ),
    (
        "crash_sliding_window_required",
        "Sliding draft layers without a sliding_window",
        sliding_window_missing,
    ),
)
# Files whose checks run after the argument parse, before any model is built.
_POST_PARSE_FILES = ("srt/server_args.py", "srt/arg_groups/")


@check("DFD111", "sglang-refuses-to-start", Severity.ERROR, needs=("launch",))
def startup_refusals(facts: HostFacts) -> list[Finding]:
    """SGLang parses this launch, then refuses to start it.

    **What it finds.** Settings that pass SGLang's argparse but fail its post-parse hooks
    or the draft model's construction, predicted for the release the launch would start
    (the host's installed SGLang, or `--sglang-version`): a draft window of zero or less;
    `--speculative-draft-sink-size` without a window (0.5.21+); a non-positive
    `--speculative-dflash-block-size`, or one that differs from
    `--speculative-num-draft-tokens`; a window below the block size (the flags, else the
    drafter's `block_size`, else 16); and `sliding_attention` layers whose transformers
    config class leaves `sliding_window` None (0.5.14+, which builds sliding layers from
    it: a `qwen3` drafter without `use_sliding_window: true`, a `gpt_oss` drafter with
    `"sliding_window": null`); a sink size below zero (0.5.21+); a drafter `block_size`
    below 1 or not an integer; a `layer_types` entry other than the two SGLang builds
    (0.5.14+). The finding quotes the text SGLang raises first, in its own order, with its
    file:line, then the refusals a launch corrected for that one would meet next; where
    SGLang's parser already refuses the command (DFD110) it says they follow that.

    **Why it hurts.** `sglang.launch_server` exits with a `ValueError` at start-up: a
    relaunch from this file leaves the host without a server. Before that, the doctor's
    other verdicts describe a server that will never run.

    **Example.** `--speculative-draft-window-size 8` with a drafter of `block_size: 16` on
    0.5.23: `--speculative-draft-window-size must be >= --speculative-num-draft-tokens
    (block_size). window_size=8, block_size=16.`

    **How to fix.** The fix each finding names: remove the window flag (or the sink, or the
    alias `--speculative-dflash-block-size`); for sliding layers, make the drafter's config
    name its window (`"use_sliding_window": true` for Qwen3).

    **Fix safety.** Removing a flag SGLang refuses only lets the server start; a drafter
    config edit is manual (it changes what the draft model is built with).

    **Versions.** Texts and sites are data (crash signatures in data/log_patterns.json).
    Window positive: `srt/server_args.py` 0.5.11:3382, `arg_groups/speculative_hook.py`
    0.5.23:206. Sink without window: `arg_groups/speculative_hook.py` 0.5.21:193,
    0.5.23:229. Block size positive: `srt/server_args.py` 0.5.11:3361,
    `arg_groups/speculative_hook.py` 0.5.23:371. Flags differ: `srt/server_args.py`
    0.5.11:3368, `arg_groups/speculative_hook.py` 0.5.23:378. Window below block:
    `srt/server_args.py` 0.5.11:3425, `arg_groups/speculative_hook.py` 0.5.23:431. Sliding
    window: `speculative/dflash_utils.py` 0.5.14:352, 0.5.23:413. Negative sink:
    `arg_groups/speculative_hook.py` 0.5.21:189, 0.5.23:225. Drafter block size:
    `speculative/dflash_utils.py` 0.5.11:257, 0.5.23:515; not an integer:
    `speculative/dflash_utils.py` 0.5.11:254, 0.5.23:512. Layer type: `models/dflash.py`
    0.5.14:64, 0.5.23:190.
    """
    require_dflash(facts)
    launch = facts.launch.value
    assert launch is not None
    release = startup_release(facts)
    if release is None:
        raise Unjudged("the SGLang release this launch starts is unknown")
    found = predicted(facts, launch, release)
    return [_finding(found, release, parser_refuses(launch))] if found else []


Predicted = tuple[LogPattern, LogFormat, str, Refusal]


def parser_refuses(launch: LaunchArgs) -> bool:
    """Whether SGLang's argparse already refuses the command (DFD110, DFD104, DFD140)."""
    return bool(launch.sglang_rejects or launch.unknown_args or launch.value_errors)


def predicted(facts: HostFacts, launch: LaunchArgs, release: str) -> list[Predicted]:
    """Every refusal of RULES that this release raises for these facts, in SGLang's order."""
    found: list[tuple[tuple[int, int], Predicted]] = []
    for index, (pattern_id, title, rule) in enumerate(RULES):
        p = pattern(pattern_id)
        fmt = _format_in(p, release)
        if fmt is None:
            continue
        refusal = rule(facts, launch)
        if refusal is not None:
            file, _, line = _site(fmt, release).rpartition(":")
            early = file.startswith(_POST_PARSE_FILES)
            key = (0, int(line)) if early else (1, index)
            found.append((key, (p, fmt, title, refusal)))
    return [item for _, item in sorted(found, key=lambda kv: kv[0])]


def require_starts(facts: HostFacts) -> None:
    """Skip a check whose verdict describes a running server when SGLang refuses to start
    this launch at all (DFD111 says why): a span or block verdict on it would be moot."""
    launch = facts.launch.value
    release = startup_release(facts)
    if launch is None or release is None:
        return
    if facts.runtime.value is not None:
        return  # a server answers: it started (a refusal is the next restart's, DFD111/DFD112)
    found = predicted(facts, launch, release)
    if found:
        _, fmt, _, refusal = found[0]
        raise Skip(
            f"SGLang {release} refuses to start this launch (DFD111): "
            f"{fill(fmt.format, refusal.values)}"
        )


def _format_in(p: LogPattern, release: str) -> LogFormat | None:
    """The text this release raises (None when its wheel does not raise it)."""
    if not p.in_release(release):
        return None
    return next((f for f in p.formats if release in f.sites), p.formats[-1])


_FIELD = re.compile(r"\{([^{}]*)\}")


def fill(fmt: str, values: dict[str, object]) -> str:
    """SGLang's f-string text with its fields filled by the last name of each expression."""

    def one(m: re.Match[str]) -> str:
        key = re.split(r"[!:=]", m.group(1))[0].strip().split(".")[-1]
        return str(values.get(key, "…"))

    return _FIELD.sub(one, fmt)


def _site(fmt: LogFormat, release: str) -> str:
    return fmt.sites.get(release, fmt.sites[fmt.last])[0]


def _finding(found: list[Predicted], release: str, parser_refused: bool) -> Finding:
    """One finding: the refusal SGLang raises first, then those a corrected launch meets."""
    p, fmt, title, first = found[0]
    text = fill(fmt.format, first.values)
    when = (
        "Once its parser accepts the command (DFD110, DFD104, DFD140), " if parser_refused else ""
    )
    message = (
        f"{when}SGLang {release} raises at start-up: `ValueError: {text}` "
        f"({_site(fmt, release)}). {p.meaning}"
    )
    evidence = [*first.evidence, _version_evidence(fmt, release, text)]
    fixes = list(first.fixes)
    for _, later_fmt, _, later in found[1:]:
        later_text = fill(later_fmt.format, later.values)
        message += f" Then: `{later_text}` ({_site(later_fmt, release)})."
        evidence += [*later.evidence, _version_evidence(later_fmt, release, later_text)]
        fixes += [f for f in later.fixes if f not in fixes]
    return startup_refusals.finding(
        title=f"SGLang {release} refuses to start: {title}",
        message=message,
        evidence=evidence,
        fixes=fixes,
    )


def _version_evidence(fmt: LogFormat, release: str, text: str) -> Evidence:
    return Evidence(kind="version", text=f"SGLang {release}: {_site(fmt, release)} raises `{text}`")
