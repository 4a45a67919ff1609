"""What the vLLM checks share: the DFlash launch they judge, its evidence."""

from __future__ import annotations

from dflash_doctor.checks.base import Evidence, Skip, Unjudged
from dflash_doctor.facts.models import HostFacts
from dflash_doctor.facts.vllm_models import VllmLaunch
from dflash_doctor.facts.vllm_rules import read_release


def vllm_dflash(facts: HostFacts) -> VllmLaunch:
    """The vLLM launch when it drafts with DFlash; a Skip naming the method otherwise."""
    launch = facts.vllm_launch.value
    if launch is None:
        raise Unjudged(f"vLLM launch unavailable: {facts.vllm_launch.error}")
    spec = launch.speculative
    if spec is None:
        raise Skip("the vLLM server runs without speculative decoding")
    if not launch.is_dflash:
        raise Skip(f"the vLLM server drafts with {spec.method or 'another method'}, not dflash")
    return launch


def vllm_flag_evidence(launch: VllmLaunch, flag: str, text: str) -> Evidence:
    """A launch option (or variable) as evidence, at its line in a launch file."""
    return Evidence(
        kind="flag", text=text, file=launch.source, line=launch.flag_lines.get(flag), key=flag
    )


def vllm_release(facts: HostFacts) -> str | None:
    """The vLLM release the host runs when the rules were read for it; None where it is not
    known or outside the releases read (a check then names every range it knows)."""
    version = facts.vllm_version.value
    return version if version is not None and read_release(version) else None


def version_evidence(facts: HostFacts) -> Evidence:
    """The vLLM release judged, and where it was read."""
    return Evidence(
        kind="version", text=f"vLLM {facts.vllm_version.value}", file=facts.vllm_version.source
    )
