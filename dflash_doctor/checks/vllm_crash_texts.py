"""DFD308: vLLM's own DFlash crash texts in the server log."""

from __future__ import annotations

from dflash_doctor.checks.base import Evidence, Finding, Fix, Severity, check
from dflash_doctor.checks.views import log_evidence
from dflash_doctor.facts.log_patterns import LogPattern
from dflash_doctor.facts.models import HostFacts, LogEvent
from dflash_doctor.facts.vllm_rules import text_cite, vllm_crash_texts

# The text around a list of features (`Model Runner V1 does not support: {...}`): where a
# feature's own text matched the same line, that one says more.
GENERIC = ("v1_refuses",)


@check("DFD308", "vllm-dflash-crash-text", Severity.ERROR, needs=("log",), engine="vllm")
def vllm_dflash_crash_text(facts: HostFacts) -> list[Finding]:
    """The vLLM server log holds vLLM's own error text of a DFlash failure.

    **What it finds.** A line of the server log matching a crash text vLLM raises on a
    DFlash path, kept as data (kind `crash` in data/vllm_rules.json, one TEXTS line each
    in scripts/gen_vllm_rules.py with what it means and the fix, found in the wheels of
    every release that writes it): the V1 runner refusing a feature only V2 has
    (`Model Runner V1 does not support: ...`, 0.29.0-0.33.0), DFlash 2 or candidate-head
    drafts on V1, a mixed sliding/full drafter on V1 (0.27.1-0.33.0), a sliding drafter
    without a window, aux hidden features of another target, a mask embedding of another
    mask token, sliding draft layers under decode context parallelism (0.34.0), and the
    removed V1 runner (0.34.0).

    **Why it hurts.** A vLLM server that dies on a DFlash path restarts into the same
    error; the text says which setting to change instead of reading tracebacks.

    **Example.** `ValueError: Model Runner V1 does not support: dflash2 drafts` in
    `/var/log/vllm/server.log`: `VLLM_USE_V2_MODEL_RUNNER=0` keeps a DFlash 2 drafter off
    the V2 runner.

    **How to fix.** The finding carries each text's fix.

    **Fix safety.** The fixes are manual: they change the launch, its variables or the
    model pairing.

    **Versions.** Each text's releases and file:line per release are in the data file
    (e.g. window_missing, 0.27.1-0.34.0: vllm/model_executor/models/qwen3_dflash.py
    0.34.0:182-185). A vLLM log has no start marker dflash-doctor reads, so a text from
    an earlier start is reported too. Skipped when no log was read.
    """
    log = facts.log.value
    assert log is not None
    found = {p.id: (p, log.crashes[p.id]) for p in vllm_crash_texts() if p.id in log.crashes}
    specific = {e.last.line for pid, (_, e) in found.items() if pid not in GENERIC}
    return [
        _finding(facts, p, event)
        for pid, (p, event) in found.items()
        if pid not in GENERIC or event.last.line not in specific
    ]


def _finding(facts: HostFacts, p: LogPattern, event: LogEvent) -> Finding:
    log = facts.log.value
    assert log is not None
    evidence = [log_evidence(log, event.last.line, event.last.text)]
    version = facts.vllm_version.value
    note = ""
    if version:
        evidence.append(Evidence(kind="version", text=f"vLLM {version}"))
        if p.in_release(version) is False:
            note = f" (vLLM {version} does not write this text: the line predates it)"
    return vllm_dflash_crash_text.finding(
        title=f"vLLM DFlash failure in the log: {p.meaning}",
        message=(
            f"{event.count} line(s) match `{p.needle}` (last at line {event.last.line}){note}: "
            f"{p.meaning} Text of vLLM {p.releases()}, {text_cite(p)}."
        ),
        evidence=evidence,
        impact={"lines": event.count, "last_line": event.last.line},
        fixes=[Fix(action="manual", note=p.workaround)],
    )
