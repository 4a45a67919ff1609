"""Defaults the command line shows in --help: here so that showing them imports nothing."""

from __future__ import annotations

from enum import StrEnum

DEFAULT_HOST_TIMEOUT = 120.0
DEFAULT_JOBS = 16
# The probe's own default too (probes/attention_probe.DEFAULT_BUDGET_MIB; a test pins it).
DEFAULT_BUDGET_MIB = 4096
# The probe's agreement run length (probes/attention_probe.DEFAULT_AGREEMENT_TOKENS says why).
DEFAULT_AGREEMENT_TOKENS = 256
# `dflash-doctor bench` (dflash_doctor/bench/matrix.py says why each is what it is).
DEFAULT_MAX_NEW_TOKENS = 128
DEFAULT_MAX_TOTAL_TOKENS = 4_000_000
DEFAULT_SEED = "dflash-doctor"


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return {"error": 3, "warning": 2, "info": 1}[self.value]
