"""DFD304: the live vLLM server's own counters show DFlash acceptance collapsed."""

from __future__ import annotations

from dflash_doctor.checks.base import Evidence, Finding, Fix, Severity, Skip, Unjudged, check
from dflash_doctor.checks.vllm_runner import runner_value
from dflash_doctor.checks.vllm_views import vllm_dflash
from dflash_doctor.facts.bench_stats import COLLAPSE_ACCEPT_LENGTH
from dflash_doctor.facts.models import HostFacts
from dflash_doctor.facts.vllm_models import RUNNER_ENV, VllmLaunch, VllmRuntime, VllmSpecDecode

# Fewer drafts than this since the server started are too few to call a collapse.
MIN_DRAFTS = 100
# A position accepting at most this share of drafts accepts nothing.
NONE_RATE = 0.01


def _counters(facts: HostFacts) -> tuple[VllmRuntime, VllmSpecDecode, str]:
    """The counters to judge and what they cover in words: the window between the finder's
    two scrapes when it saw enough drafts, else those since the server started (with a
    note why); Skip or Unjudged naming what is missing."""
    fact = facts.vllm_runtime
    runtime = fact.value
    if runtime is None:
        if fact.error:
            raise Unjudged(f"the live vLLM server could not be asked: {fact.error}")
        raise Skip("no running vLLM server was asked (a launch file, a recorded or offline host)")
    spec = runtime.spec_decode
    if spec is None:
        if runtime.metrics_error:
            raise Unjudged(f"vLLM /metrics unreadable: {runtime.metrics_error}")
        raise Skip("the vLLM server's /metrics has no spec-decode counters")
    window, seconds = runtime.window, runtime.window_s or 0.0
    if window is not None and window.drafts >= MIN_DRAFTS:
        return runtime, window, f"in the last {seconds:.1f} s"
    if window is not None:
        note = f"only {window.drafts} drafts in the last {seconds:.1f} s"
    else:
        note = f"no window ({runtime.window_error or 'one scrape only'})"
    if spec.drafts < MIN_DRAFTS:
        raise Skip(
            f"only {spec.drafts} drafts since the server started and {note} "
            f"(judged from {MIN_DRAFTS})"
        )
    return runtime, spec, f"since the server started ({note})"


def collapse_causes(facts: HostFacts, launch: VllmLaunch) -> list[str]:
    """The likely causes, those the launch shows first; each names the check that says more."""
    shown = []
    value = launch.environ.get(RUNNER_ENV)
    if value is not None and runner_value(value) is not True:
        shown.append(f"{RUNNER_ENV}={value} forces the V1 runner (DFD300)")
    tokens = launch.speculative.num_speculative_tokens if launch.speculative else None
    cfg = facts.drafter.value
    if tokens is not None and cfg is not None and cfg.block_size not in (None, tokens + 1):
        shown.append(
            f"num_speculative_tokens={tokens} against the drafter's block_size="
            f"{cfg.block_size} (DFD301)"
        )
    known = [
        "the V1 runner (DFD300)",
        "num_speculative_tokens against the drafter's block_size (DFD301)",
        "the sliding-window layers served without their window (DFD302)",
        "a drafter trained for another target model",
    ]
    return shown or known


@check("DFD304", "vllm-acceptance-collapsed", Severity.ERROR, needs=("vllm_launch",), engine="vllm")
def vllm_acceptance_collapsed(facts: HostFacts) -> list[Finding]:
    """The live vLLM server accepts (almost) no DFlash draft token.

    **What it finds.** The running vLLM server's own Prometheus counters on `/metrics`,
    scraped twice a few seconds apart: over at least 100 drafts in that window (else,
    with a note, since the server started), the mean acceptance length
    (`1 + accepted / drafts`, the bonus token counted, as vLLM's log line says it) is at
    most 1.05, and the per-position acceptance rates
    (`vllm:spec_decode_num_accepted_tokens_per_pos_total` over drafts) are near 0 at every
    position past the first.

    **Why it hurts.** Each draft costs a drafter pass and a verification of
    `num_speculative_tokens` tokens the target then throws away: the server is slower
    than without speculation, and nothing in vLLM's output says so but the
    `SpecDecoding metrics` log line. On vLLM the known causes are a DFlash drafter served
    by the V1 runner (DFD300), a draft block longer than the drafter's `block_size`
    (DFD301), sliding layers without their window (DFD302), or a drafter trained for
    another target.

    **Example.** `vllm:spec_decode_num_drafts_total 200.0` and
    `vllm:spec_decode_num_accepted_tokens_total 0.0`: mean acceptance length 1.00,
    per-position rates 0.000 at every position.

    **How to fix.** Run `dflash-doctor check` with DFD300-DFD302 on this host and fix what
    they find; then relaunch and read `/metrics` again after some traffic.

    **Fix safety.** No change is made by this check; the fixes are those of the checks it
    names.

    **Versions.** vLLM 0.27.1-0.34.0 export the same counters under the same names, labels
    `model_name` and `engine` (vllm/v1/metrics/loggers.py 0.34.0:499;
    vllm/v1/spec_decode/metrics.py 0.27.1:229-231, 0.34.0:229-231), plus `position` on the
    per-position one (vllm/v1/spec_decode/metrics.py 0.27.1:255-256, 0.34.0:255-256);
    the mean acceptance length and per-position recipes are vLLM's own
    (vllm/v1/spec_decode/metrics.py 0.34.0:180-195). The counters are summed over engines;
    the window is their increase between the two scrapes (as `vllm bench serve` takes
    them: vllm/benchmarks/serve.py 0.34.0:1131-1171), so a server that collapsed after a
    good start is judged on its recent traffic; the window covers every request the server
    served in it, not only one client's.
    """
    launch = vllm_dflash(facts)
    runtime, spec, scope = _counters(facts)
    mean = spec.mean_acceptance_length or 1.0
    rates = spec.per_position_rates
    if mean > COLLAPSE_ACCEPT_LENGTH or any(r > NONE_RATE for r in rates[1:]):
        return []
    shown = ", ".join(f"{r:.3f}" for r in rates[:16]) + (", ..." if len(rates) > 16 else "")
    first = f"{rates[0]:.1%} of drafts at position 0, none after" if rates else "no positions"
    return [
        vllm_acceptance_collapsed.finding(
            title="vLLM accepts almost no draft token",
            message=(
                f"mean acceptance length {mean:.2f} over {spec.drafts} drafts {scope} "
                f"({first}); "
                f"likely causes: {'; '.join(collapse_causes(facts, launch))}"
            ),
            evidence=[
                Evidence(
                    kind="derived",
                    text=(
                        f"{spec.accepted} accepted of {spec.draft_tokens} draft tokens in "
                        f"{spec.drafts} drafts; per-position acceptance rate: {shown}"
                    ),
                    file=f"{runtime.url}/metrics",
                )
            ],
            fixes=[Fix(action="manual", note="run DFD300-DFD302 on this host and fix them")],
        )
    ]
