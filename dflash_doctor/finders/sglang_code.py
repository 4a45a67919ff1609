"""The host's installed SGLang files, read as text (never imported): srt/models/dflash.py and
the target class's module (its DFLASH capture hook)."""

from __future__ import annotations

import posixpath

from dflash_doctor.errors import DoctorError
from dflash_doctor.facts.capture_hooks import MODELS_PACKAGE, capture_support, hook_in_sources
from dflash_doctor.facts.models import CaptureHook, Fact, SGLangCode, TargetConfig
from dflash_doctor.facts.sglang_code import MAX_SOURCE_BYTES, parse_dflash_model_source
from dflash_doctor.finders.base import attempt
from dflash_doctor.transport.base import Transport


def find_sglang_code(t: Transport, host: str, site: str | None) -> Fact[SGLangCode]:
    """The installed srt/models/dflash.py beside the sglang dist-info (`site`)."""
    if site is None:
        # Not located (declared version, offline): the version table decides, silently.
        return Fact[SGLangCode]()
    where = posixpath.join(site, "sglang/srt/models/dflash.py")
    return attempt(
        host,
        where,
        lambda: parse_dflash_model_source(t.read_file(where, max_bytes=MAX_SOURCE_BYTES), where),
    )


def find_capture_hook(
    t: Transport, host: str, target: TargetConfig | None, version: str | None, site: str | None
) -> Fact[CaptureHook]:
    """The target class's module in the installed SGLang, read for
    `set_dflash_layers_to_capture` (checks/target_cannot_capture.py DFD129)."""
    if target is None or not target.architectures:
        return Fact[CaptureHook].missing(f"{host}: no target architecture known")
    if version is None or site is None:
        # No installed SGLang to read (a gate, a declared version): DFD129 answers from the
        # catalog's data, so this is no error to report (report.fact_errors).
        return Fact[CaptureHook].missing(
            f"{host}: the installed SGLang files were not found "
            "(no sglang-*.dist-info beside the server's Python)",
            out_of_reach=True,
        )
    arch = target.architectures[0]
    answer = capture_support(version, arch)
    if answer is None or answer.module is None:
        return Fact[CaptureHook].missing(
            f"{host}: no SGLang release in the catalog's data registers {arch}, "
            "so its module file is unknown"
        )

    def path_of(module: str) -> str:
        return posixpath.join(site, *module.split(".")) + ".py"

    def read(module: str) -> str | None:
        try:
            data = t.read_file(path_of(module), max_bytes=MAX_SOURCE_BYTES)
        except DoctorError:
            return None
        return data.decode("utf-8", "replace")

    module = f"{MODELS_PACKAGE}.{answer.module}"
    hook = hook_in_sources(arch, module, read, path_of(module))
    if hook is None:
        return Fact[CaptureHook].missing(
            f"{host}:{path_of(module)}: unreadable, or it registers no {arch}"
        )
    return Fact[CaptureHook].of(hook, source=hook.file)
