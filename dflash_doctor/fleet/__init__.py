"""Fleets through the tools operators already use: per-host JSON reports merged into one.

Each node runs `dflash-doctor check local --format json` (by Ansible, Salt, a cron job, a
Kubernetes DaemonSet...); `dflash-doctor report merge` reads those files
(`fleet/load.py`), lays them side by side and says which hosts differ from the fleet's
majority per setting (`fleet/drift.py`), then renders the fleet as text, JSON, SARIF or JUnit
with the same renderers as `check` and `gate`. Nothing here imports pydantic at import time
except the modules that need it, so `--help` stays fast.
"""
