"""DFD152: known DFLASH crash signatures in the server log."""

from __future__ import annotations

from dflash_doctor.checks.base import Evidence, Finding, Fix, Severity, check
from dflash_doctor.checks.views import crashed_in_latest_start, log_evidence
from dflash_doctor.facts.log_patterns import LogPattern, of_kind
from dflash_doctor.facts.models import HostFacts, LogEvent


@check("DFD152", "dflash-crash-signature", Severity.ERROR, needs=("log",))
def crash_signatures(facts: HostFacts) -> list[Finding]:
    """The log holds the error of a known DFLASH crash or refused start.

    **What it finds.** Any line of the log matching a crash signature: the texts SGLang
    raises on DFLASH code paths, kept as data (kind `crash` in data/log_patterns.json,
    one SPEC line each in scripts/gen_log_patterns.py with what it means and the
    workaround, verified in the wheels of every release). Seeded with: pipeline
    parallelism, DP attention, no drafter path, unsupported device, mask token outside
    the target vocab, mask embedding trained for another id, target without DFlash hidden
    capture (`does not implement set_dflash_layers_to_capture` up to 0.5.15.post1,
    `implements neither set_dspark_layers_to_capture nor set_dflash_layers_to_capture`
    from 0.5.16), verify without hidden states, quantized lm_head at tp>1 (0.5.18+), and
    `DFLASH draft OOM` (0.5.11-0.5.13 only).

    **Why it hurts.** A server that crashes or refuses to start on a DFLASH path restarts
    into the same crash; the signature says which setting to change instead of reading
    tracebacks.

    **Example.** `ValueError: DFLASH mask_token_id is outside the target vocab size.
    mask_token_id=151669, vocab_size=151669.` at line 2,114: the drafter is not the one
    trained for this target.

    **How to fix.** The finding carries the signature's workaround. It is an error when
    the crash follows the latest `server_args=` dump (the latest start crashed), a warning
    when a later start came up after it.

    **Fix safety.** Workarounds are manual: they change the model pairing or topology.

    **Versions.** Each signature's version range and file:line per release are in the
    data file (e.g. crash_draft_oom, 0.5.11-0.5.13: srt/speculative/dflash_worker.py
    0.5.11:622).
    Adding a signature: one SPEC line, rerun the generator, one test. Skipped when no log
    was read.
    """
    log = facts.log.value
    assert log is not None
    findings = []
    for p in of_kind("crash"):
        event = log.crashes.get(p.id)
        if event is not None:
            latest = crashed_in_latest_start(log, p.id)
            findings.append(_finding(facts, p, event, latest=latest))
    return findings


def _finding(facts: HostFacts, p: LogPattern, event: LogEvent, *, latest: bool) -> Finding:
    log = facts.log.value
    assert log is not None
    where = "in the latest start" if latest else "before the latest start"
    version = facts.sglang_version.value
    evidence = [log_evidence(log, event.last.line, event.last.text)]
    note = ""
    if version:
        evidence.append(Evidence(kind="version", text=f"SGLang {version}"))
        if p.in_release(version) is False:
            note = f" (SGLang {version} does not write this text: the line predates it)"
    return crash_signatures.finding(
        severity=Severity.ERROR if latest else Severity.WARNING,
        title=f"Known DFLASH crash {where}: {p.meaning}",
        message=(
            f"{event.count} line(s) match `{p.needle}` (last at line {event.last.line}, "
            f"{where}){note}: {p.meaning} Text of SGLang {p.releases()}, "
            f"{p.formats[-1].cite()}."
        ),
        evidence=evidence,
        impact={"lines": event.count, "last_line": event.last.line},
        fixes=[Fix(action="manual", note=p.workaround)],
    )
