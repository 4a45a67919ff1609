"""Scripts the tool ships to hosts and runs there with `python -c`: read once, when needed."""

from __future__ import annotations

from functools import cache
from pathlib import Path

PACKAGE_DIR = Path(__file__).parent

# Every package file that runs on hosts (all of on_host/, and nothing else), with the oldest
# Python it must run under there: the host's system python3 (3.8 and newer: Ubuntu 20.04,
# RHEL 8's python38) for the bundle, the log filter and the HTTP client; the server's own
# interpreter (SGLang's oldest supported Python is 3.8 too) for the native parse and the
# probe. tests/test_host_side_python.py checks each against its floor with vermin (every
# machine), runs them under a real interpreter of that version where one is installed, and
# fails on a module in on_host/ that this list lacks.
HOST_SCRIPTS: dict[str, tuple[int, int]] = {
    "on_host/bundle_script.py": (3, 8),
    "on_host/log_filter.py": (3, 8),
    "on_host/server_http.py": (3, 8),
    "on_host/server_address.py": (3, 8),
    "on_host/host_exec_rules.py": (3, 8),
    "on_host/sglang_args.py": (3, 8),
    "on_host/attention_probe.py": (3, 8),
    # fd-relative writes, backups and removals on SSH hosts, under the host's system python3
    "on_host/safe_files.py": (3, 8),
}


@cache
def script_source(relative: str) -> str:
    """The text of a stdlib(-and-torch) script inside the package, e.g. on_host/log_filter.py."""
    if relative not in HOST_SCRIPTS:
        # One list of what runs on hosts, so that none escapes its oldest-Python test.
        raise KeyError(f"{relative} is not in shipped.HOST_SCRIPTS")
    return (PACKAGE_DIR / relative).read_text(encoding="utf-8")
