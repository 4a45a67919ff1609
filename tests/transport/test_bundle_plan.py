"""The bundle reads by the finders' plan (finders/plan.py), received as data: it keeps no
copy of a hub cache, a site directory or a process file of its own, and the lists it
builds from the plan are the finders'."""

from __future__ import annotations

import ast
import json
from typing import Any

import pytest

from dflash_doctor.finders import plan
from dflash_doctor.finders.models import hub_dirs
from dflash_doctor.on_host.bundle_script import Bundle
from dflash_doctor.shipped import script_source
from dflash_doctor.transport.prefetch import LIMITS


def _leaves(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _leaves(v)]
    if isinstance(value, list):
        return [s for v in value for s in _leaves(v)]
    return []


def _code_strings(source: str) -> list[str]:
    """The string constants of the code, docstrings left out (they may name paths)."""
    tree = ast.parse(source)
    docs = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
    ]


def test_the_bundle_keeps_no_copy_of_a_planned_value() -> None:
    strings = _code_strings(script_source("on_host/bundle_script.py"))
    leaves = [v for v in _leaves(plan.reads()) if len(v) > 3]
    copies = [(v, s) for v in leaves for s in strings if s == v or (len(v) >= 8 and v in s)]
    assert leaves and copies == [], f"take these from the config's `reads`: {copies}"


def test_the_plan_travels_as_json() -> None:
    assert json.loads(json.dumps(plan.reads())) == plan.reads()


def _bundle() -> Bundle:
    return Bundle({"limits": dict(LIMITS), "reads": json.loads(json.dumps(plan.reads()))})


@pytest.mark.parametrize(
    ("env", "hf_home"),
    [
        ({}, None),
        ({}, "/hint"),
        ({"HOME": "/home/u"}, None),
        ({"HF_HOME": "/h", "HF_HUB_CACHE": "/c", "HUGGINGFACE_HUB_CACHE": "/c"}, "/h"),
        ({"HF_HUB_CACHE": "/a", "HUGGINGFACE_HUB_CACHE": "/b", "HOME": "/r"}, "/x"),
    ],
)
def test_hub_caches_are_the_finders(env: dict[str, str], hf_home: str | None) -> None:
    bundle = _bundle()
    bundle.cfg["hf_home"] = hf_home
    assert bundle.hub_dirs(env) == hub_dirs(env, hf_home)


def test_the_interpreter_word_is_the_launch_parse() -> None:
    from dflash_doctor.facts.launch import _python_of

    words = ["env", "A=1", "/venv/bin/python3.11", "-m", "sglang.launch_server"]
    assert _bundle().python_in(words[:-1]) == _python_of(words, len(words)) == words[2]
    assert _bundle().python_in(["pythonic", "/x/python-config"]) is None
