"""The soak series file: ``performance_baseline.soak.jsonl``, one JSON line per soak window.

Written by the stage's timing child (``stages.perf.timing.soak``: one write and fsync per
line, so a killed job keeps every finished window), read by the stage for its metrics and
by the report for its plot over time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gatekeeper.core import budgets, files
from gatekeeper.core.errors import InputError

__all__ = ["MAX_SERIES_BYTES", "SERIES_FILE", "read_series"]

SERIES_FILE = "performance_baseline.soak.jsonl"  # in the stage's --out, next to its report
MAX_SERIES_BYTES = 64 * 2**20  # a 24 h soak writes well under 1 MB; more is not a series we wrote


def read_series(path: str | Path, max_bytes: int = MAX_SERIES_BYTES) -> list[dict[str, Any]]:
    """The complete JSON lines of a soak series (its first ``max_bytes``), each read by the strict JSON reader
    (``files.parse_json``: no duplicate key, bounded numbers and depth); a torn or garbled line (killed writer),
    or one it refuses, is skipped. A series that is not a regular file (a FIFO, a device, a directory) is none."""
    out: list[dict[str, Any]] = []
    p = Path(path)
    if not p.exists() and not p.is_symlink():
        return out
    try:
        with budgets.open_regular(p, what="soak series") as fh:
            text = fh.read(max_bytes).decode("utf-8", errors="replace")
    except InputError:
        return out
    for n, line in enumerate(text.splitlines(), 1):
        try:
            rec = files.parse_json(line, f"{p}:{n}", what="soak window")
        except InputError:
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out
