"""Host selection: the hosts a command line names, as HostSpecs with its settings applied."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from dflash_doctor.errors import UsageError

if TYPE_CHECKING:
    from dflash_doctor.commands.options import BenchArgs, CheckArgs, FixArgs, GateArgs, ProbeArgs
    from dflash_doctor.hosts import HostSpec

LOCAL_NAMES = ("local", "localhost")

# The host hints a command line can give: HostSpec key -> the option's field in the
# command's arguments. Each command passes those of its options it has (hints()).
HINT_OPTIONS = {
    "log_path": "log",
    "launch_file": "launch",
    "pid": "pid",
    "server_port": "port",
    "drafter_path": "drafter",
    "target_path": "target",
    "sglang_version": "sglang_version",
    "compose_service": "compose_service",
}


def hints(args: object, *, skip: tuple[str, ...] = ()) -> dict[str, object]:
    """The host hints `args` has options for, by HostSpec key (None = not given: override()
    drops it), less the `skip` keys."""
    return {
        key: getattr(args, name)
        for key, name in HINT_OPTIONS.items()
        if key not in skip and hasattr(args, name)
    }


def specs(
    hosts: list[str],
    demo: bool,
    host_dirs: list[Path],
    from_inventory: list[HostSpec],
    overrides: dict[str, object],
) -> list[HostSpec]:
    """The inventory's hosts, the demo, the recorded trees, then the named hosts, in that
    order, each with the command line's `overrides`."""
    from dflash_doctor.container_targets import is_container_target, parse_container_target
    from dflash_doctor.hosts import HostSpec, load_recorded_host

    found: list[HostSpec] = list(from_inventory)
    if demo:
        found.append(_demo_host())
    for d in host_dirs:
        found.append(load_recorded_host(str(d)))
    for h in hosts:
        if is_container_target(h):
            named: dict[str, str] = parse_container_target(h)
        else:
            named = {"name": h} if h in LOCAL_NAMES else {"name": h, "address": h}
        found.append(override(HostSpec.of(h), named))
    if not found:
        raise UsageError("give a HOST, --inventory FILE, --host-dir DIR or --demo")
    return [override(s, overrides) for s in found]


def override(
    spec: HostSpec, overrides: Mapping[str, object], *, clear: tuple[str, ...] = ()
) -> HostSpec:
    """`spec` with the command line's settings (None = not given), validated as host keys.

    The one way a command line changes a host: a misspelled key or a value of the wrong
    kind (`port="notaport"`) is a UsageError (exit 2) naming the host, not copied in.
    `clear` names keys set back to their default (None).
    """
    given = {k: v for k, v in overrides.items() if v is not None} | dict.fromkeys(clear)
    if not given or spec.invalid is not None:  # an unreadable host.yaml stays this host's error
        return spec
    return spec.override(**given)


def _listed(args: CheckArgs | GateArgs) -> list[HostSpec]:
    """The inventory's hosts `--limit` selects; YAML is loaded only when there is one."""
    if not args.inventory:
        return []
    from dflash_doctor.inventory import load_inventory

    return load_inventory(str(args.inventory)).select(args.limit)


def _demo_host(name: str | None = None) -> HostSpec:
    """A demo host (`--demo`, `--demo-name`): demo.py is imported only for one."""
    from dflash_doctor.demo import demo_host

    return demo_host() if name is None else demo_host(name)


def check_specs(args: CheckArgs) -> tuple[list[HostSpec], list[HostSpec]]:
    """The hosts to check, and those of them the inventory listed (they come first)."""
    listed = _listed(args)
    found = specs(
        args.hosts or [],
        args.demo,
        args.host_dir or [],
        listed + ([_demo_host(args.demo_name)] if args.demo_name else []),
        hints(args),
    )
    if args.limit and not args.inventory:
        raise UsageError("--limit needs --inventory")
    return found, listed


def probe_spec(args: ProbeArgs) -> HostSpec:
    """The one host to probe."""
    found = specs(
        [args.host] if args.host else [],
        args.demo,
        [args.host_dir] if args.host_dir else [],
        [],
        hints(args),
    )
    if len(found) != 1:
        raise UsageError("probe one host at a time")
    return found[0]


def bench_spec(args: BenchArgs) -> HostSpec:
    """The one host to bench."""
    (spec,) = specs([args.host], False, [], [], hints(args))
    return spec


def fix_specs(args: FixArgs, say: Callable[[str], None]) -> list[HostSpec]:
    """The hosts to fix; `--offline --launch FILE` alone names a file in a repository."""
    from dflash_doctor.hosts import HostSpec
    from dflash_doctor.inventory import load_inventory

    overrides = hints(args)
    if args.offline:
        overrides["offline"] = True
    if (
        args.offline
        and args.launch
        and not (args.hosts or args.demo or args.host_dir or args.inventory)
    ):
        # A launch file in a repository: the gate's counterpart.
        return [override(HostSpec.of(args.launch), overrides)]
    listed = load_inventory(str(args.inventory)).select(args.limit) if args.inventory else []
    demo = args.demo and not (args.apply or args.do_rollback)
    if args.demo and not demo:
        listed.append(_demo_copy(args.do_rollback, say))
    return specs(args.hosts or [], demo, args.host_dir or [], listed, overrides)


def _demo_copy(rollback: bool, say: Callable[[str], None]) -> HostSpec:
    """`fix --demo --apply` (what the demo itself suggests) works on a temporary copy of the
    demo host, never on the installed package's files; the user is told where it is."""
    import shutil
    import tempfile

    from dflash_doctor.demo import DEMO_DIR
    from dflash_doctor.hosts import load_recorded_host

    if rollback:
        raise UsageError(
            "--demo --rollback: each --demo --apply works on a new copy of the demo host; "
            "roll that copy back with --host-dir DIR --rollback"
        )
    copy = os.path.join(tempfile.mkdtemp(prefix="dflash-doctor-demo-"), "seed")
    shutil.copytree(DEMO_DIR, copy, symlinks=True)
    say(
        f"--demo --apply: working on a copy of the demo host in {copy} (the installed demo "
        f"is never edited); look at it with: dflash-doctor check --host-dir {copy}"
    )
    return load_recorded_host(copy, name="demo-seed")


def gate_specs(args: GateArgs) -> list[HostSpec]:
    """The inventory's hosts made offline, then one host per launch file, in that order."""
    from dflash_doctor.hosts import HostSpec

    # The gate's --launch names launch files, each a host of its own, not one host's file.
    overrides = {"offline": True, **hints(args, skip=("launch_file",))}
    found = [override(s, overrides, clear=("address",)) for s in _listed(args)]
    for path in args.launch or []:
        if not os.path.isfile(path):
            raise UsageError(f"{path}: no such launch file")
        given = {
            "launch_file": path,
            "labels": [x.strip() for x in (args.labels or "").split(",") if x.strip()],
            **overrides,
        }
        found.append(override(HostSpec.of(args.host or path), given))
    if not found:
        raise UsageError("give launch files or --inventory")
    return found


def pinned_version(args: GateArgs, found: list[HostSpec]) -> tuple[list[HostSpec], str | None]:
    """`found` with the SGLang version the repository pins where none was declared (an
    inventory host's own `sglang_version` stays), and the note saying where it came from;
    a repository pinning several versions is an input error."""
    from dflash_doctor.gate_inputs import Pin, chosen_pin, pinned_sglang

    undeclared = [s.hints.sglang_version is None for s in found]
    if args.sglang_version is not None or not any(undeclared):
        return found, None
    files = args.launch or []
    pin = chosen_pin(pinned_sglang(str(args.root), files), files, str(args.root))
    if isinstance(pin, str):
        raise UsageError(f"{pin}: pass --sglang-version X.Y.Z")
    if not isinstance(pin, Pin):
        return found, None
    pinned = [
        override(s, {"sglang_version": pin.version}) if bare else s
        for s, bare in zip(found, undeclared, strict=True)
    ]
    return pinned, f"SGLang {pin.version} from {pin.where} (--sglang-version overrides it)"
