"""Derived views over HostFacts that several checks share (pure, no I/O)."""

from __future__ import annotations

from dataclasses import dataclass, field

from dflash_doctor.checks.base import Evidence, Fix, Skip, Unjudged
from dflash_doctor.facts.dflash_family import family_drafter, is_family_algorithm
from dflash_doctor.facts.models import (
    DrafterConfig,
    HostFacts,
    LaunchArgs,
    LogFacts,
    ServerRuntime,
    TargetConfig,
)
from dflash_doctor.sglang_versions import (
    LAYER_TYPES_SINCE,
    NEW_WINDOW_FLAG,
    OLD_WINDOW_FLAG,
    Version,
    VersionFacts,
    facts_for,
    format_version,
    parse_version,
)
from dflash_doctor.spans import Behaviour, LayerSpan, SpanModel, served_spans

# The first release whose dflash.py honours layer_types, as fixes and messages name it.
LAYER_TYPES_UPGRADE = format_version(LAYER_TYPES_SINCE)


def version_facts(facts: HostFacts) -> VersionFacts | None:
    if facts.sglang_version.value is None:
        return None
    parsed = parse_version(facts.sglang_version.value)
    return facts_for(parsed) if parsed else None


def startup_release(facts: HostFacts) -> str | None:
    """The SGLang release a (re)start from this launch runs: the installed one whose parser
    read the launch (native or replayed), else the installed or declared version."""
    launch = facts.launch.value
    if launch is not None and launch.parser_version:
        return launch.parser_version
    return facts.sglang_version.value


def version_evidence(facts: HostFacts) -> Evidence:
    return Evidence(
        kind="version",
        text=f"SGLang {facts.sglang_version.value}",
        file=facts.sglang_version.source,
    )


def not_dflash_reason(facts: HostFacts, algorithm: str) -> str:
    """Why a DFLASH check skips a server whose algorithm is not DFLASH. A DFlash-family
    server (DSPARK, or a family drafter under another algorithm name) is named as such,
    never as one that "does not use DFLASH" (DFD168 describes it); the family is the
    release's own (data/dflash_family.json, scripts/gen_dflash_family.py)."""
    version = facts.sglang_version.value
    if is_family_algorithm(algorithm, version):
        return (
            f"server uses {algorithm.upper()}, a DFlash-family algorithm this DFLASH check "
            "does not judge (DFD168 describes it)"
        )
    drafter = facts.drafter.value
    serving = drafter is not None and algorithm.lower() not in ("none", "")
    found = family_drafter(version, drafter.architectures) if serving and drafter else None
    if found is not None:
        return (
            f"server runs speculative algorithm {algorithm} with a DFlash-family drafter "
            f"({found[0]}); this check judges DFLASH only (DFD168 describes the family)"
        )
    return f"server does not use DFLASH (speculative algorithm: {algorithm})"


def require_dflash(facts: HostFacts) -> None:
    """Skip unless the server runs (or would run) DFLASH speculative decoding."""
    launch = facts.launch.value
    if launch is not None:
        if not launch.is_dflash:
            raise Skip(not_dflash_reason(facts, launch.speculative_algorithm or "none"))
        return
    log = facts.log.value
    if log is not None and log.dflash_init is None:
        logged = log.server_args_fields.get("speculative_algorithm")
        if logged is not None and logged.upper() != "DFLASH":
            raise Skip(not_dflash_reason(facts, logged))


def drafter(facts: HostFacts) -> DrafterConfig:
    if facts.drafter.value is None:
        raise Unjudged(f"drafter config unavailable: {facts.drafter.error}")
    return facts.drafter.value


def flag_evidence(launch: LaunchArgs, flag: str, text: str) -> Evidence:
    return Evidence(
        kind="flag", text=text, file=launch.source, line=launch.flag_lines.get(flag), key=flag
    )


def config_evidence(cfg: DrafterConfig, key: str, text: str) -> Evidence:
    return Evidence(kind="config", text=text, file=cfg.path, line=cfg.line_of(key), key=key)


def target_evidence(target: TargetConfig, key: str, text: str) -> Evidence:
    """Evidence from the target's config.json at `key`'s line."""
    return Evidence(
        kind="config", text=text, file=target.path, line=target.key_lines.get(key), key=key
    )


def sliding_evidence(cfg: DrafterConfig) -> Evidence:
    layers = cfg.sliding_layers
    key = "layer_types" if not cfg.layer_types_derived else "sliding_window"
    how = {
        "qwen3": "derived as transformers' Qwen3Config does, from max_window_layers",
        "gpt_oss": "derived as transformers' GptOssConfig does: even layers sliding",
    }.get(cfg.layer_types_source, "layer_types")
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
        # A window flag whose value is not known offline (`"$WINDOW"` set nowhere the walk
        # can see) leaves the window unknown, not absent.
        state.known = launch.draft_window_flag is None or launch.draft_window_size is not None
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


def crashed_in_latest_start(log: LogFacts, pattern_id: str) -> bool:
    """Whether this crash signature's last line follows the latest `server_args=` dump: the
    latest start crashed (a crash before it was followed by a start that came up)."""
    event = log.crashes.get(pattern_id)
    start = log.server_args.line if log.server_args is not None else 0
    return event is not None and event.last.line > start


def log_evidence(log: LogFacts, line: int, text: str) -> Evidence:
    return Evidence(kind="log", text=text, file=log.path, line=line)


def window_flag_for(facts: HostFacts) -> tuple[str, str | None]:
    """The window flag spelling to recommend for this host, and a note when unsure.

    The host's own SGLang parser (when it could be asked) decides; else the version table.
    """
    vf = version_facts(facts)
    launch = facts.launch.value
    native = parse_version(launch.parser_version) if launch and launch.parser_version else None
    if native is not None:
        vf = facts_for(native)  # the host's own SGLang answered: its version decides
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
    """What the probe measured, served vs trained (and the fix vs trained), at the longest
    probed context up to the server's where the served spans differ from the trained."""
    result = facts.probe.value
    if result is None or not result.contexts:
        return [], {}
    differing = [
        c
        for c in result.contexts
        if (cmp := c.comparison("served")) is not None and not cmp.same_spans
    ]
    if not differing:
        return [], {}
    fitting = [c for c in differing if context is None or c.context <= context] or differing[:1]
    c = fitting[-1]
    served = c.comparison("served")
    assert served is not None
    impact: dict[str, float | int | str] = {
        "probe_context_tokens": c.context,
        "probe_rel_l2_served_vs_trained": round(served.output.rel_l2, 4),
        "probe_top1_agreement_served_vs_trained": round(served.top1_agreement, 4),
    }
    window = result.shape.window if result.shape else None
    text = (
        f"probe on {result.device} (trained window {window}): at {c.context} tokens the "
        f"attention as served ({result.label_of('served')}) differs from the trained by rel L2 "
        f"{served.output.rel_l2:.3g} (top-1 agreement {served.top1_agreement:.2f} over "
        f"{result.agreement_tokens} draft tokens)"
    )
    fix = c.comparison("fix")
    if fix is not None:
        impact["probe_rel_l2_fix_vs_trained"] = round(fix.output.rel_l2, 4)
        impact["probe_top1_agreement_fix_vs_trained"] = round(fix.top1_agreement, 4)
        text += (
            f"; under the fix ({result.label_of('fix')}) by rel L2 {fix.output.rel_l2:.3g} "
            f"(top-1 {fix.top1_agreement:.2f})"
        )
    reads = {r.scenario: r.read_bytes / 2**20 for r in c.runs}
    if "served" in reads and "trained" in reads:
        impact["probe_draft_reads_mib_per_step_served"] = round(reads["served"], 3)
        impact["probe_draft_reads_mib_per_step_trained"] = round(reads["trained"], 3)
        text += (
            f"; draft attention reads per step per GPU: served {reads['served']:.2f} MiB, "
            f"trained {reads['trained']:.2f} MiB"
        )
    return [Evidence(kind="derived", text=text)], impact


def running_drift(facts: HostFacts) -> tuple[Version, str] | None:
    """(running release, installed version text) when the live server runs another SGLang
    than the one installed; None when they agree or either is unknown."""
    installed = facts.installed_version.value
    running = parse_version(facts.sglang_version.value or "")
    if installed is None or running is None or parse_version(installed) == running:
        return None
    return running, installed


def behaviour(facts: HostFacts) -> Behaviour | None:
    """Does the host's SGLang build draft layers from layer_types? Its own code decides
    where it could be read; else the version table; None when neither is known."""
    drift = running_drift(facts)
    if drift is not None:
        # The installed files and parser describe the next start, not the running server.
        running, installed = drift
        nf = facts_for(running)
        return Behaviour(
            nf.drafter_honours_layer_types,
            f"version table: SGLang {nf.label} as the running server reports it "
            f"(/server_info; SGLang {installed} is installed but not running; layer_types "
            f"honoured from {LAYER_TYPES_UPGRADE})",
        )
    code = facts.sglang_code.value
    if code is not None:
        where = f"{code.path}:{code.line}" if code.line else code.path
        return Behaviour(
            code.honours_layer_types, f"the host's SGLang source {where} ({code.evidence})"
        )
    since = LAYER_TYPES_UPGRADE
    launch = facts.launch.value
    native = parse_version(launch.parser_version) if launch and launch.parser_version else None
    if native is not None:
        # The launch was parsed as that release parses it: its version beats a declared one.
        # Only parser "sglang" means the host's SGLang was asked; a replay asked no host.
        nf = facts_for(native)
        who = (
            "as the host's own sglang reports it"
            if launch is not None and launch.parser == "sglang"
            else "with its parser replayed from data, no host asked"
        )
        return Behaviour(
            nf.drafter_honours_layer_types,
            f"version table: SGLang {nf.label} {who} (layer_types honoured from {since})",
        )
    vf = version_facts(facts)
    if vf is None:
        return None
    return Behaviour(
        vf.drafter_honours_layer_types,
        f"version table: SGLang {vf.label} (layer_types honoured from {since})",
    )


def behaviour_evidence(facts: HostFacts, b: Behaviour) -> Evidence:
    code = facts.sglang_code.value
    if code is not None:
        return Evidence(
            kind="version",
            text=f"SGLang source: {'honours' if b.honours_layer_types else 'ignores'} "
            f"layer_types ({code.evidence})",
            file=code.path,
            line=code.line,
        )
    return version_evidence(facts)


def page_size(facts: HostFacts) -> int:
    """--page-size, else the logged server_args page_size, else SGLang's default 1."""
    launch = facts.launch.value
    if launch is not None and launch.page_size:
        return launch.page_size
    log = facts.log.value
    if log is not None:
        value = log.server_args_fields.get("page_size")
        if value and value.isdigit():
            return int(value)
    return 1


def require_layer_types(cfg: DrafterConfig) -> None:
    """Skip when the drafter's layer types cannot be known (never guessed)."""
    if cfg.unknown_layer_types:
        raise Skip(
            f"drafter layer_types has types SGLang does not build: {cfg.unknown_layer_types} "
            "(0.5.14+ refuses them: DFD111; 0.5.11-0.5.13 ignore layer_types)"
        )
    if cfg.layer_types_source == "unknown":
        raise Skip(
            f"drafter layer types unknown: no layer_types, and model_type {cfg.model_type!r} "
            "derives them by a rule not modelled here (data/transformers_defaults.json) or is "
            "unknown to transformers"
        )


def no_window_reason(cfg: DrafterConfig) -> str:
    """Why a drafter has no sliding layer with a window, said truly."""
    if "sliding_attention" in cfg.layer_types:
        return (
            "the drafter's sliding_attention layers have no window after its config class "
            f"resolves it ({cfg.sliding_window_source or 'sliding_window'}): they attend over "
            "the whole context, as in training"
        )
    return "drafter has no sliding_attention layers"


def span_model(facts: HostFacts, cfg: DrafterConfig, flag: int | None = None) -> SpanModel:
    """Trained vs served spans for this host (or, with `flag`, for that window instead)."""
    b = behaviour(facts)
    if b is None:
        why = facts.sglang_version.error or facts.sglang_version.value
        raise Unjudged(f"SGLang behaviour unknown (no readable source, version: {why})")
    require_layer_types(cfg)
    state = window_state(facts)
    if not state.known:
        raise Skip(
            "draft window unknown (no launch command, or its value is not known offline; "
            "no DFlash log line)"
        )
    ctx, _ = context_length(facts)
    return served_spans(
        behaviour=b,
        layer_types=cfg.layer_types,
        sliding_window=cfg.effective_sliding_window,
        window_flag=state.window if flag is None else flag,
        page_size=page_size(facts),
        block_size=cfg.block_size,
        context=ctx,
    )


def layer_list(spans: list[LayerSpan]) -> str:
    """`0-4, 6`: layer indices with consecutive runs folded."""
    runs: list[list[int]] = []
    for i in sorted(s.layer for s in spans):
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs)


def span_evidence(model: SpanModel) -> Evidence:
    """One line per kind of layer: trained vs served, and who decided the behaviour."""
    groups: dict[tuple[str, str, str], list[int]] = {}
    for s in model.layers:
        groups.setdefault((s.layer_type, s.describe_trained(), s.describe_served()), []).append(
            s.layer
        )
    parts = [
        f"layer{'s' if len(ids) > 1 else ''} {_fold(ids)} ({kind}): trained {trained}, "
        f"served {served}"
        for (kind, trained, served), ids in groups.items()
    ]
    ctx = f"context {model.context}" if model.context else "context unknown (taken as long)"
    flag = f"draft window {model.window_flag}" if model.window_flag else "no draft window"
    return Evidence(
        kind="derived",
        text=f"{'; '.join(parts)} [{ctx}, {flag}, page size {model.page_size}; "
        f"behaviour from {model.behaviour.source}]",
    )


def _fold(ids: list[int]) -> str:
    return layer_list([LayerSpan(i, "", None, None, None, "as_trained") for i in ids])


def remove_window_fix(facts: HostFacts) -> Fix:
    launch = facts.launch.value
    flag = (launch.draft_window_flag if launch else None) or window_flag_for(facts)[0]
    return Fix(action="remove_flag", flag=flag)


SPAN_CHECKS = ("DFD102", "DFD103", "DFD130")


def span_mismatch(facts: HostFacts) -> str | None:
    """Why the served spans differ from the trained ones, or None when they are equal.

    Equal allows what no launch flag can avoid on a build that ignores layer_types: a
    window at the trained size clamps full_attention layers (DFD103's fix names them).
    """
    try:
        cfg = drafter(facts)
        model = span_model(facts, cfg)
    except Skip as skip:
        return f"served spans unknown: {skip}"
    bad = model.with_verdict("wider", "truncated")
    clamped = model.with_verdict("clamped")
    lesser_evil = not model.behaviour.honours_layer_types and bool(cfg.sliding_layers)
    if clamped and not lesser_evil:
        bad = bad + clamped
    if not bad:
        return None
    return "; ".join(
        f"layer {s.layer} ({s.layer_type}) trained {s.describe_trained()}, "
        f"served {s.describe_served()}"
        for s in bad
    )


def window_flag_unwanted(facts: HostFacts) -> bool:
    """True when the draft window flag only harms: on a build that honours layer_types it
    can only clamp or truncate layers; on one that ignores them, a drafter without sliding
    layers gains nothing from it. Then the fix for the flag is to remove it."""
    try:
        cfg = drafter(facts)
        model = span_model(facts, cfg)
    except Skip:
        return False
    if model.window_flag is None:
        return False
    harmed = bool(model.with_verdict("clamped", "truncated"))
    if model.behaviour.honours_layer_types:
        return harmed
    return harmed and not cfg.sliding_layers


def env_value(facts: HostFacts, name: str) -> tuple[bool, str | None]:
    """(known, value) of one catalog variable in the server's environment (None: unset)."""
    env = facts.environ.value
    if env is None:
        return False, None
    return True, env.get(name)


def require_environ(facts: HostFacts) -> None:
    """Skip unless the server's environment was read."""
    if facts.environ.value is None:
        raise Skip(f"the server's environment was not read: {facts.environ.error}")


def env_evidence(facts: HostFacts, name: str, value: str | None) -> Evidence:
    text = f"{name}={value}" if value is not None else f"{name} is not set"
    return Evidence(kind="config", text=text, file=facts.environ.source, key=name)


def running_server(facts: HostFacts) -> ServerRuntime:
    """The live server's own answer, or Skip with why it was not asked or not answered."""
    if facts.runtime.value is None:
        raise Skip(
            f"needs the live server's answer: {facts.runtime.error}"
            if facts.runtime.error
            else "no live server was asked (offline or recorded host, or no server process)"
        )
    return facts.runtime.value


def runtime_evidence(runtime: ServerRuntime, text: str) -> Evidence:
    """What the live server answered over HTTP (`/server_info`), pointing at the endpoint."""
    return Evidence(
        kind="derived", text=f"server answers {text}", file=runtime.url + runtime.endpoint
    )


def _tokens(n: int) -> str:
    return f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else str(n)


def bench_evidence(facts: HostFacts) -> tuple[list[Evidence], dict[str, float | int | str]]:
    """The measured accept-length curve (`check --bench`), greedy at the lowest concurrency,
    of the first kind of prompt the sweep sent (code by default; one curve, not a mix)."""
    result = facts.bench.value
    if result is None or not result.cells:
        return [], {}
    temp = min(result.temperatures)
    conc = min(result.concurrency)
    kind = next((c.prompts for c in result.cells if c.context), result.cells[0].prompts)
    cells = [
        c
        for c in result.cells
        if c.temperature == temp
        and c.concurrency == conc
        and c.prompts == kind
        and c.context
        and c.accept_length is not None
    ]
    if not cells:
        return [], {}
    curve = ", ".join(f"{c.accept_length:.1f} at {_tokens(c.context)}" for c in cells)
    where = "greedy" if temp == 0 else f"T={temp:g}"
    impact: dict[str, float | int | str] = {}
    window = result.window
    if window is not None:
        inside = [c.accept_length or 0.0 for c in cells if c.context <= window]
        beyond = [c.accept_length or 0.0 for c in cells if c.context > window]
        if inside:
            impact["bench_accept_length_inside_window"] = round(sum(inside) / len(inside), 3)
        if beyond:
            impact["bench_accept_length_beyond_window"] = round(sum(beyond) / len(beyond), 3)
    text = (
        f"bench on the live server ({kind} prompts, {where}, concurrency {conc}): "
        f"accept length {curve}"
    )
    return [Evidence(kind="derived", text=text)], impact


def argv_value(launch: LaunchArgs, flag: str) -> str | None:
    """The value of `flag` in the launch argv (`--flag V` or `--flag=V`), last one wins."""
    value: str | None = None
    argv = launch.argv
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith(flag + "="):
            value = arg.split("=", 1)[1]
    return value
