"""The inventory file: hosts, per-host overrides, defaults and groups (YAML, validated).

```yaml
defaults:                 # applied to every host, overridden by the host's own keys
  user: ubuntu
  log_path: /var/log/sglang/server.log
hosts:
  gpu-a1:                 # the name; also the SSH target unless `address` is given
    address: ubuntu@10.0.0.5:2222
    labels: [prod, h200]
    launch_file: /etc/sglang/launch.sh
  gpu-a2: {}
groups:
  prod: [gpu-a1, gpu-a2]
```

`--limit` takes comma-separated group names, labels or host names.
"""

from __future__ import annotations

from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from dflash_doctor.errors import UsageError, validation_line
from dflash_doctor.hosts import GROUPS, HostSpec

MAX_INVENTORY_BYTES = 16 * 1024 * 1024
LOCAL_NAMES = ("local", "localhost")


class Inventory(BaseModel):
    model_config = ConfigDict(extra="forbid")

    defaults: dict[str, Any] = Field(default_factory=dict)
    hosts: dict[str, dict[str, Any] | None] = Field(default_factory=dict)
    groups: dict[str, list[str]] = Field(default_factory=dict)
    source_path: str | None = Field(default=None, exclude=True)

    @model_validator(mode="after")
    def _groups_name_hosts(self) -> Inventory:
        for group, members in self.groups.items():
            unknown = [m for m in members if m not in self.hosts]
            if unknown:
                raise ValueError(f"group {group!r} names unknown hosts {unknown}")
        return self

    def specs(self) -> list[HostSpec]:
        out = []
        for name, entry in self.hosts.items():
            settings = {**self.defaults, **(entry or {})}
            reserved = sorted(k for k in ("name", "invalid", *GROUPS) if k in settings)
            if reserved:
                raise UsageError(f"inventory host {name!r}: {', '.join(reserved)} is not a key")
            # A pod is reached through this machine's kubectl, never an SSH host of its name.
            if "address" not in settings and name not in LOCAL_NAMES and "pod" not in settings:
                settings["address"] = name
            if self.source_path is not None:
                settings["inventory_file"] = self.source_path
            try:
                out.append(HostSpec.validate_flat({**settings, "name": name}))
            except ValueError as e:
                raise UsageError(f"inventory host {name!r}: {e}") from None
        return out

    def select(self, limit: str | None) -> list[HostSpec]:
        specs = self.specs()
        if not limit:
            return specs
        wanted = [w.strip() for w in limit.split(",") if w.strip()]
        names: set[str] = set()
        for w in wanted:
            matched = set(self.groups.get(w, []))
            matched |= {s.name for s in specs if w == s.name or w in s.labels}
            if not matched:
                raise UsageError(f"--limit {w!r} matches no group, label or host")
            names |= matched
        return [s for s in specs if s.name in names]


def load_inventory(path: str) -> Inventory:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_INVENTORY_BYTES + 1)
    except OSError as e:
        raise UsageError(
            f"{path}: cannot read inventory: {(e.strerror or str(e)).lower()}"
        ) from None
    if len(data) > MAX_INVENTORY_BYTES:
        raise UsageError(f"{path}: inventory larger than {MAX_INVENTORY_BYTES} bytes")
    try:
        raw = yaml.safe_load(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise UsageError(f"{path}: inventory is not UTF-8 text") from None
    except (ValueError, RecursionError) as e:
        raise UsageError(f"{path}: invalid YAML ({str(e).splitlines()[0][:120]})") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise UsageError(f"{path}: invalid YAML{where}") from None
    if not isinstance(raw, dict):
        raise UsageError(f"{path}: inventory must be a mapping with a 'hosts' key")
    if "source_path" in raw:
        raise UsageError(f"{path}: 'source_path' is not an inventory key")
    try:
        inv = Inventory.model_validate({**raw, "source_path": path})
    except ValidationError as e:
        raise UsageError(f"{path}: {validation_line(e)}") from None
    inv.specs()  # every host must be valid now, not halfway through a run
    return inv
