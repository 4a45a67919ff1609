"""Model configs: a model dir's config.json, or an HF repo id's in the host's hub cache."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Mapping
from typing import TypeVar

from dflash_doctor.errors import DoctorError, FactError
from dflash_doctor.facts.model_config import MAX_CONFIG_BYTES
from dflash_doctor.facts.models import Fact
from dflash_doctor.finders.base import attempt
from dflash_doctor.finders.plan import HUB
from dflash_doctor.transport.base import Transport

T = TypeVar("T")
_HF_REPO = re.compile(HUB["repo_id"])


def hub_dirs(env: Mapping[str, str], hf_home: str | None) -> list[str]:
    """The hub caches `env` (the server's) names, in the order huggingface_hub reads them
    (plan.HUB: the bundle walks the same table)."""
    dirs = [env[key] for key in HUB["cache_env"] if key in env]
    for home in (env.get(HUB["home_env"]), hf_home):
        if home:
            dirs.append(posixpath.join(home, HUB["home_cache"]))
    user = env.get(HUB["user_env"], HUB["user_default"])
    dirs.append(posixpath.join(user, HUB["user_cache"]))
    return list(dict.fromkeys(dirs))


def config_path(t: Transport, model: str, hubs: list[str]) -> str:
    """`config.json` of a model dir, or of an HF repo id in one of the `hubs`."""
    if model.endswith(".json"):
        return model
    local = posixpath.join(model, "config.json")
    if not _HF_REPO.match(model) or model.startswith((".", "/")):
        return local
    # Like SGLang (and transformers): a directory of that name wins over a repo id.
    try:
        t.file_size(local)
        return local
    except DoctorError:
        pass
    org, name = model.split("/", 1)
    tried = []
    for hub in hubs:
        repo = posixpath.join(hub, HUB["repo_dir"].format(org=org, name=name))
        tried.append(repo)
        snapshot = _snapshot(t, repo)
        if snapshot:
            return posixpath.join(repo, HUB["snapshot_dir"], snapshot, "config.json")
    raise FactError(f"{model} is not in the Hugging Face cache (looked in {', '.join(tried)})")


def _snapshot(t: Transport, repo: str) -> str | None:
    """The snapshot refs/main names, else the last one listed; None when there is none."""
    try:
        snapshots = t.list_dir(posixpath.join(repo, HUB["snapshot_dir"]))
    except DoctorError:
        return None
    try:
        ref = t.read_file(posixpath.join(repo, HUB["ref"]), max_bytes=HUB["ref_bytes"])
        rev: str | None = ref.decode("ascii", "replace").strip()
    except DoctorError:
        rev = None
    if rev not in snapshots:
        rev = snapshots[-1] if snapshots else None
    return rev


def model_fact(
    t: Transport,
    host: str,
    model: str | None,
    what: str,
    parse: Callable[[bytes, str], T],
    hubs: list[str],
) -> Fact[T]:
    """The parsed config of `model` (a dir, a config.json or an HF repo id)."""
    if not model:
        return Fact[T].missing(f"{host}: no {what} path known (none in the launch)")
    path = attempt(host, model, lambda: config_path(t, model, hubs))
    if path.value is None:
        return Fact[T].missing(path.error or "unresolved")
    where = path.value
    return attempt(
        host, where, lambda: parse(t.read_file(where, max_bytes=MAX_CONFIG_BYTES), where)
    )
