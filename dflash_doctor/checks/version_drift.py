"""DFD112: the live server runs another SGLang release than the one installed."""

from __future__ import annotations

from dflash_doctor.checks.base import Evidence, Finding, Fix, Severity, Skip, check
from dflash_doctor.checks.views import require_dflash, running_drift
from dflash_doctor.facts.models import HostFacts
from dflash_doctor.sglang_versions import (
    LAYER_TYPES_SINCE,
    facts_for,
    format_version,
    parse_version,
)


@check("DFD112", "running-sglang-is-not-installed-sglang", Severity.WARNING)
def running_version_drift(facts: HostFacts) -> list[Finding]:
    """The live server runs another SGLang release than the one installed beside it.

    **What it finds.** `/server_info` reports one version while the `sglang-*.dist-info`
    beside the server's Python (or that Python's own answer) says another: SGLang was
    upgraded or downgraded under a running server that was not restarted.

    **Why it hurts.** What runs now and what the next restart runs differ. The window
    verdicts (DFD102, DFD103, DFD130) follow the running release, as they must; the next
    restart brings the installed release's behaviour, its flag spellings and its start-up
    refusals (DFD104, DFD110, DFD111, DFD140 judge the launch with the installed parser).
    Across 0.5.14 that flips whether draft layers keep their trained window.

    **Example.** `/server_info` says 0.5.13, the dist-info says 0.5.14: the sliding layers
    attend over the whole context now (DFD103), and will keep their window after a restart.

    **How to fix.** Restart the server in a maintenance window to run the installed
    release (after the launch-file findings for that release are fixed), or reinstall the
    release that runs.

    **Fix safety.** Manual: a restart drops in-flight requests and runs new code.

    **Versions.** Every release 0.5.11-0.5.23 answers `version` in `/server_info`
    (`entrypoints/http_server.py`); layer_types honoured from 0.5.14 (`models/dflash.py`
    0.5.14:44-66).
    """
    require_dflash(facts)
    drift = running_drift(facts)
    if drift is None:
        if facts.runtime.value is None:
            raise Skip("no live server was asked (offline or recorded host, or no server)")
        return []
    running, installed = drift
    installed_parsed = parse_version(installed)
    assert installed_parsed is not None
    now, then = facts_for(running), facts_for(installed_parsed)
    since = format_version(LAYER_TYPES_SINCE)
    if now.drafter_honours_layer_types == then.drafter_honours_layer_types:
        verb = "honour" if now.drafter_honours_layer_types else "ignore"
        change = f"both {verb} the drafter's layer_types"
    else:
        keep = "keep" if then.drafter_honours_layer_types else "lose"
        change = (
            f"a restart makes sliding draft layers {keep} their trained window "
            f"(layer_types honoured from {since})"
        )
    return [
        running_version_drift.finding(
            title=f"The server runs SGLang {now.label}; {installed} is installed",
            message=(
                f"The live server reports SGLang {now.label} but SGLang {installed} is "
                f"installed: the window verdicts follow the running {now.label}; {change}. "
                f"The launch file is judged for a restart with {installed}'s parser."
            ),
            evidence=[
                Evidence(
                    kind="version",
                    text=f"running SGLang {facts.sglang_version.value}",
                    file=facts.sglang_version.source,
                ),
                Evidence(
                    kind="version",
                    text=f"installed SGLang {installed}",
                    file=facts.installed_version.source,
                ),
            ],
            fixes=[
                Fix(
                    action="manual",
                    note=f"restart the server to run the installed SGLang {installed}, "
                    f"or reinstall {now.label}",
                )
            ],
        )
    ]
