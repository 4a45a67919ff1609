"""Host facts are frozen: what gathering, the probe and the bench add makes a new
`HostFacts` (model_copy), so the facts one check read cannot change under the next
(issue 27)."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from dflash_doctor.facts import models
from dflash_doctor.facts.models import Fact, HostFacts, ServerRuntime
from tests.conftest import drafter_cfg, host_facts, launch

# Built step by step by the log parser and the bench runner, then handed over whole.
BUILT_IN_PLACE = {
    "LogFacts",
    "DecodeStats",
    "BenchCell",
    "BenchResult",
    "BenchBaseline",
    "PrefixProbe",
}


def test_host_facts_refuse_edits() -> None:
    facts = host_facts(drafter=drafter_cfg(), launch_args=launch())
    with pytest.raises(ValidationError, match="frozen"):
        facts.runtime = Fact()  # type: ignore[misc]
    assert facts.launch.value is not None
    with pytest.raises(ValidationError, match="frozen"):
        facts.launch.error = "x"  # type: ignore[misc]
    with pytest.raises(ValidationError, match="frozen"):
        facts.launch.value.kind = "process"  # type: ignore[misc]
    assert facts.drafter.value is not None
    with pytest.raises(ValidationError, match="frozen"):
        facts.drafter.value.block_size = 4  # type: ignore[misc]


def test_a_changed_fact_is_a_new_host_facts() -> None:
    facts = HostFacts(host="h")
    runtime = Fact.of(ServerRuntime(url="http://h:30000", endpoint="/server_info"), "http")
    given = facts.model_copy(update={"runtime": runtime})
    assert given.runtime.value is not None and facts.runtime.value is None


def test_every_fact_model_but_the_ones_built_in_place_is_frozen() -> None:
    fact_models = {
        name: cls
        for name, cls in vars(models).items()
        if isinstance(cls, type)
        and issubclass(cls, BaseModel)
        and cls.__module__ == models.__name__
    }
    thawed = {name for name, cls in fact_models.items() if not cls.model_config.get("frozen")}
    assert thawed == BUILT_IN_PLACE
