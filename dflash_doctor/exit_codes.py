"""The documented exit codes (README "Exit codes"): here so that the CLI's way out imports
nothing heavy (report.py re-exports them)."""

from __future__ import annotations

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_FIX_FAILED = 4
EXIT_INTERNAL = 5
EXIT_INTERRUPTED = 130
