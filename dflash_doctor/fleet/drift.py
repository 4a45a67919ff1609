"""Fleet drift: per setting, the value most hosts have and the hosts that differ from it.

The settings compared are data (SETTINGS): each names the facts it is read from, first
known first. A host whose facts could not be read for a setting is *unknown* there: shown,
never counted toward the majority and never reported as differing (its report already says
why the fact is missing). A fact that was read without the setting is the value
"(not set)": a window flag missing on one host of a fleet is drift. The majority is the
value more hosts have than any other; where two values tie, no value is the fleet's and
every host of the setting is reported (a fleet split in half has drifted as much).

DFD170 is not a per-host check (the catalog judges one host at a time; drift needs the
fleet): `report merge` computes it, `explain DFD170` documents it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field

from dflash_doctor.checks.base import Check, CheckResult, Evidence, Finding, Fix, Severity
from dflash_doctor.facts.models import HostFacts
from dflash_doctor.report import HostReport

NOT_SET = "(not set)"
DRIFT_ID = "DFD170"


@dataclass(frozen=True)
class Source:
    """One place a setting is read: a HostFacts fact, an attribute of its value ('' for the
    value itself) and the launch flag that sets it (for the evidence's line)."""

    fact: str
    attr: str = ""
    flag: str | None = None


@dataclass(frozen=True)
class Setting:
    """`default`: SGLang's own value when no flag sets it (a host without the flag and one
    that spells the default agree). `absent_unknown`: the attribute is missing only from a
    report of an older dflash-doctor, so its absence says nothing about the host."""

    key: str
    label: str
    sources: tuple[Source, ...]
    default: str | None = None
    absent_unknown: bool = False


# What a DFlash fleet should agree on. Block size: the served one (the log's DFLASH init
# line) first, then what the launch sets, then what the drafter was trained with.
SETTINGS: tuple[Setting, ...] = (
    Setting("sglang_version", "SGLang version", (Source("sglang_version"),)),
    Setting("window_flag", "draft window flag", (Source("launch", "draft_window_flag"),)),
    Setting(
        "draft_window_size",
        "draft window size",
        (Source("launch", "draft_window_size"),),
    ),
    Setting(
        "block_size",
        "DFlash block size",
        (
            Source("log", "dflash_block_size"),
            Source("launch", "dflash_block_size", "--speculative-dflash-block-size"),
            Source("launch", "num_draft_tokens", "--speculative-num-draft-tokens"),
            Source("drafter", "block_size"),
        ),
    ),
    Setting(
        "drafter_revision",
        "drafter config.json sha256",
        (Source("drafter", "config_sha256"),),
        absent_unknown=True,
    ),
    Setting(
        "attention_backend",
        "attention backend",
        (Source("launch", "attention_backend", "--attention-backend"),),
    ),
    Setting(
        "draft_attention_backend",
        "draft attention backend",
        (Source("launch", "draft_attention_backend", "--speculative-draft-attention-backend"),),
    ),
    Setting(
        "prefill_attention_backend",
        "prefill attention backend",
        (Source("launch", "prefill_attention_backend", "--prefill-attention-backend"),),
    ),
    Setting(
        "decode_attention_backend",
        "decode attention backend",
        (Source("launch", "decode_attention_backend", "--decode-attention-backend"),),
    ),
    Setting(
        "kv_cache_dtype",
        "KV cache dtype",
        (Source("launch", "kv_cache_dtype", "--kv-cache-dtype"),),
        # kv_cache_dtype = "auto" (srt/server_args.py 0.5.11:351, 0.5.13:414;
        # srt/arg_groups/fields/model.py 0.5.23:197-221)
        default="auto",
    ),
)

Kind = Literal["config", "flag", "log", "version", "derived"]
EVIDENCE_KIND: dict[str, Kind] = {
    "sglang_version": "version",
    "launch": "flag",
    "drafter": "config",
    "log": "log",
}


class Reading(BaseModel):
    value: str
    file: str | None = None
    line: int | None = None
    kind: Kind = "derived"


class SettingDrift(BaseModel):
    """One setting across the fleet (the JSON report's `drift` entries)."""

    setting: str
    label: str
    # The value more hosts have than any other; None when values tie or none is known.
    majority: str | None = None
    values: dict[str, list[str]] = Field(default_factory=dict)  # value -> hosts
    unknown: list[str] = Field(default_factory=list)  # hosts where it could not be read
    differing: list[str] = Field(default_factory=list)


def read_setting(setting: Setting, facts: HostFacts) -> Reading | None:
    """The host's value of `setting`, NOT_SET when read without it, None when unknown."""
    read_any: Reading | None = None
    for src in setting.sources:
        fact = getattr(facts, src.fact)
        if fact.value is None:
            continue
        value = getattr(fact.value, src.attr) if src.attr else fact.value
        file = getattr(fact.value, "source", None) or getattr(fact.value, "path", None)
        kind = EVIDENCE_KIND.get(src.fact, "derived")
        if src.fact == "sglang_version":
            file = None if fact.source == "declared" else fact.source
        if value is None or value == "":
            absent = setting.default or NOT_SET
            read_any = read_any or Reading(value=absent, file=file, kind=kind)
            continue
        text = str(value)
        flag = text if src.attr == "draft_window_flag" else src.flag
        line = None
        if src.fact == "launch" and flag is not None:
            line = fact.value.flag_lines.get(flag)
        elif src.fact == "log" and fact.value.dflash_init is not None:
            line = fact.value.dflash_init.line
        return Reading(value=text, file=file, line=line, kind=kind)
    return None if setting.absent_unknown else read_any


# A host's name and its reading of each setting (None: no facts, all unknown): what the
# drift view needs of a host, so a streamed merge need not keep the host's report.
HostReadings = tuple[str, dict[str, Reading | None] | None]


def host_readings(host: HostReport) -> HostReadings:
    """The host's readings of every setting in SETTINGS."""
    if host.facts is None:
        return host.host, None
    return host.host, {s.key: read_setting(s, host.facts) for s in SETTINGS}


def fleet_drift(hosts: list[HostReport]) -> tuple[list[SettingDrift], dict[str, list[Finding]]]:
    """The drift view of every setting, and the DFD170 findings per host name."""
    return drift_of([host_readings(h) for h in hosts])


def drift_of(
    fleet: list[HostReadings],
) -> tuple[list[SettingDrift], dict[str, list[Finding]]]:
    """fleet_drift over the hosts' readings."""
    table: list[SettingDrift] = []
    findings: dict[str, list[Finding]] = {}
    for setting in SETTINGS:
        row = SettingDrift(setting=setting.key, label=setting.label)
        readings: dict[str, Reading] = {}
        for name, mine in fleet:
            reading = None if mine is None else mine[setting.key]
            if reading is None:
                row.unknown.append(name)
                continue
            readings[name] = reading
            row.values.setdefault(reading.value, []).append(name)
        counts = Counter({v: len(h) for v, h in row.values.items()}).most_common()
        if len(counts) > 1:
            tied = counts[0][1] == counts[1][1]
            row.majority = None if tied else counts[0][0]
            row.differing = [h for h, r in readings.items() if r.value != row.majority]
        elif counts:
            row.majority = counts[0][0]
        for name in row.differing:
            findings.setdefault(name, []).append(_finding(row, readings[name], len(readings)))
        table.append(row)
    return table, findings


def _finding(row: SettingDrift, reading: Reading, known: int) -> Finding:
    others = ", ".join(
        f"{value} on {len(hosts)}" for value, hosts in row.values.items() if value != reading.value
    )
    mine = len(row.values[reading.value])
    if row.majority is None:
        title = f"{row.label} is split across the fleet: this host has {reading.value}"
        message = (
            f"No {row.label} is on most hosts: {reading.value} on {mine} of {known} hosts, "
            f"{others}. Hosts that should serve alike do not."
        )
        fix = "choose one value for the fleet and roll it out"
    else:
        title = f"{row.label} differs from the fleet: {reading.value} (fleet: {row.majority})"
        message = (
            f"{len(row.values[row.majority])} of {known} hosts have {row.majority}; this "
            f"host has {reading.value} (all values: {reading.value} on {mine}, {others})."
        )
        fix = f"bring {row.label} to the fleet's {row.majority}, or waive why this host differs"
    return FLEET_DRIFT.finding(
        title=title,
        message=message,
        evidence=[
            Evidence(
                kind=reading.kind,
                text=f"{row.label}: {reading.value}",
                file=reading.file,
                line=reading.line,
                key=row.setting,
            )
        ],
        impact={"Setting": row.label, "Fleet value": row.majority or "none (split)"},
        fixes=[Fix(action="manual", note=fix)],
    )


def drift_result(findings: list[Finding]) -> CheckResult:
    """A judged host's DFD170 result: failed with its drift findings, else passed."""
    return CheckResult(
        check_id=DRIFT_ID,
        name=FLEET_DRIFT.name,
        severity=Severity.WARNING,
        status="failed" if findings else "passed",
        findings=findings,
    )


def strip_drift(host: HostReport) -> HostReport:
    """The host without its DFD170 result: a merged report merged again is judged against its
    new fleet."""
    return host.model_copy(update={"results": [r for r in host.results if r.check_id != DRIFT_ID]})


def drift_results(hosts: list[HostReport]) -> tuple[list[HostReport], list[SettingDrift]]:
    """The hosts with this fleet's DFD170 result in place of their own, and the drift view."""
    hosts = [strip_drift(host) for host in hosts]
    judged = [h for h in hosts if h.facts is not None]
    if len(judged) < 2:
        return hosts, fleet_drift(hosts)[0] if judged else []
    table, findings = fleet_drift(hosts)
    drifted = [
        host
        if host.facts is None
        else host.model_copy(
            update={"results": [*host.results, drift_result(findings.get(host.host, []))]}
        )
        for host in hosts
    ]
    return drifted, table


def _fleet_drift_doc(facts: HostFacts) -> list[Finding]:
    """A host's DFlash settings differ from the rest of its fleet.

    **What it finds.** `dflash-doctor report merge` lays the per-host JSON reports of a
    fleet side by side and compares, per setting, what each host runs: the SGLang version,
    the draft window flag and size, the DFlash block size (the served one from the log's
    DFLASH init line, else the launch's `--speculative-dflash-block-size` /
    `--speculative-num-draft-tokens`, else the drafter's `block_size`), the drafter's
    `config.json` (its sha256: the revision, where the host names none), the attention
    backends (`--attention-backend`, `--speculative-draft-attention-backend`,
    `--prefill-attention-backend`, `--decode-attention-backend`) and `--kv-cache-dtype`.
    The value more hosts have than any other is the fleet's; each host with another value
    gets one DFD170 warning per setting. Where two values tie, every host of that setting is
    reported. A host on which the setting could not be read is shown as unknown, not as
    drift.

    **Why it hurts.** Hosts behind one load balancer that serve one model are expected to
    accept alike: a host on another SGLang release, another window or block size, or
    another drafter revision accepts fewer draft tokens (or more), and its latency and
    throughput differ from its peers' in a way no single-host check can see, since each
    host may be configured correctly for itself. Drift is also how a half-finished rollout
    looks.

    **Example.** Six hosts on SGLang 0.5.23 without a window flag, one still on 0.5.13 with
    `--speculative-dflash-draft-window-size 4096` and `--speculative-num-draft-tokens 8`:
    that host gets DFD170 for the version, the window flag and size, and the block size.

    **How to fix.** Bring the host to the fleet's value (`dflash-doctor fix` for launch
    flags, the fleet's drafter revision for the config), or, where the difference is
    intended (a canary, another GPU type), merge that group's reports separately.

    **Fix safety.** The fleet's value is only the most common one, not a verified one: read
    the host's own findings first (a fleet can share a mistake; DFD103 on every host is no
    drift).

    **Versions.** All: it compares reports, not one release's behaviour. A launch without
    `--kv-cache-dtype` counts as SGLang's default `auto` (srt/server_args.py 0.5.11:351,
    0.5.13:414; srt/arg_groups/fields/model.py 0.5.23:197-221).
    """
    return []


FLEET_DRIFT = Check(DRIFT_ID, "fleet-drift", Severity.WARNING, _fleet_drift_doc, (), ())
# Ids the fleet merge reports, outside the per-host catalog (`explain` and SARIF know them).
FLEET_CHECKS: dict[str, Check] = {DRIFT_ID: FLEET_DRIFT}
