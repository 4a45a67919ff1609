"""What the options' text becomes: check ids, context lengths, SSH and bench settings."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from dflash_doctor.defaults import DEFAULT_MAX_TOTAL_TOKENS, DEFAULT_SEED
from dflash_doctor.errors import UsageError

if TYPE_CHECKING:
    from dflash_doctor.bench.matrix import BenchOptions
    from dflash_doctor.transport.ssh_options import SSHOptions


def given(options: dict[str, tuple[str, str | None]]) -> dict[str, str]:
    """Facts the command line named a path or pid for: unreadable ones are input errors."""
    return {fact: f"{flag} {value}" for fact, (flag, value) in options.items() if value}


def ssh(
    identity: list[str] | None,
    known_hosts: str | None,
    ssh_config: str | None,
    accept_new_host_key: bool,
    connect_timeout: float = 10.0,
) -> SSHOptions:
    """The SSH settings the command line gave."""
    from dflash_doctor.transport.ssh_options import SSHOptions

    return SSHOptions(
        identity_files=tuple(identity or ()),
        known_hosts=known_hosts,
        ssh_config=ssh_config,
        accept_new_host_key=accept_new_host_key,
        connect_timeout=connect_timeout,
    )


def local_env() -> dict[str, str]:
    """This machine's settings that locate model files (offline: the files are here)."""
    from dflash_doctor.gather import ENV_KEYS

    return {k: os.environ[k] for k in ENV_KEYS if k in os.environ}


def selection(select: str | None) -> list[str] | None:
    """The check ids `--select` names (None: all); an unknown id is an input error."""
    if not select:
        return None
    from dflash_doctor.checks import CATALOG

    chosen = [s.strip().upper() for s in select.split(",") if s.strip()]
    unknown = [c for c in chosen if c not in CATALOG]
    if unknown:
        raise UsageError(f"unknown check id(s): {', '.join(unknown)}")
    return chosen


def lengths(contexts: str | None) -> list[int] | None:
    """Context lengths from comma-separated text, sorted and positive (None: not given)."""
    if not contexts:
        return None
    try:
        found = sorted({int(x) for x in contexts.split(",") if x.strip()})
    except ValueError:
        raise UsageError(f"context lengths {contexts!r}: comma-separated integers") from None
    if not found or found[0] < 1:
        raise UsageError("context lengths must be positive")
    return found


def _counts(text: str | None, what: str) -> list[int] | None:
    if not text:
        return None
    try:
        values = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise UsageError(f"{what} {text!r}: comma-separated integers") from None
    if not values or values[0] < 1:
        raise UsageError(f"{what} must be positive")
    return values


def bench_options(
    contexts: str | None,
    concurrency: str | None,
    max_new_tokens: int,
    temperature: float | None = None,
    seed: str = DEFAULT_SEED,
    max_total_tokens: int = DEFAULT_MAX_TOTAL_TOKENS,
    yes: bool = False,
    prompts: str | None = None,
    repeats: int = 3,
    baseline_port: int | None = None,
) -> BenchOptions:
    """A sweep's settings, as `bench` and the `--bench` of `check` and `fix` give them."""
    from dflash_doctor.bench.matrix import BenchOptions
    from dflash_doctor.bench.prompts import parse_prompts

    return BenchOptions(
        contexts=_counts(contexts, "--contexts"),
        concurrency=_counts(concurrency, "--concurrency"),
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        seed=seed,
        max_total_tokens=max_total_tokens,
        yes=yes,
        prompts=tuple(parse_prompts(prompts)),
        repeats=repeats,
        baseline_port=baseline_port,
    )
