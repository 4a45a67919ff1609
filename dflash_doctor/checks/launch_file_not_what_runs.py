"""DFD141: the launch file says one thing, the running server (its own /server_info) another."""

from __future__ import annotations

from dflash_doctor.checks.base import Evidence, Finding, Fix, Severity, Skip, check
from dflash_doctor.checks.views import flag_evidence, running_server, runtime_evidence
from dflash_doctor.facts.models import HostFacts, LaunchArgs
from dflash_doctor.on_host.sglang_args import SGLANG_FIELDS, WINDOW_FLAGS

# server_info key -> (LaunchArgs field, flag), the fields the table marks `compared`.
# Compared only where the file sets the flag: an unset flag is resolved by SGLang's
# defaults and hooks, which the file cannot show. The window is compared always: unset in
# the file means no window.
COMPARED = tuple(
    (key, f.field, f.flag) for key, f in SGLANG_FIELDS.items() if f.compared and f.field
)
WINDOW_KEYS = tuple(key for key, f in SGLANG_FIELDS.items() if f.flag in WINDOW_FLAGS)


def _same(file_value: object, running: object) -> bool:
    if isinstance(file_value, str) and isinstance(running, str):
        return file_value.rstrip("/").upper() == running.rstrip("/").upper()
    if isinstance(file_value, int | float) and isinstance(running, int | float):
        return float(file_value) == float(running)
    return file_value == running


def launch_file_of(facts: HostFacts) -> LaunchArgs:
    if facts.launch_file.value is not None:
        return facts.launch_file.value
    launch = facts.launch.value
    if launch is not None and launch.kind in ("script", "systemd", "compose"):
        return launch
    raise Skip("no launch file to compare with the running server")


@check("DFD141", "launch-file-not-what-runs", Severity.WARNING)
def launch_file_not_what_runs(facts: HostFacts) -> list[Finding]:
    """The launch file is not what the running server runs.

    **What it finds.** The running server's own resolved arguments (`/server_info`, asked
    on the host) differ from what the launch file sets: its context length, speculative
    settings, draft window, page size, backends, memory or parallel settings. Only flags
    the file sets are compared (an unset flag is left to SGLang's defaults and hooks); the
    draft window is compared always.

    **Why it hurts.** Every finding read from the file describes a server that is not
    running, and the next restart (a reboot, a crash, `systemctl restart`) silently changes
    the server: the numbers measured today are not the numbers after the restart.

    **Example.** `serve.sh` sets `--speculative-draft-window-size 2048`, but the server was
    started by hand without it: `/server_info` answers `speculative_draft_window_size: null`.

    **How to fix.** Decide which is right, then either relaunch from the file (`fix
    --apply` does so) or bring the file in line with the running server.

    **Fix safety.** Manual: the tool cannot know which side is intended.

    **Versions.** `/get_server_info` and `/server_info` are served by 0.5.11..0.5.23
    (`srt/entrypoints/http_server.py` 0.5.11:621,631, 0.5.14:678,688, 0.5.23:853,863); the
    top level is `dataclasses.asdict(server_args)` to 0.5.18 (`srt/entrypoints/http_server.py`
    0.5.11:632-645) and `server_args.resolved_dict()` from 0.5.19
    (`srt/entrypoints/http_server.py` 0.5.19:812-840): the resolved values.
    """
    runtime = running_server(facts)
    launch = launch_file_of(facts)
    diffs: list[tuple[str, str, object, object]] = []
    for key, attr, flag in COMPARED:
        file_value = getattr(launch, attr)
        if file_value is None or key not in runtime.args:
            continue
        if (
            attr == "tp_size"
            and flag not in launch.flags_present
            and "--tp" not in launch.flags_present
        ):
            continue
        if not _same(file_value, runtime.args[key]):
            diffs.append((key, flag, file_value, runtime.args[key]))
    window_key = next((k for k in WINDOW_KEYS if k in runtime.args), None)
    if window_key is not None and not _same(launch.draft_window_size, runtime.args[window_key]):
        flag = launch.draft_window_flag or "--speculative-draft-window-size"
        diffs.append((window_key, flag, launch.draft_window_size, runtime.args[window_key]))
    if not diffs:
        return []
    evidence: list[Evidence] = []
    for key, flag, file_value, running in diffs:
        shown = f"{flag} {file_value}" if file_value is not None else f"{flag} not set"
        evidence.append(flag_evidence(launch, flag, shown))
        evidence.append(runtime_evidence(runtime, f"{key}={running!r}"))
    names = ", ".join(d[0] for d in diffs)
    return [
        launch_file_not_what_runs.finding(
            title=f"{launch.source} is not what runs ({names})",
            message=(
                f"The running server's resolved arguments differ from {launch.source} in "
                f"{len(diffs)} setting(s): {names}. The findings on the file describe a "
                "server that is not running, and the next restart changes the server."
            ),
            evidence=evidence,
            impact={"settings_differing": len(diffs)},
            fixes=[
                Fix(
                    action="manual",
                    note=f"relaunch from {launch.source}, or set in it what runs: "
                    + ", ".join(f"{d[1]} {d[3]}" for d in diffs),
                )
            ],
        )
    ]
