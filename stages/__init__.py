"""The stage scripts. STAGES is the explicit registry, in pipeline order.

Importing this package imports no stage (and no torch): ``load_stage`` does.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["STAGES", "load_stage"]

# name -> module, in the order the pipeline runs them
STAGES: dict[str, str] = {
    "verify_hip": "stages.verify_hip",
    "functional_test": "stages.functional_test",
    "performance_baseline": "stages.performance_baseline",
    "compatibility_check": "stages.compatibility_check",
}


def load_stage(name: str) -> ModuleType:
    return importlib.import_module(STAGES[name])
