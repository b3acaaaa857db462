"""The runs of one level on each side of a move, per platform series: what ``gatekeeper.history.platforms``
pools for each platform's move (its module docstring says how a side is chosen)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from gatekeeper.history.points import MetricColumn, metric_columns
from gatekeeper.history.sql_schema import SeriesRow
from gatekeeper.stats.changepoint import ALPHA, MIN_SIZE, level_changes

__all__ = ["RUNS_A_SIDE", "Run", "Sides"]

# Runs pooled a side at most. At 3% process noise a run's level scatters by about 1%: 10 runs a side put the
# 95% interval of a move near +-0.9%, and nothing moved is "no change" in 94% of trials (benchmarks/README.md,
# "Code or platform"); more would add little and reach further back, where a drift too slow for the change
# scan to cut would creep into a side. It is also a third of the history-change gate's 30-run window.
RUNS_A_SIDE = 10

Run = tuple[float, float, int]


class Sides:
    """The runs of one level on each side of a move, per platform series (see the module docstring)."""

    def __init__(self, series: Sequence[SeriesRow], only: str | None = None) -> None:
        self._only = only  # read this metric only (every one when None)
        self._groups: dict[tuple[Any, ...], list[SeriesRow]] = {}
        self._where: dict[int, tuple[tuple[Any, ...], int]] = {}  # id(row): (its group, its index there)
        for row in series:  # one series_key: stage, channel, configuration and project are the same in all
            key = (row.device_kind, row.arch, row.ref)  # so this is changes.group_key, without its JSON
            rows = self._groups.setdefault(key, [])
            self._where[id(row)] = (key, len(rows))
            rows.append(row)
        self._columns: dict[tuple[Any, ...], dict[str, MetricColumn]] = {}
        self._cuts: dict[tuple[tuple[Any, ...], str], list[tuple[int, int]]] = {}  # spans of the change points

    def names(self, row: SeriesRow) -> set[str]:
        return set(self._column_of(self._where[id(row)][0]))

    def pair(self, base: SeriesRow, head: SeriesRow, name: str) -> tuple[list[Run], list[Run]] | None:
        """The runs before (from ``base`` back) and after (from the oldest run of ``head``'s series at its
        commit forward), or None when ``base`` or ``head`` lacks ``name``. One run a side (``base`` and
        ``head``) where the series are too short to have been scanned or ``base`` is not the earlier."""
        at_base, at_head = self._run(base, name), self._run(head, name)
        if at_base is None or at_head is None:
            return None
        (gb, ib), (ga, _) = self._where[id(base)], self._where[id(head)]
        ia = next(i for i, r in enumerate(self._groups[ga]) if r.commit == head.commit)  # retries at the head too
        if (gb == ga and ib >= ia) or base.recorded_at >= self._groups[ga][ia].recorded_at:
            return [at_base], [at_head]
        col_b, col_a = self._column_of(gb)[name], self._column_of(ga)[name]
        if min(len(col_b.rows), len(col_a.rows)) < 2 * MIN_SIZE:  # too short for the change scan to have looked
            return [at_base], [at_head]
        kb, ka = int(np.searchsorted(col_b.rows, ib)), int(np.searchsorted(col_a.rows, ia))
        # where the judged move may lie (the first run at the new level): between the two runs in one series
        gap_b, gap_a = ((kb + 1, ka), (kb + 1, ka)) if gb == ga else ((kb + 1, kb + 1), (ka, ka))
        return self._side(gb, name, kb, gap_b, -1), self._side(ga, name, ka, gap_a, +1)

    def _run(self, row: SeriesRow, name: str) -> Run | None:
        g, i = self._where[id(row)]
        col = self._column_of(g).get(name)
        if col is None:
            return None
        k = int(np.searchsorted(col.rows, i))
        if k == len(col.rows) or col.rows[k] != i:
            return None
        return float(col.levels[k]), float(col.within[k]), int(col.counts[k])

    def _side(self, group: tuple[Any, ...], name: str, k: int, gap: tuple[int, int], way: int) -> list[Run]:
        """The runs of ``group`` with ``name`` from its ``k``-th back (``way`` -1) or forward (+1): at most
        ``RUNS_A_SIDE``, none past a change point of the series whose span (every run it may lie at) misses
        ``gap``. One whose span reaches into ``gap`` may be the judged move itself, misplaced by noise:
        cutting there would shorten a side exactly when its nearest runs look like the other side's level,
        and call such moves one platform's (the scan cannot tell two changes fewer than 3 runs apart anyway)."""
        col = self._column_of(group)[name]
        key = (group, name)
        if key not in self._cuts:
            spans = [(cp.index, *(cp.span or (cp.index, cp.index))) for cp in level_changes(
                col.levels, col.within, counts=col.counts, alpha=ALPHA
            )]  # fmt: skip
            self._cuts[key] = [(min(at, first), max(at, last)) for at, first, last in spans]
        if way < 0:  # from the newest run sure to be at this level after each earlier change
            lo = max([last for _, last in self._cuts[key] if last < gap[0]], default=0)
            picked = range(max(lo, k - RUNS_A_SIDE + 1), k + 1)
        else:  # to the last run sure to be at this level before each later change
            hi = min([first - 1 for first, _ in self._cuts[key] if first > gap[1]], default=len(col.rows) - 1)
            picked = range(k, min(hi, k + RUNS_A_SIDE - 1) + 1)
        return [(float(col.levels[j]), float(col.within[j]), int(col.counts[j])) for j in picked]

    def _column_of(self, group: tuple[Any, ...]) -> dict[str, MetricColumn]:
        if group not in self._columns:
            self._columns[group] = metric_columns([(r.points, r.levels) for r in self._groups[group]], self._only)
        return self._columns[group]
