"""Derived views over HostFacts that several checks share (pure, no I/O)."""

from __future__ import annotations

from dataclasses import dataclass, field

from dflash_doctor.checks.base import Evidence, Fix, Skip
from dflash_doctor.facts.models import DrafterConfig, HostFacts, LaunchArgs, LogFacts
from dflash_doctor.kv_math import DraftKv, draft_kv
from dflash_doctor.sglang_versions import (
    NEW_WINDOW_FLAG,
    OLD_WINDOW_FLAG,
    VersionFacts,
    facts_for,
    parse_version,
)


def version_facts(facts: HostFacts) -> VersionFacts | None:
    if facts.sglang_version.value is None:
        return None
    parsed = parse_version(facts.sglang_version.value)
    return facts_for(parsed) if parsed else None


def version_evidence(facts: HostFacts) -> Evidence:
    return Evidence(
        kind="version",
        text=f"SGLang {facts.sglang_version.value}",
        file=facts.sglang_version.source,
    )


def require_dflash(facts: HostFacts) -> None:
    """Skip unless the server runs (or would run) DFLASH speculative decoding."""
    launch = facts.launch.value
    if launch is not None:
        if not launch.is_dflash:
            algo = launch.speculative_algorithm or "none"
            raise Skip(f"server does not use DFLASH (speculative algorithm: {algo})")
        return
    log = facts.log.value
    if log is not None and log.dflash_init is None:
        logged = log.server_args_fields.get("speculative_algorithm")
        if logged is not None and logged.upper() != "DFLASH":
            raise Skip(f"server does not use DFLASH (speculative algorithm: {logged})")


def drafter(facts: HostFacts) -> DrafterConfig:
    if facts.drafter.value is None:
        raise Skip(f"drafter config unavailable: {facts.drafter.error}")
    return facts.drafter.value


def flag_evidence(launch: LaunchArgs, flag: str, text: str) -> Evidence:
    return Evidence(
        kind="flag", text=text, file=launch.source, line=launch.flag_lines.get(flag), key=flag
    )


def config_evidence(cfg: DrafterConfig, key: str, text: str) -> Evidence:
    return Evidence(kind="config", text=text, file=cfg.path, line=cfg.line_of(key), key=key)


def sliding_evidence(cfg: DrafterConfig) -> Evidence:
    layers = cfg.sliding_layers
    key = "layer_types" if not cfg.layer_types_derived else "sliding_window"
    how = "derived from max_window_layers" if cfg.layer_types_derived else "layer_types"
    return config_evidence(
        cfg,
        key,
        f"{len(layers)} of {cfg.num_hidden_layers} layers are sliding_attention ({how}), "
        f"sliding_window={cfg.effective_sliding_window}",
    )


@dataclass
class WindowState:
    """The draft window the server runs with, and what says so."""

    known: bool
    window: int | None
    evidence: list[Evidence] = field(default_factory=list)


def window_state(facts: HostFacts) -> WindowState:
    """The log's DFlash init line (what runs) wins over the launch flags (what was asked)."""
    state = WindowState(known=False, window=None)
    launch = facts.launch.value
    if launch is not None:
        state.known = True
        state.window = launch.draft_window_size
        if launch.draft_window_flag:
            state.evidence.append(
                flag_evidence(
                    launch,
                    launch.draft_window_flag,
                    f"{launch.draft_window_flag} {launch.draft_window_size}",
                )
            )
        else:
            state.evidence.append(
                Evidence(
                    kind="flag",
                    text=f"neither {NEW_WINDOW_FLAG} nor {OLD_WINDOW_FLAG} is set",
                    file=launch.source,
                    line=launch.command_lines[0] if launch.command_lines else None,
                )
            )
    log = facts.log.value
    if log is not None and log.dflash_init is not None:
        state.known = True
        state.window = log.draft_window_size
        state.evidence.append(log_evidence(log, log.dflash_init.line, log.dflash_init.text))
    return state


def log_evidence(log: LogFacts, line: int, text: str) -> Evidence:
    return Evidence(kind="log", text=text, file=log.path, line=line)


def window_flag_for(facts: HostFacts) -> tuple[str, str | None]:
    """The window flag spelling to recommend for this host, and a note when unsure.

    The host's own SGLang parser (when it could be asked) decides; else the version table.
    """
    vf = version_facts(facts)
    launch = facts.launch.value
    deprecated = vf.deprecated_window_flags if vf is not None else ()
    if launch is not None and launch.accepted_window_flags:
        accepted = [f for f in launch.accepted_window_flags if f not in deprecated]
        if accepted:
            return accepted[0], None
    if vf is None:
        return (
            NEW_WINDOW_FLAG,
            f"SGLang version unknown: {NEW_WINDOW_FLAG} needs 0.5.12 or newer; "
            f"0.5.11 spells it {OLD_WINDOW_FLAG}",
        )
    flag = vf.preferred_window_flag
    if flag is None:
        return NEW_WINDOW_FLAG, f"SGLang {vf.label} has no draft window flag; upgrade first"
    return flag, None


def set_window_fix(facts: HostFacts, value: int) -> Fix:
    flag, note = window_flag_for(facts)
    launch = facts.launch.value
    current = launch.draft_window_flag if launch else None
    if current is not None and current != flag:
        return Fix(action="replace_flag", flag=flag, value=str(value), replaces=current, note=note)
    return Fix(action="set_flag", flag=flag, value=str(value), note=note)


def context_length(facts: HostFacts) -> tuple[int | None, Evidence | None]:
    """The server's context length: --context-length, the logged args, else the target's max."""
    launch = facts.launch.value
    if launch is not None and launch.context_length:
        return launch.context_length, flag_evidence(
            launch, "--context-length", f"--context-length {launch.context_length}"
        )
    log = facts.log.value
    if log is not None and log.server_args is not None:
        value = log.server_args_fields.get("context_length")
        if value and value.isdigit():
            return int(value), log_evidence(
                log, log.server_args.line, f"server_args context_length={value}"
            )
    target = facts.target.value
    if target is not None and target.max_position_embeddings:
        return target.max_position_embeddings, Evidence(
            kind="config",
            text=f"max_position_embeddings={target.max_position_embeddings} "
            "(no --context-length: SGLang uses the model's maximum)",
            file=target.path,
            line=target.key_lines.get("max_position_embeddings"),
            key="max_position_embeddings",
        )
    return None, None


def probe_evidence(
    facts: HostFacts, context: int | None
) -> tuple[list[Evidence], dict[str, float | int | str]]:
    """What the probe measured at the longest probed context up to the server's context."""
    result = facts.probe.value
    if result is None or not result.contexts:
        return [], {}
    beyond = [c for c in result.contexts if not c.window_covers_context]
    if not beyond:
        return [], {}
    fitting = [c for c in beyond if context is None or c.context <= context] or beyond[:1]
    c = fitting[-1]
    impact: dict[str, float | int | str] = {
        "probe_context_tokens": c.context,
        "probe_rel_l2_full_vs_windowed": round(c.output.rel_l2, 4),
        "probe_top1_agreement": round(c.top1_agreement, 4),
    }
    window = result.shape.window if result.shape else None
    text = (
        f"probe on {result.device} (window {window}): at {c.context} tokens the drafter's "
        f"attention output with full context differs from its trained windowed output by rel L2 "
        f"{c.output.rel_l2:.3g} (top-1 agreement {c.top1_agreement:.2f})"
    )
    if c.kv is not None:
        extra = (c.kv.full_bytes_measured - c.kv.windowed_bytes_measured) / 2**30
        impact["probe_draft_kv_extra_gib_per_request_per_gpu"] = round(extra, 4)
        text += f", and holds {extra:.3f} GiB more draft KV per request per GPU"
    return [Evidence(kind="derived", text=text)], impact


def server_draft_kv(facts: HostFacts, cfg: DrafterConfig, context: int, window: int) -> DraftKv:
    """Draft KV per request per GPU under the server's page size, TP and KV cache dtype."""
    launch = facts.launch.value
    return draft_kv(
        cfg,
        context_tokens=context,
        window=window,
        page_size=(launch.page_size if launch else None) or 1,
        tp_size=launch.tp_size if launch else 1,
        kv_cache_dtype=launch.kv_cache_dtype if launch else None,
    )


def env_value(facts: HostFacts, name: str) -> tuple[bool, str | None]:
    """(known, value) of one catalog variable in the server's environment (None: unset)."""
    env = facts.environ.value
    if env is None:
        return False, None
    return True, env.get(name)


def env_evidence(facts: HostFacts, name: str, value: str | None) -> Evidence:
    text = f"{name}={value}" if value is not None else f"{name} is not set"
    return Evidence(kind="config", text=text, file=facts.environ.source, key=name)
