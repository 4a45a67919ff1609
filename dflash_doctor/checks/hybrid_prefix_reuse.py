"""DFD172: a hybrid-attention target (linear-attention / Mamba layers) served with DFLASH and
prefix reuse (the radix cache) on a release that refuses the combination or mishandles it.

The release table is the wheels' own: the strategy flag's name and default, what a start
refuses, and where DFLASH's verify did not rebuild the Mamba track indices that the radix
cache's state checkpoints come from (every line cited in the check's page).
"""

from __future__ import annotations

from dataclasses import dataclass

from dflash_doctor.checks.base import Evidence, Finding, Fix, Severity, Skip, check
from dflash_doctor.checks.views import argv_value, require_dflash, startup_release
from dflash_doctor.facts.models import HostFacts, LaunchArgs
from dflash_doctor.sglang_versions import Version, parse_version

OLD_FLAG = "--mamba-scheduler-strategy"  # 0.5.11-0.5.13 (an alias of the new one 0.5.14-0.5.19)
NEW_FLAG = "--mamba-radix-cache-strategy"  # 0.5.14+
NEW_FLAG_SINCE: Version = (0, 5, 14)
# DFLASH's verify rebuilds the Mamba track indices before TARGET_VERIFY from 0.5.18.
TRACK_HOOK_SINCE: Version = (0, 5, 18)
NO_BUFFER_REFUSED_UNTIL: Version = (0, 5, 13)
DFLASH_LAZY_TEXT_SINCE: Version = (0, 5, 17)
RUNTIME_KEYS = ("mamba_radix_cache_strategy", "mamba_scheduler_strategy")
# A strategy is a short word; longer host text is cut before it reaches a message.
MAX_VALUE_CHARS = 40


@dataclass(frozen=True)
class Verdict:
    """What the release does with the resolved strategy: refused at start, or served wrong."""

    refused: bool
    text: str


def strategy_flag(version: Version) -> str:
    """The strategy flag's spelling in this release."""
    return NEW_FLAG if version >= NEW_FLAG_SINCE else OLD_FLAG


def _written(facts: HostFacts) -> tuple[str, str]:
    """(strategy, where it came from): the live server's resolved value, else the launch
    flag (either spelling), else `auto`, the default of every release."""
    runtime = facts.runtime.value
    if runtime is not None:
        for key in RUNTIME_KEYS:
            value = runtime.arg(key)
            if isinstance(value, str) and value:
                value = value[:MAX_VALUE_CHARS]
                return value, f"the running server resolved {key}={value}"
    launch = facts.launch.value
    if launch is not None:
        for flag in (NEW_FLAG, OLD_FLAG):
            value = argv_value(launch, flag)
            if value:
                value = value[:MAX_VALUE_CHARS]
                return value, f"{flag} {value}"
    return "auto", "no strategy flag (default auto)"


def has_flag(launch: LaunchArgs, flag: str) -> bool:
    """Whether a switch (a flag without a value) is on the launch command line."""
    return any(a == flag or a.startswith(flag + "=") for a in launch.argv)


def _resolved(strategy: str, version: Version, launch: LaunchArgs | None) -> str:
    """The strategy `auto` becomes: no_buffer until 0.5.13; from 0.5.14 extra_buffer when the
    overlap scheduler or pages over 1 token are on (DFLASH keeps overlap on), else no_buffer."""
    if strategy != "auto":
        return strategy
    if version <= NO_BUFFER_REFUSED_UNTIL:
        return "no_buffer"
    overlap = launch is None or not has_flag(launch, "--disable-overlap-schedule")
    paged = launch is not None and (launch.page_size or 1) > 1
    return "extra_buffer" if overlap or paged else "no_buffer"


def verdict(strategy: str, version: Version) -> Verdict | None:
    """The release's answer to DFLASH + radix cache + this resolved strategy on a hybrid
    target; None where it serves the combination as designed."""
    if version <= NO_BUFFER_REFUSED_UNTIL and strategy == "no_buffer":
        return Verdict(
            True,
            "the start is refused: `Speculative decoding for <arch> is not compatible with "
            "radix cache when using --mamba-scheduler-strategy no_buffer.` "
            "(srt/server_args.py 0.5.11:2452-2456)",
        )
    if version < TRACK_HOOK_SINCE and strategy == "extra_buffer_lazy":
        text = (
            f"`extra_buffer_lazy unsupported with DFLASH; use {NEW_FLAG} extra_buffer.`"
            if version >= DFLASH_LAZY_TEXT_SINCE
            else "`extra_buffer_lazy unsupported with spec.`"
        )
        return Verdict(True, f"the start is refused: {text}")
    if version < TRACK_HOOK_SINCE and strategy in ("extra_buffer", "extra_buffer_lazy"):
        return Verdict(
            False,
            "it starts, but DFLASH's verify does not rebuild the Mamba track indices (the "
            "release's own note: `dflash bypasses that hook`), so the recurrent-state "
            "checkpoints the radix cache keeps can be stale: a prefix-cached request may not "
            "continue as the same request without the cache",
        )
    return None


def no_buffer_refusal(version: Version, launch: LaunchArgs | None) -> Verdict | None:
    """From 0.5.14 a `no_buffer` the launch asks for (not one `auto` resolved, which turns
    the overlap scheduler off itself) is refused at start with the overlap scheduler on
    (DFLASH keeps it on) or pages over one token: srt/server_args.py 0.5.14:4355-4362,
    0.5.17:5575-5582, arg_groups/mamba_hook.py 0.5.23:156-163."""
    if version < NEW_FLAG_SINCE or launch is None:
        return None
    if (launch.page_size or 1) > 1:
        text = "no_buffer only supports page_size=1."
    elif not has_flag(launch, "--disable-overlap-schedule"):
        text = (
            "no_buffer do not support overlap schedule. Try to set disable_overlap_schedule=True."
        )
    else:
        return None
    return Verdict(True, f"the start is refused: `{text}`")


def _no_buffer_fixes(version: Version) -> list[Fix]:
    """A refused explicit no_buffer: let `auto` choose, or no radix cache; the upgrade only
    where `auto`'s extra_buffer is still served stale (below 0.5.18)."""
    fixes = [
        Fix(action="remove_flag", flag=NEW_FLAG),
        Fix(action="set_flag", flag="--disable-radix-cache"),
    ]
    if version < TRACK_HOOK_SINCE:
        fixes.insert(1, Fix(action="upgrade_sglang", value="0.5.18"))
    return fixes


def _fixes() -> list[Fix]:
    """Upgrade to the release whose DFLASH verify rebuilds the track indices, else no radix
    cache: the only launch every affected release starts and serves correctly."""
    return [
        Fix(action="upgrade_sglang", value="0.5.18"),
        Fix(action="set_flag", flag="--disable-radix-cache"),
    ]


@check("DFD172", "hybrid-target-prefix-reuse", Severity.ERROR, needs=("target",))
def hybrid_prefix_reuse(facts: HostFacts) -> list[Finding]:
    """A hybrid-attention target with DFLASH and prefix reuse on a release that refuses it or
    serves it wrong.

    **What it finds.** The target has layers that keep a recurrent state (linear attention,
    Mamba: Qwen3-Next, Qwen3.5/3.6, Kimi-Linear, Nemotron-H; its `layer_types` or its
    `model_type`, as SGLang's `mambaish_config` decides: `configs/hybrid_arch.py`
    0.5.16:113, 0.5.23:145-155), the server runs DFLASH, and the radix cache is on (no
    `--disable-radix-cache`). How SGLang caches the recurrent state for prefix reuse is the
    Mamba strategy: `--mamba-scheduler-strategy` until 0.5.13, `--mamba-radix-cache-strategy`
    from 0.5.14 (the old spelling an alias until 0.5.19). Per release, with the strategy the
    running server reports, else the launch flag, else `auto`:

    - 0.5.11-0.5.13: `auto` becomes `no_buffer` (`srt/server_args.py` 0.5.11:1079-1082,
      0.5.12:1184-1187, 0.5.13:1225-1228), and speculative decoding with the radix cache
      and `no_buffer` is refused at start (`srt/server_args.py` 0.5.11:2452-2456,
      0.5.12:2567-2571, 0.5.13:2753-2757). `extra_buffer` starts but is served wrong (below).
    - 0.5.14-0.5.17: `auto` becomes `extra_buffer` when the overlap scheduler or pages over
      one token are on (`srt/server_args.py` 0.5.14:4385-4393), which DFLASH keeps on.
      `extra_buffer_lazy` is refused with speculation (`srt/server_args.py` 0.5.14:4371-4374,
      0.5.15:4269-4272, 0.5.16:4840-4843; for DFLASH by name: `srt/server_args.py`
      0.5.17:5599-5605).
      `extra_buffer` starts, but DFLASH's verify never calls the hook that rebuilds the
      Mamba track indices before TARGET_VERIFY (EAGLE's and NGRAM's do:
      `speculative/spec_utils.py` 0.5.14:561-572, 0.5.17:752-763, "spec batches skip the
      refresh ... so they must be rebuilt right before verify"; the release says so of
      DFLASH itself: `srt/server_args.py` 0.5.17:5600-5601, `dflash bypasses that hook`),
      so the state checkpoints the radix cache keeps for later requests are taken at stale
      or missing indices. 0.5.11-0.5.13 `extra_buffer` is the same: only EAGLE's verify sets
      the indices (`speculative/eagle_info.py` 0.5.11:155-165).
    - 0.5.14-0.5.23: a `no_buffer` the launch names (not one `auto` resolved, which turns
      the overlap scheduler off itself) is refused at start while the overlap scheduler
      is on or `--page-size` is over 1 (`srt/server_args.py` 0.5.14:4355-4362,
      0.5.17:5575-5582, `arg_groups/mamba_hook.py` 0.5.23:156-163).
    - 0.5.18-0.5.23: DFLASH's verify runs `prepare_mamba_track_for_verify`
      (`speculative/dflash_info.py` 0.5.18:91-96, 0.5.23:99-104; `arg_groups/mamba_hook.py`
      0.5.23:126-128 notes that dflash gained the hook): served as designed, no finding.

    **Why it hurts.** A refused start leaves the host without a server after a relaunch. A
    stale checkpoint is worse: the server answers, but a request that hits a cached prefix
    continues from the wrong recurrent state, so the same greedy prompt sent twice can give
    different tokens the second time (`check --bench` sends it twice: DFD173).

    **Example.** `--model-path Qwen/Qwen3.5-35B-A3B --speculative-algorithm DFLASH` on 0.5.11
    with no Mamba flag: `Speculative decoding for Qwen3_5MoeForConditionalGeneration is not
    compatible with radix cache when using --mamba-scheduler-strategy no_buffer.`. The
    z-lab README's own launch (`--mamba-scheduler-strategy extra_buffer`) on 0.5.17 starts
    and may answer a repeated prompt differently.

    **How to fix.** Upgrade SGLang to 0.5.18 or newer; until then `--disable-radix-cache`
    (no prefix reuse, every request prefills in full).

    **Fix safety.** Disabling the radix cache costs prefill time on repeated prefixes (chat
    histories, shared system prompts), never correctness. The upgrade is a release change:
    bench it before production.

    **Versions.** 0.5.11-0.5.17 fire, 0.5.18-0.5.23 are clean (`speculative/dflash_info.py`
    0.5.18:91-96). Public reports name the flag `--mamba-radix-cache-strategy`; in
    0.5.11-0.5.13 only `--mamba-scheduler-strategy` exists (`srt/server_args.py`
    0.5.11:5741-5747): the wheels decide.
    """
    require_dflash(facts)
    target = facts.target.value
    assert target is not None
    if target.hybrid is None:
        return []
    release = startup_release(facts) or facts.sglang_version.value
    version = parse_version(release) if release else None
    if version is None:
        raise Skip("SGLang version unknown: which strategy flag and behaviour apply is per release")
    launch = facts.launch.value
    runtime = facts.runtime.value
    off = runtime.arg("disable_radix_cache") if runtime is not None else None
    if off is True or (launch is not None and has_flag(launch, "--disable-radix-cache")):
        return []
    strategy, said = _written(facts)
    resolved = _resolved(strategy, version, launch)
    found = verdict(resolved, version)
    fixes = _fixes()
    if found is None and strategy == "no_buffer" and runtime is None:
        found = no_buffer_refusal(version, launch)
        fixes = _no_buffer_fixes(version)
    if found is None:
        return []
    how = said if resolved == strategy else f"{said}, which SGLang {release} resolves to {resolved}"
    evidence = [
        Evidence(kind="config", text=target.hybrid, file=target.path, key="layer_types"),
        Evidence(kind="derived", text=how),
        Evidence(kind="version", text=f"SGLang {release}", file=facts.sglang_version.source),
    ]
    return [
        hybrid_prefix_reuse.finding(
            title=(
                "a hybrid target with DFLASH and the radix cache is refused at start"
                if found.refused
                else "a hybrid target's prefix cache may resume from stale Mamba states"
            ),
            message=(
                f"The target is hybrid ({target.hybrid}); with DFLASH, the radix cache and "
                f"{strategy_flag(version)} {resolved} on SGLang {release}, {found.text}."
            ),
            severity=Severity.ERROR if found.refused else Severity.WARNING,
            evidence=evidence,
            fixes=fixes,
        )
    ]
