"""The check catalog. Importing this package registers every check.

Every module in this package is a check module and is imported here, found by listing the
package (no hand-kept list to forget a new check in); the few that hold what checks share
are named in SUPPORT. tests/checks/test_check_discovery.py fails on a check module that
registers nothing, so a module that lost its `@check` cannot sit dead with every test green.
"""

import importlib
import pkgutil

from dflash_doctor.checks.base import REGISTRY, Check

# Modules that hold what the checks share (and the retired ids), registering none.
SUPPORT = frozenset({"base", "views", "impact_labels", "retired", "vllm_views"})

CHECK_MODULES: tuple[str, ...] = tuple(
    sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name not in SUPPORT)
)
for _name in CHECK_MODULES:
    importlib.import_module(f"{__name__}.{_name}")

__all__ = ["CATALOG", "CHECK_MODULES", "SUPPORT", "Check"]

CATALOG: dict[str, Check] = dict(sorted(REGISTRY.items()))
