"""What change detection reads of each stored run: every metric's level, summarised once when it is recorded.

Change detection needs, per run and metric, three numbers of its per-process medians: how many, the mean
of their logs, and the variance of their logs (``gatekeeper.stats.changepoint``). A SQL store keeps the
medians themselves as JSON (``points``); reading them back for ``history changes`` over 10,000 runs x 30
metrics means parsing three million numbers (2-3 s in Python whatever the parser) and, in sqlite, walking
every record's report to reach the columns stored after it (another second). So a writer also stores the
summary (``encode_levels``: the metric names as JSON, the numbers as little-endian float64) in a side
table beside the record's stack and configuration, and ``history changes`` reads that table instead
(``gatekeeper.history.sql``). A record without a usable summary (written by an older gatekeeper, or
damaged) is read from its points as before: ``metric_columns`` takes either.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gatekeeper.core import files, numbers
from gatekeeper.core.errors import InputError

__all__ = ["Levels", "MetricColumn", "decode_levels", "encode_levels", "metric_columns"]

_DTYPE = np.dtype("<f8")


@dataclass(frozen=True)
class Levels:
    """A record's points summarised per metric: ``table[i]`` = (processes, mean log median, variance of the
    log medians (0 for one process)) of ``names[i]``."""

    names: tuple[str, ...]
    table: np.ndarray


def encode_levels(points: Mapping[str, Sequence[float]]) -> tuple[str, bytes] | None:
    """(names as JSON, the summary as bytes) of a record's points (``sql_schema.metric_points``: positive and
    finite), or None when it has none."""
    names, rows = [], []
    for name, values in points.items():
        logs = np.log(np.asarray(values, dtype=float))
        if len(logs) == 0 or not np.all(np.isfinite(logs)):
            continue
        names.append(name)
        rows.append((len(logs), float(logs.mean()), float(logs.var(ddof=1)) if len(logs) > 1 else 0.0))
    if not names:
        return None
    return json.dumps(names), np.asarray(rows, dtype=_DTYPE).tobytes()


def decode_levels(names_text: Any, data: Any, names_seen: dict[str, tuple[str, ...] | None]) -> Levels | None:
    """The summary as stored, or None when it is not one ``encode_levels`` writes (then read the points).
    ``names_seen`` caches the parsed names: a history repeats the same few lists."""
    if not isinstance(names_text, str) or not isinstance(data, bytes | bytearray | memoryview):
        return None
    if names_text not in names_seen:
        names_seen[names_text] = _names(names_text)
    names = names_seen[names_text]
    raw = bytes(data)
    if names is None or len(raw) != len(names) * 3 * _DTYPE.itemsize:
        return None
    table = np.frombuffer(raw, dtype=_DTYPE).reshape(len(names), 3)
    counts, levels, variances = table[:, 0], table[:, 1], table[:, 2]
    sane = np.isfinite(table).all() and (counts >= 1).all() and (counts == np.round(counts)).all()
    if not (sane and (variances >= 0).all() and np.isfinite(levels).all()):
        return None
    return Levels(names, table)


def _names(text: str) -> tuple[str, ...] | None:
    try:  # the strict reader: a name list nested 5,000 deep was exit 70 (RecursionError)
        doc = files.parse_json(text, "history store column", what="stored metric names")
    except InputError:
        return None
    if not isinstance(doc, list) or not all(isinstance(n, str) for n in doc) or len(set(doc)) != len(doc):
        return None
    return tuple(doc)


@dataclass(frozen=True)
class MetricColumn:
    """One metric over a series: the rows that have it, and per row its level, the variance of that level
    from within the run, and the number of processes (``gatekeeper.stats.changepoint.ragged_table``)."""

    rows: np.ndarray
    levels: np.ndarray
    within: np.ndarray
    counts: np.ndarray


def metric_columns(
    records: Sequence[tuple[Mapping[str, Any], Levels | None]], only: str | None = None
) -> dict[str, MetricColumn]:
    """Every metric of a series (or ``only`` that one) as a ``MetricColumn``, from each record's summary
    where it has one, else from its points (each row: (points, levels or None)). A record whose points for
    a metric are not all positive finite numbers (a damaged row) is left out of that metric."""
    from gatekeeper.stats.changepoint import ragged_table  # here: the stores import this module, not scipy

    parts: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]] = {}
    by_names: dict[tuple[str, ...], tuple[list[int], list[np.ndarray]]] = {}
    listed: dict[str, tuple[list[int], list[Sequence[Any]]]] = {}
    for i, (points, levels) in enumerate(records):
        if levels is not None:
            rows, tables = by_names.setdefault(levels.names, ([], []))
            rows.append(i)
            tables.append(levels.table)
            continue
        for name, values in points.items():
            if isinstance(values, list | tuple) and values and (only is None or name == only):
                got_rows, got = listed.setdefault(name, ([], []))
                got_rows.append(i)
                got.append(values)
    for names, (rows, tables) in by_names.items():  # records with the same metrics: one array, no loop
        stacked = np.stack(tables)
        index = np.asarray(rows, dtype=np.intp)
        for j, name in enumerate(names):
            if only is None or name == only:
                counts = stacked[:, j, 0]
                parts.setdefault(name, []).append((index, stacked[:, j, 1], stacked[:, j, 2] / counts, counts))
    for name, (rows_l, got) in listed.items():
        counts_l = np.asarray([len(g) for g in got], dtype=np.intp)
        values = _numbers(got, int(counts_l.sum()))
        good = np.isfinite(values) & (values > 0)
        starts = np.concatenate([[0], np.cumsum(counts_l)[:-1]])
        keep = np.logical_and.reduceat(good, starts) if len(starts) else np.zeros(0, dtype=bool)
        if not keep.any():
            continue
        levels_, within, counts_ = ragged_table(values[np.repeat(keep, counts_l)], counts_l[keep])
        parts.setdefault(name, []).append((np.asarray(rows_l, dtype=np.intp)[keep], levels_, within, counts_))
    out = {}
    for name, pieces in parts.items():
        rows_a, levels_a, within_a, counts_a = (np.concatenate(p) for p in zip(*pieces, strict=True))
        order = np.argsort(rows_a, kind="stable")
        out[name] = MetricColumn(rows_a[order], levels_a[order], within_a[order], counts_a[order].astype(np.intp))
    return out


def _numbers(lists: list[Sequence[Any]], total: int) -> np.ndarray:
    """Every stored number, end to end; anything that is not a number the bounded reader accepts (a string, a
    400-digit integer, a value outside its range: ``gatekeeper.core.numbers``) is NaN (its row is left out)."""
    try:
        values = np.fromiter(itertools.chain.from_iterable(lists), dtype=float, count=total)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an integer no float holds
        values = np.asarray([_float(v) for g in lists for v in g], dtype=float)
    with np.errstate(invalid="ignore"):
        values[~((values >= numbers.MIN) & (values < numbers.MAX))] = math.nan
    return values


def _float(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or numbers.problem(value):
        return math.nan
    return float(value)
