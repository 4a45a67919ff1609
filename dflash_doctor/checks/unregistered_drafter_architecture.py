"""DFD162: the drafter's architecture is one the host's SGLang does not register."""

from __future__ import annotations

from dflash_doctor.checks.base import Evidence, Finding, Fix, Severity, Skip, check
from dflash_doctor.checks.views import config_evidence, drafter, require_dflash, version_evidence
from dflash_doctor.facts.capture_hooks import capture_support, first_registering, release_key
from dflash_doctor.facts.models import HostFacts

# srt/models/registry.py 0.5.11:48-51, 0.5.23:63-66 when no Transformers fallback applies.
REFUSAL = "Model architectures {archs} are not supported for now."


@check(
    "DFD162",
    "drafter-architecture-not-registered",
    Severity.ERROR,
    needs=("drafter",),
    needs_any=("sglang_version",),
)
def drafter_architecture_not_registered(facts: HostFacts) -> list[Finding]:
    """The drafter's `architectures` name a class the host's SGLang does not register.

    **What it finds.** None of the drafter's `architectures` is a model class SGLang
    registers: where the host's installed `srt/models/dflash.py` can be read, its
    `EntryClass` list (a patched build answers for itself; classes registered by another
    module, such as `dspark.py` or `lilicorr.py`, come from the per-release data), else the
    per-release registry generated from the wheels (`dflash_doctor/data/dflash_capture.json`,
    `scripts/gen_dflash_capture.py`). DFlash 2 (`DFlash2DraftModel`) is registered from
    0.5.19, `DFlash2BeamDraftModel` and `MiniMaxDFlash2DraftModel` from 0.5.23; NeMo's
    `Qwen3DFlashDraftModel` by no release.

    **Why it hurts.** SGLang looks the draft model up by class name
    (`import_model_classes`); an unknown name goes to the Transformers backend
    (`resolve_transformers_arch`), which is no DFlash drafter, or stops with `Model
    architectures [...] are not supported for now.`. Either way DFLASH does not serve
    this drafter.

    **Example.** A DFlash 2 drafter (`"architectures": ["DFlash2DraftModel"]`) with
    SGLang 0.5.18.

    **How to fix.** Upgrade SGLang to the first release that registers the class, when
    one does; otherwise use a drafter exported for SGLang (`DFlashDraftModel`).

    **Fix safety.** An upgrade changes more than this; re-run the whole check after it.

    **Versions.** Registry: srt/models/registry.py 0.5.11:93-123, 0.5.23:118-148; the
    fallback: model_loader/utils.py 0.5.11:215-220, 0.5.23:224-231. EntryClass:
    models/dflash.py 0.5.11:399, 0.5.19:1146-1151, 0.5.23:1317-1324.
    """
    require_dflash(facts)
    cfg = drafter(facts)
    if not cfg.architectures:
        raise Skip("the drafter config lists no architectures")
    version = facts.sglang_version.value
    answers = {a: capture_support(version, a) if version else None for a in cfg.architectures}
    code = facts.sglang_code.value
    if code is not None and code.entry_classes is not None:
        if set(cfg.architectures) & set(code.entry_classes):
            return []
        elsewhere = [a for a, x in answers.items() if x and x.known and x.module != "dflash"]
        if elsewhere:
            return []  # registered by another module (dspark.py, lilicorr.py, ...)
        source = f"the host's installed {code.path} (EntryClass: {', '.join(code.entry_classes)})"
        where = Evidence(
            kind="version",
            text=f"EntryClass = {code.entry_classes}",
            file=code.path,
            line=code.entry_line,
        )
    else:
        if not version or any(x is None for x in answers.values()):
            raise Skip("SGLang version unknown or older than the data (0.5.11)")
        if any(x is not None and x.known for x in answers.values()):
            return []
        release = next(x.release for x in answers.values() if x is not None)
        source = f"the {release} wheel's registry data"
        where = version_evidence(facts)
    nexts = [n for n in (first_registering(version or "0", a) for a in cfg.architectures) if n]
    fixes = (
        [Fix(action="upgrade_sglang", value=min(nexts, key=release_key))]
        if nexts
        else [Fix(action="manual", note="use a drafter exported for SGLang (DFlashDraftModel)")]
    )
    return [
        drafter_architecture_not_registered.finding(
            title=f"SGLang {version or '(installed)'} does not register the drafter class "
            f"{cfg.architectures[0]}",
            message=(
                f"No model class named {cfg.architectures} is registered ({source}): SGLang "
                "falls back to the Transformers backend, which is no DFlash drafter, or "
                f"stops with `{REFUSAL.format(archs=cfg.architectures)}`"
            ),
            evidence=[
                config_evidence(cfg, "architectures", f"architectures={cfg.architectures}"),
                where,
            ],
            fixes=fixes,
        )
    ]
