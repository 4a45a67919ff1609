"""Defaults the command line shows in --help: here so that showing them imports nothing."""

from __future__ import annotations

from enum import StrEnum

DEFAULT_HOST_TIMEOUT = 120.0
DEFAULT_JOBS = 16
# The probe's own default too (on_host/attention_probe.DEFAULT_BUDGET_MIB; a test pins it).
DEFAULT_BUDGET_MIB = 4096
# The probe's agreement run length (on_host/attention_probe.DEFAULT_AGREEMENT_TOKENS says why).
DEFAULT_AGREEMENT_TOKENS = 256
# `dflash-doctor bench` (dflash_doctor/bench/matrix.py says why each is what it is).
DEFAULT_MAX_NEW_TOKENS = 128
# The default sweep (5 contexts x 1,4,16 x 2 temperatures x code and prose x 3 repeats)
# sends about 7.9 M tokens on a 2048-window drafter.
DEFAULT_MAX_TOTAL_TOKENS = 12_000_000
DEFAULT_SEED = "dflash-doctor"


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return {"error": 3, "warning": 2, "info": 1}[self.value]
