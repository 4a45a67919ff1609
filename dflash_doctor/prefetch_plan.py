"""What a gathering will ask a remote host, told to the bundle that answers it in one go.

`prefetching(spec, transport)` wraps a remote transport in `PrefetchTransport` with the
config that `on_host/bundle_script.py` follows: the same paths, limits, commands and
environment names that the finders (`finders/`) use, taken from where they are defined. A local
transport is returned as it is: there a read costs no round trip.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any, cast

from dflash_doctor.facts.launch import FLAG_SPECS
from dflash_doctor.finders.pids import PGREP_ARGV
from dflash_doctor.hosts import HostSpec
from dflash_doctor.on_host import host_exec_rules as rules
from dflash_doctor.transport.base import Transport

# The model flags whose values name the target and the drafter, as facts/launch.py FLAG_SPECS:
# 0.5.11 srt/server_args.py:4191-4192 (`--model-path`, alias `--model`) and :5371
# (`--speculative-draft-model-path`); 0.5.23 derives flags from field names
# (srt/arg_groups/arg_utils.py:289; model_path with alias `--model` at :29;
# speculative_draft_model_path in srt/arg_groups/field_order.py:266). The bundle also takes
# their argparse abbreviations.
MODEL_FLAGS = tuple(
    flag
    for spec in FLAG_SPECS
    if spec.dest in ("model_path", "draft_model_path")
    for flag in spec.flags
)
# Values of these environment names leave the host besides finders/process.ENV_KEYS and the
# catalog's (facts/environment.py): SGLang's own settings, unless the name looks secret
# (redact.py), so that a check reading one more of them still sees it.
ENV_VALUE_PREFIXES = ("SGLANG_",)
# Files of the installed sglang package that gathering reads beside its dist-info.
SITE_FILES = ("sglang/srt/models/dflash.py",)
LOG_FILTER_SCRIPT = "on_host/log_filter.py"
# Shipped beside the bundle: host_exec's rules (which interpreter may run, as whom) and the
# server address and request of the HTTP client, so the bundle asks what gathering asks.
BUNDLE_MODULES = {
    "host_exec_rules": "on_host/host_exec_rules.py",
    "server_address": "on_host/server_address.py",
    # The HTTP client, run in the bundle's own process (live hosts only).
    "server_http": "on_host/server_http.py",
}
# Commands a live host is asked during gathering whatever it runs: answered from the bundle
# (exact argv). `id -u`: whose privilege the tool has there (host interpreters' safety).
LIVE_COMMANDS = (tuple(rules.ID_ARGV),)


@cache
def arch_modules() -> dict[str, list[str]]:
    """Architecture -> the `sglang.srt.models` modules that define it in some release
    (the catalog's data, facts/capture_hooks.py): the files the capture-hook finder reads."""
    from dflash_doctor.facts.capture_hooks import _data

    known = cast(dict[str, list[list[str]]], _data()["known"])
    return {arch: sorted({str(r[0]) for r in runs}) for arch, runs in known.items()}


def model_side_files() -> list[list[Any]]:
    """[name, byte limit] of the files finders/drafter_files.py reads beside a config.json."""
    from dflash_doctor.facts.drafter_files import (
        INDEX_FILE,
        MAX_INDEX_BYTES,
        MAX_SIDECAR_BYTES,
        SIDECAR_FILE,
    )

    return [[INDEX_FILE, MAX_INDEX_BYTES], [SIDECAR_FILE, MAX_SIDECAR_BYTES]]


@cache
def argv_redaction() -> dict[str, Any]:
    """redact.redact_argv's rule as data, for the bundle: it asks SGLang to parse the launch
    as gathering does, with secret values already hidden (`--api-key ***`), so that the
    answer is the one the doctor asks for (and no secret is handed to a parse whose
    answer leaves the host). Patterns and flags only: re in any Python 3.8+ reads them."""
    from dflash_doctor import redact as r

    def pattern(p: re.Pattern[str]) -> list[Any]:
        return [p.pattern, int(p.flags & re.IGNORECASE)]

    return {
        "hidden": r.REDACTED,
        "assign": pattern(r._ASSIGN),
        "flag": pattern(r._FLAG),
        "reference": pattern(r._REFERENCE),
        "secret_name": pattern(r._SECRET_NAME),
        "not_secret": sorted(r._NOT_SECRET),
        "max_name": r._MAX_NAME,
        # _shapes: each match replaced by its group 1 (or nothing), the mark, then the tail.
        "shapes": [
            [*pattern(r._TOKEN_SHAPES), 0, ""],
            [*pattern(r._QUERY_SECRET), 1, ""],
            [*pattern(r._URL_PASSWORD), 1, "@"],
        ],
    }


def bundle_config(spec: HostSpec) -> dict[str, Any]:
    """The settings the bundle script gathers `spec`'s host with, in one round trip."""
    # A live host's settings: a recorded tree's transport puts its root over them, a Docker
    # container's drops nvidia-smi (transport `bundle_settings`).
    return {**_host_settings(spec), **_helper_settings(spec)}


def _host_settings(spec: HostSpec) -> dict[str, Any]:
    """Where to look on the host: its process, launch, models, environment, files."""
    # The finders' own settings, taken from where they are defined.
    from dflash_doctor.facts.capture_hooks import MODELS_PACKAGE
    from dflash_doctor.facts.environment import CATALOG_ENV_NAMES
    from dflash_doctor.facts.launch import _LAUNCHERS
    from dflash_doctor.facts.vllm_launch import VLLM_ENV_NAMES
    from dflash_doctor.finders.plan import reads
    from dflash_doctor.finders.process import ENV_KEYS
    from dflash_doctor.redact import SECRET_WORDS
    from dflash_doctor.transport.base import BOUNDED_SCRIPT, HOST_GRACE_S

    return {
        "root": "/",
        "recorded": False,
        "pid": spec.hints.pid,
        "pgrep": list(PGREP_ARGV) if spec.hints.pid is None else None,
        "launchers": list(_LAUNCHERS),
        "model_flags": list(MODEL_FLAGS),
        "models": [m for m in (spec.hints.drafter_path, spec.hints.target_path) if m],
        "hf_home": spec.hints.hf_home,
        "python": spec.hints.python,
        "launch_file": spec.hints.launch_file,
        "log_path": spec.hints.log_path,
        "env_values": [*ENV_KEYS, *CATALOG_ENV_NAMES, *VLLM_ENV_NAMES],
        "env_value_prefixes": list(ENV_VALUE_PREFIXES),
        "secret_name": SECRET_WORDS,
        "bounded_script": BOUNDED_SCRIPT,
        "host_grace": HOST_GRACE_S,
        "site_files": list(SITE_FILES),
        "model_side_files": model_side_files(),
        "models_package": MODELS_PACKAGE,
        "arch_modules": arch_modules(),
        # The hub caches, site directories and process files the finders read (data).
        "reads": reads(),
        # finders/vllm.py: where no SGLang server is found, its reads and HTTP questions.
        "vllm": vllm_settings(),
    }


def vllm_settings() -> dict[str, Any]:
    """What finders/vllm.py asks a live host: its pgrep, the command lines it reads, how it
    tells vLLM's server, and the HTTP operations it asks that server (with vLLM's port)."""
    from dflash_doctor.facts.vllm_launch import API_SERVER_MODULE, VLLM_DEFAULT_PORT
    from dflash_doctor.finders.vllm import (
        MAX_CMDLINE_BYTES,
        VLLM_PGREP_ARGV,
        VLLM_RUNTIME_OPS,
        VLLM_RUNTIME_TIMEOUT_S,
    )

    return {
        "pgrep": list(VLLM_PGREP_ARGV),
        "cmdline_bytes": MAX_CMDLINE_BYTES,
        "module": API_SERVER_MODULE,
        "module_file": "vllm/entrypoints/openai/api_server.py",
        "port": VLLM_DEFAULT_PORT,
        "ops": VLLM_RUNTIME_OPS,
        "timeout": VLLM_RUNTIME_TIMEOUT_S,
    }


def _helper_settings(spec: HostSpec) -> dict[str, Any]:
    """The commands and helper scripts the bundle runs there, with their limits."""
    from dflash_doctor.facts.gpus import NVIDIA_SMI_ARGV
    from dflash_doctor.finders.log import REMOTE_FILTER_MIN_BYTES
    from dflash_doctor.finders.process import ENV_KEYS
    from dflash_doctor.finders.server_api import HTTP_CLIENT_HEAD
    from dflash_doctor.finders.version import VERSION_QUERY
    from dflash_doctor.on_host.server_address import RUNTIME_OPS, RUNTIME_TIMEOUT_S
    from dflash_doctor.shipped import script_source
    from dflash_doctor.transport.prefetch import LIMITS

    return {
        "log_filter": {
            "script": LOG_FILTER_SCRIPT,
            "source": script_source(LOG_FILTER_SCRIPT),
            "min_bytes": REMOTE_FILTER_MIN_BYTES,
            "timeout": 600,
        },
        "nvidia_smi": list(NVIDIA_SMI_ARGV),
        "commands": [list(c) for c in LIVE_COMMANDS],
        "gpu_capture": None,
        "limits": dict(LIMITS),
        "modules": {name: script_source(path) for name, path in BUNDLE_MODULES.items()},
        # Vet the system python3 for the log filter when the log is filtered here.
        "log_filter_python": True,
        # finders/launch.ask_sglang: SGLang's own parse of the launch, with the server's Python.
        "native": {
            "source": script_source("on_host/sglang_args.py"),
            "env_keys": list(ENV_KEYS),
            "redact": argv_redaction(),
        },
        # finders/version.run_version_query, unless the version is declared.
        "version_query": VERSION_QUERY if not spec.hints.sglang_version else None,
        # facts/runtime.read_runtime: what the live server answers over HTTP.
        "server_http": {
            "head": [*HTTP_CLIENT_HEAD, script_source("on_host/server_http.py")],
            "ops": RUNTIME_OPS,
            "timeout": RUNTIME_TIMEOUT_S,
            "health_url": spec.fix.health_url,
        },
    }


def prefetching(spec: HostSpec, transport: Transport) -> Transport:
    """The transport a gathering reads through: bundled where each question costs a round
    trip or an exec (the transport says so: another machine, a container)."""
    if not transport.bundles:
        return transport
    return transport.prefetched(bundle_config(spec))
