"""DFD173: the same greedy prompt sent twice gave different tokens the second time, when the
prefix cache served part of it (the bench's prefix-reuse probe, bench/prefix_probe.py)."""

from __future__ import annotations

from dflash_doctor.checks.base import Evidence, Finding, Fix, Severity, Skip, check
from dflash_doctor.checks.views import require_dflash
from dflash_doctor.facts.models import HostFacts
from dflash_doctor.sglang_versions import Version, parse_version

# DFLASH's verify rebuilds the Mamba track indices from 0.5.18 (speculative/dflash_info.py
# 0.5.18:91-96): an upgrade helps a hybrid target only below it.
TRACK_HOOK_SINCE: Version = (0, 5, 18)


@check("DFD173", "prefix-reuse-mismatch", Severity.ERROR)
def prefix_reuse_mismatch(facts: HostFacts) -> list[Finding]:
    """The same greedy prompt gave different tokens when its prefix came from the cache.

    **What it finds.** With `check --bench`, after the cells, the prefix cache is flushed
    and one prompt of about 1,500 tokens (longer than the default Mamba track interval of
    256) is sent twice to `/generate` with temperature 0. The second request reuses the
    first's prompt from the radix cache (its `meta_info.cached_tokens`,
    `managers/tokenizer_manager.py` 0.5.11:1691, 0.5.23:2557); both answers' `output_ids`
    (`managers/tokenizer_manager.py` 0.5.11:1745, 0.5.23:2653) are compared token by
    token. The finding names the first output token that differs and the tokens around it.

    **Why it hurts.** Greedy decoding of the same prompt on the same server should give the
    same tokens; a prefix-cache hit that changes them means the cached state is not the
    state the prompt produces. On hybrid targets (linear-attention / Mamba layers) served
    with DFLASH this is the recurrent-state checkpoint taken at stale indices (DFD172
    names the releases); every chat turn that reuses its history is then answered from a
    wrong state, with nothing in the log.

    **Example.** Qwen3.5-35B-A3B with `--mamba-radix-cache-strategy extra_buffer` on 0.5.17:
    the first answer and the cached second one agree for some tokens, then part.

    **How to fix.** Upgrade SGLang to a release that serves the combination (0.5.18 or
    newer for DFLASH on hybrid targets, DFD172), or `--disable-radix-cache`; then bench
    again. A mismatch without prefix reuse (`cached_tokens` 0) is not this fault and is
    not reported; on a target that is not hybrid the cause is not one the catalog knows:
    re-run the bench, and report it to SGLang with the two answers.

    **Fix safety.** Disabling the radix cache costs prefill time on repeated prefixes, never
    correctness.

    **Versions.** Every release 0.5.11-0.5.23: `/generate` answers `output_ids` and
    `cached_tokens` in all (`managers/tokenizer_manager.py` 0.5.11:1691, 0.5.23:2557);
    which releases mishandle hybrid prefix reuse with DFLASH is DFD172's table.
    """
    result = facts.bench.value
    if result is None:
        raise Skip(
            f"needs a bench: {facts.bench.error}" if facts.bench.error else "needs check --bench"
        )
    require_dflash(facts)
    probe = result.prefix_probe
    if probe is None:
        raise Skip("the bench did not send the repeated prompt")
    if probe.error is not None:
        raise Skip(f"the repeated prompt was not measured: {probe.error}")
    if probe.first_mismatch is None or not probe.cached_tokens:
        return []
    hybrid = facts.target.value.hybrid if facts.target.value is not None else None
    why = (
        f" The target is hybrid ({hybrid}): the cached recurrent state is the likely cause "
        "(DFD172)."
        if hybrid
        else ""
    )
    evidence = [
        Evidence(
            kind="derived",
            text=(
                f"second request: {probe.cached_tokens} of {probe.prompt_tokens} prompt tokens "
                "from the prefix cache"
            ),
        ),
        Evidence(
            kind="derived",
            text=(
                f"output tokens from {max(0, probe.first_mismatch - 4)}: first "
                f"{probe.first_tokens}, second {probe.second_tokens}"
            ),
        ),
    ]
    return [
        prefix_reuse_mismatch.finding(
            title="a prefix-cached request does not repeat the same greedy answer",
            message=(
                f"The same greedy prompt sent twice gave different tokens from output token "
                f"{probe.first_mismatch} on, when the second reused {probe.cached_tokens} "
                f"prompt tokens from the radix cache.{why}"
            ),
            evidence=evidence,
            impact={"First differing output token": probe.first_mismatch},
            fixes=_fixes(facts, hybrid),
        )
    ]


def _fixes(facts: HostFacts, hybrid: str | None) -> list[Fix]:
    """No radix cache; and for a hybrid target below 0.5.18 (or of unknown release), the
    upgrade, never on a release that already has it."""
    off = Fix(action="set_flag", flag="--disable-radix-cache")
    version = parse_version(facts.sglang_version.value or "")
    if hybrid and (version is None or version < TRACK_HOOK_SINCE):
        return [Fix(action="upgrade_sglang", value="0.5.18"), off]
    return [off]
