"""The reads the finders make on a host, declared once as data.

The finders (`models`, `version`, `process`, `log`) read by these tables, and the bundle
that answers a gathering in one round trip (`on_host/bundle_script.py`, stdlib Python 3.8
on the host) receives the same tables as JSON in its config (`prefetch_plan`): the hub
caches, the site directories, the process files and their limits are written here only,
so the bundle cannot drift from the finders it stands in for. Plain JSON values only:
strings, numbers, lists, and patterns as their source text.
"""

from __future__ import annotations

from typing import Any

from dflash_doctor.facts.launch import PYTHON_WORD

# finders/models: where a Hugging Face repo id's config.json is found, in the order
# huggingface_hub reads the variables (the server's environment, then the doctor's hint).
HUB: dict[str, Any] = {
    # Each names a hub cache itself.
    "cache_env": ["HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"],
    # HF_HOME (then --hf-home) names a home; its cache is this folder of it.
    "home_env": "HF_HOME",
    "home_cache": "hub",
    # Else the user's: $HOME (root's when the environment has none) and this folder.
    "user_env": "HOME",
    "user_default": "/root",
    "user_cache": ".cache/huggingface/hub",
    # An org/name repo id (a path of that shape that exists as a directory wins).
    "repo_id": r"^[A-Za-z0-9][\w.-]*/[\w.-]+$",
    "repo_dir": "models--{org}--{name}",
    "snapshot_dir": "snapshots",
    "ref": "refs/main",
    "ref_bytes": 256,
}

# finders/version: the dist-infos beside an interpreter, in `BIN/../lib/python3*/SUB`.
SITE: dict[str, Any] = {
    "lib": "lib",
    "python_prefix": "python3",
    "max_pythons": 8,
    "subdirs": ["site-packages", "dist-packages"],
    "sglang_dist_info": r"sglang-([^-]+)\.dist-info",
}

# finders/process and finders/log: what is read of a server process (/proc/PID/NAME, at
# most so many bytes), where its log is (the targets of these descriptors), and which
# word of its command line is its interpreter.
PROCESS: dict[str, Any] = {
    "files": {"cmdline": 1024 * 1024, "status": 64 * 1024, "cgroup": 64 * 1024},
    "environ": 1024 * 1024,
    "log_fds": [1, 2],
    "python_word": PYTHON_WORD,
}


def reads() -> dict[str, Any]:
    """The tables above as the bundle's config carries them."""
    return {"hub": HUB, "site": SITE, "process": PROCESS}
