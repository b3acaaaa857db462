"""What ``compare: anchor`` and ``compare: history`` gates compare with, read from the ``--baseline`` store
before the (pure) evaluation: per stage the anchor run (``gatekeeper.history.anchor``), and per
history gate the newest unconfirmed change point of its metric over the recorded runs and this one
(``gatekeeper.history.changes``). Nothing is read when no gate asks for it."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gatekeeper.contract.stage_report import StageReport
from gatekeeper.evaluate.gates import Gates
from gatekeeper.history import BaselineStore, baseline_branch, open_store

__all__ = ["HISTORY_RUNS", "References", "load_references"]

HISTORY_RUNS = 30  # recorded runs (before this one) a history gate looks at
_SCAN = 2000  # newest records of the stage, channel and device read to find them (other branches, models)


@dataclass
class References:
    anchors: dict[str, StageReport] = field(default_factory=dict)
    anchor_runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    anchor_notes: dict[str, str] = field(default_factory=dict)
    history_changes: dict[str, dict[str, Any]] = field(default_factory=dict)
    history_notes: dict[str, str] = field(default_factory=dict)


def load_references(
    spec: str | None,
    gates: Gates,
    reports: Mapping[str, StageReport],
    environ: Mapping[str, str],
    now: dt.datetime,
    *,
    stack: Mapping[str, str | None] | None = None,
) -> References:
    out = References()
    anchor_stages = {g.stage for g in gates.compares("anchor") if g.stage}
    history_gates = gates.compares("history")
    if not anchor_stages and not history_gates:
        return out
    if not spec:
        for stage in anchor_stages:
            out.anchor_notes[stage] = "no history store was given (--baseline)"
        return out
    store = open_store(spec, environ, missing_ok=True)
    branch = baseline_branch(environ)
    for stage in sorted(anchor_stages):
        report = reports.get(stage)
        if report is None:
            continue
        from gatekeeper.history.anchor import find_anchor

        anchor, why = find_anchor(
            store, stage, report, now=now, branch=branch, days=gates.anchor.days, runs=gates.anchor.runs
        )
        if anchor is None:
            out.anchor_notes[stage] = why
        else:
            out.anchors[stage] = anchor.report
            out.anchor_runs[stage] = anchor.to_dict()
    for gate in history_gates:
        _history(out, store, gate.metric, reports, branch=branch, now=now, stack=stack)
    return out


def _history(
    out: References,
    store: BaselineStore,
    metric: str,
    reports: Mapping[str, StageReport],
    *,
    branch: str | None,
    now: dt.datetime,
    stack: Mapping[str, str | None] | None,
) -> None:
    from gatekeeper.history.changes import group_key, series_changes
    from gatekeeper.history.sql import SqlStore
    from gatekeeper.history.sql_schema import SeriesRow, metric_points

    stage, _, name = metric.partition(".")
    report = reports.get(stage)
    if report is None:
        out.history_notes[metric] = f"no {stage}.json in the artifacts"
        return
    if "[" in name:
        out.history_notes[metric] = "a history gate judges one metric, not sweep points"
        return
    points = metric_points(report)
    if name not in points and name.rsplit(".", 1)[0] in points:
        name = name.rsplit(".", 1)[0]  # latency_ms.p50: the change of the metric's level
    if name not in points:
        out.history_notes[metric] = f"this run has no positive value of {stage}.{name}"
        return
    if not isinstance(store, SqlStore):
        out.history_notes[metric] = "the store keeps no history series (use sqlite: or postgresql:)"
        return
    env = report.environment
    config = json.loads(json.dumps(dict(report.config), sort_keys=True, default=str))
    current = SeriesRow(
        -1, stage, env.channel, env.device_kind, env.arch, env.rocm_version, report.config.get("model"), branch,
        None, None, None, None, now.isoformat(timespec="seconds"), env.to_dict(), dict(stack or {}), points, config,
    )  # fmt: skip
    key = group_key(current)
    recent = store.series(stage=stage, channel=env.channel, device=(env.device_kind, env.arch), newest=_SCAN)
    rows = [r for r in recent if _same(group_key(r), key, branch)]
    rows = [r for r in rows if r.points.get(name)][-HISTORY_RUNS:]
    series = [*rows, current]
    if len(series) < 6:
        out.history_notes[metric] = f"only {len(rows)} earlier runs of this series are recorded; 5 are needed"
        return
    marks = store.anchors()
    changes = [c for c in series_changes(series, name, marks=marks) if not c.confirmed]
    if not changes:
        out.history_changes[metric] = {"index": None, "runs": len(series)}
        return
    newest = changes[-1].to_dict()
    if newest["first_run"]["run_id"] == -1:
        newest["first_run"] = {"run_id": "this run"}
    else:
        newest["platforms"] = _elsewhere(store, changes[-1], f"{stage}.{name}")
    out.history_changes[metric] = newest


def _elsewhere(store: Any, change: Any, metric: str) -> dict[str, Any] | None:
    """The change judged on every platform of its series (``gatekeeper history platforms``), or None."""
    from gatekeeper.history.platforms import across_platforms

    first = change.first
    rows = store.series(stage=first.stage, channel=first.channel, newest=_SCAN)
    found = across_platforms(rows, change.before, first, metric)
    return found.to_dict() if found else None


def _same(key: tuple[Any, ...], current: tuple[Any, ...], branch: str | None) -> bool:
    """The same series: stage, channel, device and configuration; the branch only when one is known."""
    stage, channel, kind, arch, ref, config, _project = key  # the store already reads this project only
    return (stage, channel, kind, arch, config) == (current[0], current[1], current[2], current[3], current[5]) and (
        not branch or ref == branch
    )
