"""The live server's own answers over its HTTP API (issue 13), asked on the host."""

from __future__ import annotations

from dflash_doctor.facts.models import Fact, LaunchArgs, ServerRuntime
from dflash_doctor.facts.runtime import read_runtime
from dflash_doctor.finders.base import attempt
from dflash_doctor.transport.base import Transport


def find_runtime(
    t: Transport, host: str, launch: LaunchArgs | None, pid: int | None, health_url: str | None
) -> Fact[ServerRuntime]:
    """What the running server answers; absent where there is none to ask."""
    if t.live_refused is not None or pid is None:
        return Fact[ServerRuntime]()
    return attempt(host, "server HTTP API", lambda: read_runtime(t, launch, pid, health_url))
