"""Keys of `--speculative-config` that vLLM refuses at start-up."""

from __future__ import annotations

import difflib

from dflash_doctor.checks.base import Evidence, Finding, Fix, Severity, Unjudged, check
from dflash_doctor.checks.vllm_views import vllm_flag_evidence
from dflash_doctor.facts.models import HostFacts
from dflash_doctor.facts.vllm_options import accepted_keys, keys_of_any_release, releases_read


@check(
    "DFD303",
    "vllm-speculative-config-unknown-key",
    Severity.ERROR,
    needs=("vllm_launch",),
    engine="vllm",
)
def vllm_speculative_config_unknown_key(facts: HostFacts) -> list[Finding]:
    """`--speculative-config` names a key that vLLM's SpeculativeConfig does not have.

    **What it finds.** A key of the `--speculative-config` JSON (dashes read as
    underscores, as vLLM reads them) that is not a field of the installed release's
    `SpeculativeConfig`; where the release is not known, a key that no release read has.

    **Why it hurts.** `SpeculativeConfig` is a pydantic dataclass that forbids extra
    keys: vLLM exits at start-up with pydantic's ValidationError naming the key. A
    misspelt key (`num_spec_tokens`) or one of a newer release keeps the server down.

    **Example.** `--speculative-config '{"method": "dflash", "model": "z-lab/...",
    "num_spec_tokens": 15}'`.

    **How to fix.** Spell the key as the release names it (`num_speculative_tokens`), or
    remove it, and relaunch. `dflash-doctor fix` renames a key that is one slip from
    exactly one key the release accepts (and the launch does not give already), and
    removes any other; the edit is made inside the JSON, where vLLM reads it.

    **Fix safety.** Safe: the server cannot start with the key. A removed key's setting
    is lost (vLLM never read it); `fix --apply` re-checks and rolls back when the
    relaunched server does not come up.

    **Versions.** The keys of every release read, 0.27.1-0.34.0, are data
    (dflash_doctor/data/vllm_speculative.json, scripts/gen_vllm_speculative.py) read from
    the class (vllm/config/speculative.py 0.27.1:83, 0.34.0:449) and its forbidding of
    extra keys (vllm/config/utils.py 0.27.1:69, 0.34.0:72).
    """
    launch = facts.vllm_launch.value
    if launch is None or launch.speculative is None:
        return []  # needs= names the missing launch; no speculative config, no keys
    version = facts.vllm_version.value
    if version is not None:
        known = accepted_keys(version)
        if known is None:
            read = releases_read()
            raise Unjudged(f"vLLM {version} is outside the releases read ({read[0]}-{read[-1]})")
        keys, where = known
        scope = f"vLLM {version}"
    else:
        keys, where, scope = keys_of_any_release(), None, "no vLLM release read (0.27.1-0.34.0)"
    unknown = [k for k in launch.speculative.keys if k not in keys]
    if not unknown:
        return []
    evidence = [vllm_flag_evidence(launch, "--speculative-config", f"keys: {', '.join(unknown)}")]
    if where is not None:
        evidence.append(Evidence(kind="version", text=f"SpeculativeConfig at {where}"))
    return [
        vllm_speculative_config_unknown_key.finding(
            title="vLLM will not start with this --speculative-config",
            message=f"{scope} accepts no key {', '.join(repr(k) for k in unknown)}: "
            "SpeculativeConfig forbids extra keys (a ValidationError at start-up)",
            evidence=evidence,
            fixes=[_fix(k, keys, launch.speculative.keys) for k in unknown],
        )
    ]


def _fix(key: str, accepted: frozenset[str], given: list[str]) -> Fix:
    """Rename a key one slip away from exactly one accepted key the launch does not give
    already (`num_speculative_token`); otherwise remove it."""
    option = f"--speculative-config.{key}"
    close = difflib.get_close_matches(key, sorted(accepted), n=2, cutoff=CLOSE)
    if len(close) == 1 and close[0] not in given:
        return Fix(action="rename_key", flag=option, value=close[0])
    return Fix(action="remove_key", flag=option)


# How alike a key must be to one vLLM accepts to be read as its misspelling (difflib ratio).
CLOSE = 0.8
