"""vLLM's `num_speculative_tokens` against the DFlash drafter's block."""

from __future__ import annotations

from dflash_doctor.checks.base import Finding, Fix, Severity, Skip, check
from dflash_doctor.checks.views import config_evidence, drafter
from dflash_doctor.checks.vllm_views import vllm_dflash, vllm_flag_evidence
from dflash_doctor.facts.models import HostFacts


@check(
    "DFD301",
    "vllm-draft-tokens-vs-block-size",
    Severity.WARNING,
    needs=("vllm_launch", "drafter"),
    engine="vllm",
)
def vllm_draft_tokens_vs_block_size(facts: HostFacts) -> list[Finding]:
    """vLLM drafts a different block than the DFlash drafter was trained on.

    **What it finds.** `num_speculative_tokens` in `--speculative-config` (or
    `--spec-tokens`) plus one differs from the drafter's `block_size`
    (`dflash_config.block_size`, else the top-level `block_size`).

    **Why it hurts.** vLLM never reads a DFlash drafter's `block_size`: each draft pass
    runs `1 + num_speculative_tokens` queries per request, the anchor (bonus) token and
    one per proposal. A drafter trained on blocks of `block_size` (anchor included) is
    served as trained with `num_speculative_tokens = block_size - 1`. More proposals ask
    it for positions it never learned, and the target verifies tokens that are almost
    never accepted; fewer leave accepted length unused. `num_speculative_tokens =
    block_size` is the usual slip: SGLang's block size counts the anchor, vLLM's tokens
    do not.

    **Example.** A `block_size: 16` drafter served with `{"method": "dflash",
    "num_speculative_tokens": 16}`: vLLM drafts a 17-token block.

    **How to fix.** Set `num_speculative_tokens` to the drafter's `block_size - 1` in
    `--speculative-config` and relaunch. `dflash-doctor fix` edits the value where vLLM
    reads it: `--spec-tokens`, a dotted `--speculative-config.num_speculative_tokens`, or
    the JSON inside the `--speculative-config` word, in that word's own quoting.

    **Fix safety.** Safe: it is the block the drafter was trained on. A smaller value is
    a deliberate trade (less draft work on a busy server) and may be kept: that case is
    reported as info.

    **Versions.** Read in vLLM 0.27.1-0.34.0, all alike: the query block is
    `1 + num_speculative_tokens` on the V1 runner (vllm/v1/spec_decode/dflash.py
    0.27.1:119, 0.28.0:134, 0.31.0:126, 0.33.0:126) and the V2 runner
    (vllm/v1/worker/gpu/spec_decode/dflash/speculator.py 0.27.1:46, 0.28.0:46,
    0.31.0:62, 0.33.0:65; `num_speculative_steps` is `num_speculative_tokens`,
    vllm/v1/worker/gpu/spec_decode/speculator.py 0.28.0:80), and `num_lookahead_tokens` in 0.34.0
    (vllm/v1/worker/gpu/spec_decode/dflash/config.py 0.34.0:53-56). Only DSpark drafts
    have their `block_size` compared (vllm/config/speculative.py 0.34.0:228-244).
    """
    launch = vllm_dflash(facts)
    tokens = launch.speculative.num_speculative_tokens if launch.speculative else None
    if tokens is None:
        raise Skip("num_speculative_tokens is not given (vLLM refuses such a launch)")
    cfg = drafter(facts)
    if cfg.block_size is None:
        raise Skip("the drafter declares no block_size")
    want = cfg.block_size - 1
    if tokens == want or want < 1:
        return []
    severity = Severity.WARNING
    if tokens > want:
        why = (
            f"vLLM drafts {tokens + 1}-token blocks (num_speculative_tokens={tokens} plus the "
            f"anchor) from a drafter trained on {cfg.block_size}: the last "
            f"{_positions(tokens - want)} never trained"
        )
    else:
        why = (
            f"vLLM drafts {tokens + 1}-token blocks (num_speculative_tokens={tokens} plus the "
            f"anchor); the drafter was trained on {cfg.block_size}: "
            f"{_positions(want - tokens)} trained but never drafted"
        )
        severity = Severity.INFO
    return [
        vllm_draft_tokens_vs_block_size.finding(
            title="Draft block differs from the drafter's block_size",
            message=why,
            severity=severity,
            evidence=[
                vllm_flag_evidence(
                    launch, "--speculative-config", f"num_speculative_tokens={tokens}"
                ),
                config_evidence(
                    cfg, cfg.block_size_key or "block_size", f"block_size={cfg.block_size}"
                ),
            ],
            fixes=[_fix(want, severity)],
        )
    ]


def _fix(want: int, severity: Severity) -> Fix:
    """The edit `fix` makes (more proposals than trained); a smaller value is left to
    its owner (a deliberate trade), as a manual step."""
    note = f'set "num_speculative_tokens": {want} in --speculative-config'
    if severity is Severity.INFO:
        return Fix(action="manual", note=note)
    key = "--speculative-config.num_speculative_tokens"
    return Fix(action="set_key", flag=key, value=str(want))


def _positions(n: int) -> str:
    return "1 position was" if n == 1 else f"{n} positions were"
