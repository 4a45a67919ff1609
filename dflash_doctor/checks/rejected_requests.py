"""DFD150: requests the DFLASH server rejects while it looks healthy."""

from __future__ import annotations

from dflash_doctor.checks.base import Evidence, Finding, Fix, Severity, check
from dflash_doctor.checks.views import log_evidence, require_dflash
from dflash_doctor.facts.log_patterns import LogPattern, of_kind, releases
from dflash_doctor.facts.models import HostFacts, LogEvent


@check("DFD150", "dflash-rejected-requests", Severity.WARNING, needs=("log",))
def rejected_requests(facts: HostFacts) -> list[Finding]:
    """Requests that DFLASH rejects with HTTP 400 while the server looks healthy.

    **What it finds.** In the log of the latest start, the abort lines of requests the
    DFLASH scheduler refuses (`Req.set_finish_with_abort` logs `<text>, self.rid=...`):
    `DFLASH speculative decoding does not support return_logprob yet.` (0.5.11-0.5.17),
    `... grammar-constrained decoding yet.` (json_schema, regex, ebnf, structural_tag;
    0.5.11-0.5.16), `... return_hidden_states yet.` (0.5.14+, only with overlap
    scheduling). Each is counted with its first and last line.

    **Why it hurts.** `/health` is green and the server serves other traffic, but every
    such request fails: clients that ask for logprobs or structured output see 400s that
    no server-side dashboard shows as an outage.

    **Example.** `[... TP0] DFLASH speculative decoding does not support return_logprob
    yet., self.rid='5f2...'` 1,204 times between lines 3,310 and 88,412 on SGLang 0.5.16.

    **How to fix.** Upgrade to the release that accepts the request kind (0.5.18 for
    logprobs, 0.5.17 for grammar-constrained decoding: the first releases whose
    `validate_dflash_request` no longer refuses them); for hidden states, launch with
    `--disable-overlap-schedule` or drop `return_hidden_states`. Or route those requests
    to a server without speculative decoding.

    **Fix safety.** An upgrade is a manual change (test the new release first); the
    finding never edits the launch.

    **Versions.** Texts and ranges come from data/log_patterns.json, generated from the
    wheels: srt/managers/scheduler.py 0.5.11:306, srt/speculative/dflash_utils.py 0.5.14:809,
    0.5.23:1110; logged by `set_finish_with_abort` (srt/managers/schedule_batch.py
    0.5.11:1318, 0.5.23:2228). Skipped when no log was read.
    """
    require_dflash(facts)
    log = facts.log.value
    assert log is not None
    findings = []
    for pattern in of_kind("reject"):
        event = log.events.get(pattern.id)
        if event is not None:
            findings.append(_finding(facts, pattern, event))
    return findings


def _finding(facts: HostFacts, pattern: LogPattern, event: LogEvent) -> Finding:
    log = facts.log.value
    assert log is not None
    after = pattern.first_release_after()
    version = facts.sglang_version.value
    if after is not None:
        accepted = f"SGLang {after} and later accept them (refused in {pattern.releases()})."
        fix = Fix(action="upgrade_sglang", value=after, note=pattern.workaround)
    else:
        accepted = (
            f"No release up to {releases()[-1]} accepts them with DFLASH; {pattern.workaround}."
        )
        fix = Fix(action="manual", note=pattern.workaround)
    span = (
        f"line {event.first.line}"
        if event.count == 1
        else f"lines {event.first.line}-{event.last.line}"
    )
    evidence = [log_evidence(log, event.first.line, event.first.text)]
    if event.count > 1:
        evidence.append(log_evidence(log, event.last.line, event.last.text))
    if version:
        evidence.append(Evidence(kind="version", text=f"SGLang {version}"))
    return rejected_requests.finding(
        title=f"DFLASH rejected {event.count} request(s): {pattern.meaning} ({span})",
        message=(
            f"The server answered {event.count} request(s) with HTTP 400 ({pattern.meaning}) "
            f"while it looked healthy: `{pattern.formats[-1].format}` ({span}). {accepted}"
        ),
        evidence=evidence,
        impact={
            "rejected_requests": event.count,
            "first_line": event.first.line,
            "last_line": event.last.line,
        },
        fixes=[fix],
    )
