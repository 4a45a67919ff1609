"""Launch options that the host's SGLang release renamed, deprecated or no longer accepts."""

from __future__ import annotations

from dflash_doctor.checks.base import Evidence, Finding, Fix, Severity, Unjudged, check
from dflash_doctor.checks.dp_attention import attn_dp_width, dp_refusal, drop_dp_attention
from dflash_doctor.checks.views import flag_evidence, version_evidence
from dflash_doctor.errors import FactError
from dflash_doctor.facts.launch import sglang_args_start
from dflash_doctor.facts.models import HostFacts
from dflash_doctor.facts.sglang_options import Renamed, release_for, renamed_option
from dflash_doctor.sglang_versions import WINDOW_FLAGS, parse_version

DP_ATTENTION_FLAG = "--enable-dp-attention"


@check("DFD140", "launch-option-renamed", Severity.ERROR, needs=("launch", "sglang_version"))
def launch_option_renamed(facts: HostFacts) -> list[Finding]:
    """A launch option that the host's SGLang release renamed, deprecated or removed.

    **What it finds.** Each option of the launch command is looked up in the option data of
    the host's SGLang release (`dflash_doctor/data/sglang_options.json`, generated from the
    published wheels by `scripts/gen_sglang_options.py`): a deprecated alias (SGLang's
    `Deprecated*Action`: it still works, and logs `'--old' is deprecated and will be removed
    in a future release. Use '--new' instead.`), or an option an earlier release had that this
    one refuses. Examples from the wheels: `--cuda-graph-max-bs` is a deprecated alias of
    `--cuda-graph-max-bs-decode` in 0.5.14-0.5.19 (srt/server_args.py 0.5.14:6358-6363,
    0.5.19:3928-3933) and from 0.5.20 an ambiguous prefix of `--cuda-graph-max-bs-decode` and
    `--cuda-graph-max-bs-prefill`, refused; `--mamba-scheduler-strategy` became
    `--mamba-radix-cache-strategy` the same way (0.5.14-0.5.19 alias, unrecognized from
    0.5.20); `--stream-output` (alias 0.5.11-0.5.19), `--nsa-*` -> `--dsa-*`, and every other
    alias the data holds. The draft window spellings are DFD104's.

    **Why it hurts.** A removed option stops the server at startup (`sglang serve: error:
    unrecognized arguments` or `ambiguous option`): the next relaunch from this launch file
    leaves the host without a server. A deprecated one works until the next upgrade does
    the same.

    **Example.** `--cuda-graph-max-bs 32` on 0.5.23: `sglang serve: error: ambiguous option:
    --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill`.

    **How to fix.** Use the spelling the release names (`--cuda-graph-max-bs-decode 32`).
    Where SGLang's hint is not one flag (`--cuda-graph-backend-{decode,prefill}=disabled`,
    `--attn-dp-size <dp-size>`) the fix is manual. One exception: `--enable-dp-attention`
    on a DFLASH server of a release that refuses DP attention with DFLASH (0.5.22) is not
    renamed; the finding gives DFD125's fix, dropping DP attention, because the new
    spelling is refused as well (`arg_groups/speculative_hook.py` 0.5.22:295-300).

    **Fix safety.** Exact: the new option stores into the same setting (the alias's `dest`
    in the data), so the server runs as before; `fix` rewrites the option name in place and
    keeps its value. Where the new option is already on the command line, the old one is
    removed instead.

    **Versions.** Per release, from the option data of 0.5.11 to 0.5.23 (post releases
    included); a host version outside the data is judged by the nearest earlier release,
    and the finding says so. The alias warning is `arg_groups/argparse_actions.py`
    0.5.14:65; from 0.5.20 the options are typed fields (`arg_groups/fields/exec_.py`
    0.5.20:482-488 for the two `--cuda-graph-max-bs-*`).
    """
    launch = facts.launch.value
    version = facts.sglang_version.value
    assert launch is not None and version is not None
    release, note = release_for(version)
    if release is None:
        raise Unjudged(note or f"SGLang {version} is not in the option data")
    try:
        argv = launch.argv[sglang_args_start(launch.argv) :]
    except FactError as e:
        raise Unjudged(str(e)) from None
    present = {a.split("=", 1)[0] for a in argv if a.startswith("--")}
    present |= set(launch.config_options)
    found: dict[str, Renamed] = {}
    for arg in [*argv, *launch.config_options]:
        if not arg.startswith("--"):
            continue
        r = renamed_option(release, arg)
        if r is not None and r.old not in WINDOW_FLAGS and r.written not in found:
            found[r.written] = r
    findings = [
        _finding(facts, r, present, note, launch.config_options.get(r.written))
        for r in found.values()
    ]
    return [_dp_attention_refused(facts, f) for f in findings]


def _dp_attention_refused(facts: HostFacts, finding: Finding) -> Finding:
    """`--enable-dp-attention` is deprecated for `--attn-dp-size` from 0.5.22
    (srt/server_args.py 0.5.22:417-423), but a DFLASH server on a release that refuses DP
    attention (DFD125: 0.5.22 arg_groups/speculative_hook.py 0.5.22:296-300 checks the
    resolved width, `attn_dp_enabled_of`, in either spelling) must not be told to rename
    it: the advice is DFD125's, drop DP attention."""
    launch = facts.launch.value
    version = parse_version(facts.sglang_version.value or "")
    if launch is None or version is None or not launch.is_dflash:
        return finding
    if finding.evidence[0].key != DP_ATTENTION_FLAG or attn_dp_width(launch) <= 1:
        return finding
    refusal = dp_refusal(version)
    if refusal is None:
        return finding
    message = finding.message.replace(" Use --attn-dp-size <dp-size>.", "")
    return finding.model_copy(
        update={
            "message": f"{message} Do not rename it: with DFLASH this release refuses DP "
            f"attention in either spelling (`{refusal}`, DFD125); drop DP attention.",
            "fixes": drop_dp_attention(launch),
        }
    )


def _finding(
    facts: HostFacts, r: Renamed, present: set[str], note: str | None, config: str | None
) -> Finding:
    launch = facts.launch.value
    assert launch is not None
    label = f"SGLang {facts.sglang_version.value}"
    if r.status == "removed":
        severity = Severity.ERROR
        title = f"{label} refuses {r.written}"
        message = (
            f"{r.written} was last accepted by {r.last} ({r.where} there); from {r.since} the "
            f"parser refuses it: `sglang serve: error: {r.message}`."
        )
    else:
        severity = Severity.WARNING
        title = f"{r.written} is deprecated in {label}"
        until = f"; the last release that accepts it is {r.last}" if r.last else ""
        message = (
            f"{label} accepts {r.old} as a deprecated alias ({r.where}) and logs: "
            f"{r.message}{until}."
        )
    if r.new is not None:
        message += f" Use {r.new}."
    if note:
        message += f" ({note}.)"
    if config is not None:
        # set in the --config YAML file: SGLang turns each key into `--key` (its merger)
        message += f" It is set by the key {r.written[2:]} in {config}."
        key = r.new[2:] if r.rewritable and r.new else None
        fix = Fix(
            action="manual",
            note=f"in {config}, rename the key {r.written[2:]} to {key}"
            if key
            else f"in {config}, remove the key {r.written[2:]}"
            + (f" and use {r.new}" if r.new else ""),
        )
    elif r.rewritable and r.new in present:
        fix = Fix(action="remove_flag", flag=r.written, note=f"{r.new} is already set")
    elif r.rewritable:
        fix = Fix(action="replace_flag", flag=r.new, replaces=r.written)
    elif r.new is not None:
        fix = Fix(action="manual", note=f"replace {r.written} with {r.new}")
    else:
        fix = Fix(action="remove_flag", flag=r.written)
    return launch_option_renamed.finding(
        severity=severity,
        title=title,
        message=message,
        evidence=[
            Evidence(kind="config", text=f"{r.written[2:]}:", file=config, key=r.written[2:])
            if config is not None
            else flag_evidence(launch, r.written, r.written),
            version_evidence(facts),
        ],
        fixes=[fix],
    )
