"""The one way tests run `dflash-doctor` as a user does: a fresh interpreter on this checkout.

The child sees a known environment, not the test runner's: PATH (the system's tools only,
unless a test puts its own first), PYTHONPATH (this checkout), COLUMNS (rich wraps at it;
None leaves it unset: 80 when stdout is not a terminal) and whatever `env` adds. stdin is
/dev/null, so a command that would ask a question never waits on the runner's terminal.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from tests.conftest import REPO

DOCTOR = (sys.executable, "-m", "dflash_doctor")
SYSTEM_PATH = "/usr/bin:/bin"


def doctor_env(
    columns: int | None = 120, path: str = SYSTEM_PATH, env: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The child's whole environment (see the module docstring)."""
    base = {"PATH": path, "PYTHONPATH": str(REPO)}
    if columns is not None:
        base["COLUMNS"] = str(columns)
    return base | dict(env or {})


def doctor(
    *args: str,
    cwd: Path | str = REPO,
    columns: int | None = 120,
    timeout: float = 120,
    path: str = SYSTEM_PATH,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """`dflash-doctor ARGS...`, its output captured as text."""
    return subprocess.run(
        [*DOCTOR, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env=doctor_env(columns, path, env),
    )
