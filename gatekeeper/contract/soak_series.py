"""The soak series file: ``performance_baseline.soak.jsonl``, one JSON line per soak window.

Written by the stage's timing child (``stages.perf.timing.soak``: one write and fsync per
line, so a killed job keeps every finished window), read by the stage for its metrics and
by the report for its plot over time.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gatekeeper.core import numbers
from gatekeeper.core.errors import InputError

__all__ = ["MAX_SERIES_BYTES", "SERIES_FILE", "read_series"]

SERIES_FILE = "performance_baseline.soak.jsonl"  # in the stage's --out, next to its report
MAX_SERIES_BYTES = 64 * 2**20  # a 24 h soak writes well under 1 MB; more is not a series we wrote


def read_series(path: str | Path, max_bytes: int = MAX_SERIES_BYTES) -> list[dict[str, Any]]:
    """The complete JSON lines of a soak series (its first ``max_bytes``); a torn or garbled line
    (killed writer), or one holding a number out of range (``core/numbers.py``), is skipped."""
    out: list[dict[str, Any]] = []
    p = Path(path)
    if not p.is_file():
        return out
    with p.open("rb") as fh:
        text = fh.read(max_bytes).decode("utf-8", errors="replace")
    for line in text.splitlines():
        try:
            rec = json.loads(line)
            numbers.check_tree(rec, p)  # the one bounded number reader: a 400-digit t_s is not a window
        except (ValueError, InputError):  # JSONDecodeError is a ValueError, and so is an over-long integer
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out
