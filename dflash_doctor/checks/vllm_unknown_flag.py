"""DFD309: a `vllm serve` option the installed vLLM's parser does not register."""

from __future__ import annotations

from dflash_doctor.checks.base import Evidence, Finding, Fix, Severity, Unjudged, check
from dflash_doctor.facts.models import HostFacts
from dflash_doctor.facts.vllm_options import (
    accepts,
    any_release_flags,
    release_flags,
    releases_read,
    removed_in,
)


@check("DFD309", "vllm-launch-flag-unknown", Severity.ERROR, needs=("vllm_launch",), engine="vllm")
def vllm_launch_flag_unknown(facts: HostFacts) -> list[Finding]:
    """The vLLM launch passes an option that the release's parser does not have.

    **What it finds.** A long option of the `vllm serve` (or API server module) command
    that the installed release's parser does not register, nor accepts as a `--no-`
    negation, an `--enable-`/`--disable-` inverse (0.33.0+) or a unique abbreviation;
    where the release is not known, an option that no release read registers. The
    flags of every release read are data (dflash_doctor/data/vllm_cli_flags.json,
    scripts/gen_vllm_options.py), with the flags each release removed.

    **Why it hurts.** argparse stops the server before it loads anything: `vllm serve:
    error: unrecognized arguments: --NAME` (or `ambiguous option`; vLLM's parser passes
    argparse's error on, vllm/utils/argparse_utils.py 0.34.0:182-193). A flag kept from an
    older release, or from an SGLang launch (`--speculative-algorithm`,
    `--context-length`), keeps the server down after an upgrade.

    **Example.** `vllm serve Qwen/Qwen3-8B --context-length 32768` (SGLang's spelling of
    vLLM's `--max-model-len`).

    **How to fix.** Spell the option as the release names it (`vllm serve --help`), or
    remove it, and relaunch.

    **Fix safety.** Safe: the server cannot start with the option.

    **Versions.** Read in vLLM 0.27.1-0.34.0: the `add_argument` calls of
    vllm/engine/arg_utils.py (EngineArgs.add_cli_args, vllm/engine/arg_utils.py
    0.34.0:966) and of the frontend's `make_arg_parser`, and the fields of
    BaseFrontendArgs and its subclasses, registered as `--field-name`
    (vllm/entrypoints/common/cli_args.py 0.34.0:281-285). Underscores are read as
    dashes, as FlexibleArgumentParser does (vllm/utils/argparse_utils.py 0.34.0:378-393).
    """
    launch = facts.vllm_launch.value
    if launch is None:
        return []  # needs= names the missing launch
    version = facts.vllm_version.value
    known = release_flags(version) if version is not None else any_release_flags()
    if known is None:
        read = releases_read()
        raise Unjudged(f"vLLM {version} is outside the releases read ({read[0]}-{read[-1]})")
    unknown = [o for o in launch.options if not accepts(known, o)]
    if not unknown:
        return []
    names = ", ".join(unknown[:8])
    if version is not None:
        said = f"vLLM {version} has no option {names}"
    else:
        said = f"no vLLM release read (0.27.1-0.34.0) has the option {names}"
    gone = [f"{o} (removed in {r})" for o in unknown if (r := removed_in(o)) is not None]
    evidence = [
        Evidence(kind="flag", text=o, file=launch.source, line=launch.option_lines.get(o), key=o)
        for o in unknown[:8]
    ]
    if known.read_from:
        evidence.append(Evidence(kind="version", text=f"vLLM {known.release} parser"))
    return [
        vllm_launch_flag_unknown.finding(
            title="vLLM will not start with this launch",
            message=(
                f"{said}: argparse refuses the launch (`unrecognized arguments`)"
                + (f"; {', '.join(gone)}" if gone else "")
            ),
            evidence=evidence,
            fixes=[
                Fix(action="manual", note="spell the option as the release names it, or drop it")
            ],
        )
    ]
