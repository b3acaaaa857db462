"""Memory growth and soak series: robust slopes over time, and decay between the first and last window."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from gatekeeper.contract.soak_series import SERIES_FILE, read_series
from gatekeeper.stats.compare import theil_sen_slope

__all__ = ["SERIES_FILE", "decay", "growth_mb_per_hour", "read_series"]

_MAX_POINTS = 600  # Theil-Sen is O(n^2) in pairs; thinning evenly keeps it well under a second


def growth_mb_per_hour(runs: Sequence[tuple[Sequence[float], Sequence[float]]]) -> tuple[float, float, float] | None:
    """Theil-Sen slope of memory over time, in MB/hour, with its 95% interval; None with too few points.

    ``runs`` holds (seconds, MB) per process. Each process's series is taken
    relative to its own first value, so different start levels across
    processes do not read as growth; the pooled points give one slope.
    """
    xs: list[float] = []
    ys: list[float] = []
    for t, mb in runs:
        if len(t) < 2:
            continue
        step = max(1, len(t) * len(runs) // _MAX_POINTS)
        xs += [s / 3600.0 for s in t[::step]]
        ys += [m - mb[0] for m in mb[::step]]
    if len(xs) < 3 or max(xs) == min(xs):
        return None
    return theil_sen_slope(xs, ys)


def decay(values: Sequence[float], fraction: float = 0.1) -> float | None:
    """Relative loss from the first to the last ``fraction`` of the points: 0.05 = 5% slower at the end."""
    clean = [v for v in values if v is not None]
    if len(clean) < 2:
        return None
    n = max(1, int(len(clean) * fraction))
    first, last = statistics.median(clean[:n]), statistics.median(clean[-n:])
    return 1.0 - last / first if first else None
