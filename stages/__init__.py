"""The stage scripts. STAGES is the explicit registry, in pipeline order.

Importing this package imports no stage (and no torch): ``load_stage`` does.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from gatekeeper.contract.stage_names import STAGE_NAMES

__all__ = ["STAGES", "load_stage"]

# name -> module, in the order the pipeline runs them (the names are the artifact contract)
STAGES: dict[str, str] = {name: f"stages.{name}" for name in STAGE_NAMES}


def load_stage(name: str) -> ModuleType:
    return importlib.import_module(STAGES[name])
