"""The stages' names, in the order the pipeline runs them.

The contract between the stage scripts (``stages/``) and everything that reads their
artifacts: ``stages`` builds its registry from this tuple, and readers (the matrix, the
report) take the order from here without importing any stage.
"""

from __future__ import annotations

__all__ = ["STAGE_NAMES"]

STAGE_NAMES: tuple[str, ...] = ("verify_hip", "functional_test", "performance_baseline", "compatibility_check")
