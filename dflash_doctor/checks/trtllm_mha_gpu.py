"""Checks that the attention backends asked for can run on the host's GPUs."""

from __future__ import annotations

from dflash_doctor.checks.base import Evidence, Finding, Fix, Severity, Skip, Unjudged, check
from dflash_doctor.checks.views import flag_evidence, require_dflash, version_facts
from dflash_doctor.facts.gpu_arch import arch_label, capability_major
from dflash_doctor.facts.models import HostFacts, LaunchArgs
from dflash_doctor.sglang_versions import Version

TRTLLM = "trtllm_mha"
# The prefill side of trtllm_mha, per version: (since, capability majors, SGLang's refusal).
# 0.5.11-0.5.18: server_args.py (0.5.11:2629-2632, 0.5.18:6016-6019) `is_sm100_supported()`.
# 0.5.19-0.5.23: arg_groups/attention_hook.py (0.5.19:133-139, 0.5.23:200-206) SM90/100/120.
PREFILL_RULES: tuple[tuple[Version, frozenset[int], str], ...] = (
    (
        (0, 5, 11),
        frozenset({10}),
        "TRTLLM MHA backend for prefill is only supported on Blackwell GPUs (SM100). "
        "Please use a different prefill backend.",
    ),
    (
        (0, 5, 19),
        frozenset({9, 10, 12}),
        "TRTLLM MHA backend for prefill requires Hopper (SM90), Blackwell (SM100), or SM120 "
        "GPUs. Please use a different prefill backend.",
    ),
)
# The decode side, every release
# (0.5.11 server_args.py:2640-2645, 0.5.23 arg_groups/attention_hook.py:222-227).
DECODE_MAJORS = frozenset({9, 10, 12})
DECODE_REFUSAL = (
    "TRTLLM MHA backend for decode is only supported on Hopper (SM90), Blackwell (SM100) "
    "and (SM120) GPUs. Please use a different decode backend."
)
# Page sizes trtllm_mha keeps; any other is changed to 64 with "TensorRT-LLM MHA only
# supports page_size of ..., changing page_size from N to 64." (0.5.11 server_args.py:2647-2651,
# 0.5.16 arg_groups/overrides.py:1732-1741; 0.5.17 overrides.py:2081-2094 adds 128 and counts
# the draft backend too; 0.5.23 overrides.py:1174-1187).
PAGE_RULES: tuple[tuple[Version, frozenset[int], bool], ...] = (
    ((0, 5, 11), frozenset({16, 32, 64}), False),
    ((0, 5, 17), frozenset({16, 32, 64, 128}), True),
)


def _rule(
    rules: tuple[tuple[Version, frozenset[int], str], ...], v: Version | None
) -> tuple[frozenset[int], str] | None:
    if v is None:
        return None
    chosen = None
    for since, majors, text in rules:
        if v >= since:
            chosen = (majors, text)
    return chosen


def _logged(fields: dict[str, str], key: str) -> str | None:
    """A logged server arg, None where the dump shows it unset (`None`, unquoted)."""
    value = fields.get(key)
    return None if value in (None, "None") else value


def _backends(
    facts: HostFacts,
) -> tuple[str | None, str | None, str | None, int | None, list[Evidence]]:
    """(prefill, decode, draft backend, page size) the server asks for, with the flags."""
    launch = facts.launch.value
    evidence: list[Evidence] = []
    if launch is not None:
        base = launch.attention_backend
        prefill = launch.prefill_attention_backend or base
        decode = launch.decode_attention_backend or base
        for flag, value in (
            ("--attention-backend", launch.attention_backend),
            ("--prefill-attention-backend", launch.prefill_attention_backend),
            ("--decode-attention-backend", launch.decode_attention_backend),
            ("--speculative-draft-attention-backend", launch.draft_attention_backend),
        ):
            if value == TRTLLM:
                evidence.append(flag_evidence(launch, flag, f"{flag} {value}"))
        return prefill, decode, launch.draft_attention_backend, launch.page_size, evidence
    log = facts.log.value
    if log is not None and log.server_args is not None:
        fields = log.server_args_fields
        base = _logged(fields, "attention_backend")
        prefill = _logged(fields, "prefill_attention_backend") or base
        decode = _logged(fields, "decode_attention_backend") or base
        page = fields.get("page_size")
        if TRTLLM in (prefill, decode):
            evidence.append(
                Evidence(
                    kind="log",
                    text=f"server_args attention_backend={base}, "
                    f"prefill_attention_backend={prefill}, decode_attention_backend={decode}",
                    file=log.path,
                    line=log.server_args.line,
                )
            )
        draft = fields.get("speculative_draft_attention_backend")
        return prefill, decode, draft, int(page) if page and page.isdigit() else None, evidence
    raise Unjudged("no launch command or logged server args to read the attention backends from")


@check(
    "DFD123",
    "trtllm-mha-on-unsupported-gpu",
    Severity.ERROR,
    needs=("gpus",),
    needs_any=("launch", "log"),
)
def trtllm_mha_gpu(facts: HostFacts) -> list[Finding]:
    """`trtllm_mha` attention is asked for on GPUs whose architecture SGLang refuses for it.

    **What it finds.** The prefill backend (`--prefill-attention-backend`, else
    `--attention-backend`) or the decode backend is `trtllm_mha`, and an nvidia-smi GPU
    name is an architecture the host's SGLang refuses for that side: prefill needs
    Blackwell SM100 (B200/GB200/B300) up to 0.5.18, and Hopper, SM100 or SM120 from
    0.5.19; decode needs Hopper, SM100 or SM120 in every release. It also reports, as
    info, the page size SGLang imposes with `trtllm_mha`.

    **Why it hurts.** SGLang stops at startup with `TRTLLM MHA backend for prefill is only
    supported on Blackwell GPUs (SM100). Please use a different prefill backend.` (or the
    decode / 0.5.19+ text): a relaunch leaves the host without a server. Where it runs,
    a page size other than 16/32/64 (and 128 from 0.5.17) is changed to 64, which also
    page-aligns the DFLASH draft window (up to 63 extra draft tokens).

    **Example.** `--attention-backend trtllm_mha` copied from a B200 recipe to an H100
    host on 0.5.16.

    **How to fix.** Use `fa3` (Hopper) or `flashinfer` as the attention backend, or run
    on a GPU the version supports.

    **Fix safety.** Changing the backend changes kernels, not results; CUDA-graph and
    memory settings tuned for `trtllm_mha` may need a re-check.

    **Versions.** Prefill on SM100 only: 0.5.11-0.5.18 (`srt/server_args.py`
    0.5.11:2629-2632, 0.5.18:6016-6019); SM90/SM100/SM120: 0.5.19-0.5.23
    (`arg_groups/attention_hook.py` 0.5.19:133-139, 0.5.23:200-206). Decode SM90/SM100/SM120
    in every release (`srt/server_args.py` 0.5.11:2640-2645; `arg_groups/attention_hook.py`
    0.5.23:222-227). Page size forced to 64 from 16/32/64: 0.5.11-0.5.16
    (`srt/server_args.py` 0.5.11:2647-2651; `arg_groups/overrides.py` 0.5.16:1732-1741);
    from 16/32/64/128, draft backend included: 0.5.17-0.5.23 (`arg_groups/overrides.py`
    0.5.17:2081-2094, 0.5.23:1174-1187).
    """
    require_dflash(facts)
    prefill, decode, draft, page, evidence = _backends(facts)
    draft_uses = draft == TRTLLM
    if TRTLLM not in (prefill, decode) and not draft_uses:
        return []
    gpus = facts.gpus.value or []
    names = sorted({g.name for g in gpus})
    unknown = [n for n in names if capability_major(n) is None]
    vf = version_facts(facts)
    version = vf.version if vf is not None else None
    gpu_evidence = Evidence(
        kind="derived",
        text="GPUs: " + ", ".join(f"{n} ({arch_label(n)})" for n in names),
        file=facts.gpus.source,
    )
    findings: list[Finding] = []
    backend = "fa3" if all(capability_major(n) == 9 for n in names) else "flashinfer"
    launch = facts.launch.value
    if unknown and TRTLLM in (prefill, decode):
        raise Skip(f"cannot tell the architecture of GPU {unknown[0]!r} from its name")
    sides: list[tuple[str, frozenset[int] | None, str]] = []
    if prefill == TRTLLM:
        rule = _rule(PREFILL_RULES, version)
        sides.append(("prefill", rule[0] if rule else None, rule[1] if rule else ""))
    if decode == TRTLLM:
        sides.append(("decode", DECODE_MAJORS, DECODE_REFUSAL))
    for side, majors, refusal in sides:
        bad = [n for n in names if majors is not None and capability_major(n) not in majors]
        if majors is None:
            # Version unknown: SM100 is fine everywhere, SM90/SM120 only from 0.5.19.
            bad = [n for n in names if capability_major(n) not in (9, 10, 12)]
            maybe = [n for n in names if capability_major(n) in (9, 12)]
            if maybe and not bad:
                findings.append(
                    trtllm_mha_gpu.finding(
                        severity=Severity.WARNING,
                        title=f"trtllm_mha prefill on {maybe[0]} needs SGLang 0.5.19 or newer",
                        message="The SGLang version is unknown; up to 0.5.18 trtllm_mha "
                        "prefill runs on Blackwell SM100 only and the server refuses to start.",
                        evidence=[*evidence, gpu_evidence],
                        fixes=[_side_fix(launch, side, backend)],
                    )
                )
                continue
            refusal = PREFILL_RULES[-1][2]
        if bad:
            findings.append(
                trtllm_mha_gpu.finding(
                    title=f"trtllm_mha {side} cannot run on {bad[0]} ({arch_label(bad[0])})",
                    message=f"SGLang refuses to start: `{refusal}`",
                    evidence=[*evidence, gpu_evidence],
                    fixes=[_side_fix(launch, side, backend)],
                )
            )
    if not findings:
        findings = _page_change(version, TRTLLM in (prefill, decode), draft_uses, page, evidence)
    return findings


def _side_fix(launch: LaunchArgs | None, side: str, backend: str) -> Fix:
    """Change the flag that asked for trtllm_mha: the split one when it was given."""
    split = launch is not None and getattr(launch, f"{side}_attention_backend") == TRTLLM
    flag = f"--{side}-attention-backend" if split else "--attention-backend"
    return Fix(action="set_flag", flag=flag, value=backend)


def _page_change(
    version: Version | None,
    target_uses: bool,
    draft_uses: bool,
    page: int | None,
    evidence: list[Evidence],
) -> list[Finding]:
    """The info finding when SGLang changes the page size to one trtllm_mha keeps."""
    page_rule = None
    if version is not None:
        for since, sizes, counts_draft in PAGE_RULES:
            if version >= since:
                page_rule = (sizes, counts_draft)
    if page_rule is None:
        return []
    sizes, counts_draft = page_rule
    applies = target_uses or (draft_uses and counts_draft)
    current = page if page is not None else 1
    if not applies or current in sizes:
        return []
    # SGLang's own words: "16, 32 or 64" (srt/server_args.py 0.5.11:2647-2651), "16, 32, 64
    # or 128" (arg_groups/overrides.py 0.5.17:2081-2094, 0.5.23:1174-1187).
    *head, last = sorted(sizes)
    listed = f"{', '.join(map(str, head))} or {last}"
    return [
        trtllm_mha_gpu.finding(
            severity=Severity.INFO,
            title=f"trtllm_mha changes the page size from {current} to 64",
            message=(
                f"SGLang logs `TensorRT-LLM MHA only supports page_size of {listed}, "
                f"changing page_size from {current} to 64.`; the KV cache and the DFLASH "
                "draft window are page-aligned to 64 tokens."
            ),
            evidence=evidence,
            impact={"page_size": 64},
        )
    ]
