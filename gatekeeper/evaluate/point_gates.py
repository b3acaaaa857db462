"""Gates on ``metric[*]``: one judgement per sweep point, and the points back as one table.

``expand`` turns a pattern gate into one concrete gate per point that this run or
its baseline measured; each is judged like any gate (the statistical judge where
samples exist), and the Holm correction of the verdict then runs across all points
together. A point's result is named ``gate[key=value,...]``; ``sweep_tables``
regroups those results into one table per sweep (points as rows, gates as columns)
for the verdict markdown, the report and the merge-request note.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from gatekeeper.contract.metric_points import is_pattern, points_of, sort_key, split_point
from gatekeeper.contract.stage_report import StageReport
from gatekeeper.contract.verdict import GateResult
from gatekeeper.evaluate.gates import Gate

__all__ = ["SweepTable", "expand", "named", "split_results", "sweep_tables"]


def expand(
    gate: Gate, reports: Mapping[str, StageReport], baselines: Mapping[str, StageReport]
) -> list[tuple[Gate, str]]:
    """(concrete gate, point label) per point; ``[(gate, "")]`` for a plain gate or when no point exists.

    Points of the baseline count too (for baseline gates): a point the baseline
    measured and this run did not is judged as missing, not silently dropped.
    """
    if not is_pattern(gate.metric):
        return [(gate, "")]
    stage, _, name = gate.metric.partition(".")
    names: set[str] = set()
    sources = [reports.get(stage)] + ([baselines.get(stage)] if gate.compare in ("baseline", "anchor") else [])
    for report in sources:
        if report is not None:
            names |= set(report.metrics)
    points = points_of(name, names)
    if not points:
        return [(gate, "")]
    return [(replace(gate, metric=f"{stage}.{concrete}"), label) for concrete, label in points]


def named(result: GateResult, label: str) -> GateResult:
    """The result of one point, named ``gate[point]``."""
    return replace(result, name=f"{result.name}{label}") if label else result


@dataclass(frozen=True)
class SweepTable:
    keys: tuple[str, ...]  # the point's keys, sorted
    gates: tuple[str, ...]  # the pattern gates, in verdict order
    rows: tuple[tuple[Mapping[str, str], Mapping[str, GateResult]], ...]  # (point, gate -> its result)


def split_results(results: Sequence[GateResult]) -> tuple[list[GateResult], list[GateResult]]:
    """(results of plain gates, results of sweep points)."""
    plain: list[GateResult] = []
    points: list[GateResult] = []
    for r in results:
        (points if split_point(r.name) is not None else plain).append(r)
    return plain, points


def sweep_tables(results: Sequence[GateResult]) -> list[SweepTable]:
    """One table per set of point keys (a performance sweep and a bandwidth sweep are two tables)."""
    by_keys: dict[tuple[str, ...], dict[str, tuple[dict[str, str], dict[str, GateResult]]]] = {}
    gate_order: dict[tuple[str, ...], list[str]] = {}
    for r in results:
        parts = split_point(r.name)
        if parts is None:
            continue
        gate, point, _ = parts
        keys = tuple(sorted(point))
        label = ",".join(f"{k}={point[k]}" for k in keys)
        row = by_keys.setdefault(keys, {}).setdefault(label, (point, {}))
        row[1][gate] = r
        names = gate_order.setdefault(keys, [])
        if gate not in names:
            names.append(gate)
    tables = []
    for keys, rows in by_keys.items():
        ordered = sorted(rows.values(), key=lambda row: sort_key(row[0]))
        tables.append(SweepTable(keys, tuple(gate_order[keys]), tuple(ordered)))
    return tables
