"""The SQL stores' tables and rows: the schema text both dialects create, the columns each query reads,
and what a row becomes (``SeriesRow``, ``AnchorMark``, a record's metric points). ``sql.py`` holds the
queries over them (``SqlStore``)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gatekeeper.contract.stage_report import StageReport
from gatekeeper.core import files
from gatekeeper.core.errors import InputError
from gatekeeper.history.baseline import RunInfo

if TYPE_CHECKING:
    from gatekeeper.history.points import Levels

__all__ = [
    "COLUMNS",
    "RECORD",
    "SERIES",
    "SERIES_SUMMARY",
    "SERIES_TABLE",
    "AnchorMark",
    "SeriesRow",
    "contradiction",
    "json_cached",
    "json_dict",
    "metric_points",
    "results_table",
]

COLUMNS = (
    "stage", "status", "channel", "device_kind", "arch", "rocm_version", "torch_version", "model", "ref",
    "commit_sha", "pipeline_id", "verdict", "recorded_at", "fingerprint", "report", "tag", "stack", "points", "config",
    "project",
)  # fmt: skip
RECORD = "id, ref, commit_sha, pipeline_id, verdict, recorded_at, report, tag, stack, channel"
SERIES = (
    "id, stage, channel, device_kind, arch, rocm_version, model, ref, tag, commit_sha, pipeline_id, verdict, "
    "recorded_at, fingerprint, stack, points, config, CASE WHEN points IS NULL THEN report ELSE NULL END, "
    "NULL, NULL"
)  # a report is read only for a row written before schema 2 had points
SERIES_TABLE = "results_series"
SERIES_SUMMARY = (
    "id, stage, channel, device_kind, arch, rocm_version, model, ref, tag, commit_sha, pipeline_id, verdict, "
    "recorded_at, fingerprint, COALESCE(s.stack, results.stack), CASE WHEN s.data IS NULL THEN points END, "
    "COALESCE(s.config, results.config), CASE WHEN points IS NULL THEN report ELSE NULL END, s.names, s.data"
)  # sqlite reaches a column stored after the report only by walking the report's pages: read none of them
# for a record that has its summary (COALESCE and CASE stop at the first value they need)


def results_table(id_column: str) -> str:
    """Schema version 1 (the ``results`` table and its index) in a dialect: only the id column differs."""
    return f"""
CREATE TABLE IF NOT EXISTS results (
    id {id_column},
    stage TEXT NOT NULL,
    status TEXT NOT NULL,
    channel TEXT,
    device_kind TEXT,
    arch TEXT,
    rocm_version TEXT,
    torch_version TEXT,
    model TEXT,
    ref TEXT,
    commit_sha TEXT,
    pipeline_id TEXT,
    verdict TEXT,
    recorded_at TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    report TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS results_stage_time ON results (stage, recorded_at, id)
"""


@dataclass(frozen=True)
class AnchorMark:
    """An anchor set on purpose: the run every ``compare: anchor`` gate of that stack is measured against."""

    id: int
    run: str  # the store's id of a pinned record (sqlite:12) or a pipeline id
    channel: str | None
    device_kind: str | None
    arch: str | None
    set_by: str
    reason: str
    set_at: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class SeriesRow:
    """One recorded stage result as change detection reads it: where it ran, when, and its metric points."""

    row_id: int
    stage: str
    channel: str | None
    device_kind: str | None
    arch: str | None
    rocm_version: str | None
    model: str | None
    ref: str | None
    tag: str | None
    commit: str | None
    pipeline_id: str | None
    verdict: str | None
    recorded_at: str
    environment: Mapping[str, Any] = field(default_factory=dict)
    stack: Mapping[str, Any] = field(default_factory=dict)
    points: Mapping[str, Sequence[float]] = field(default_factory=dict)
    config: Mapping[str, Any] = field(default_factory=dict)
    levels: Levels | None = None  # the points summarised (series(summaries=True)); then points may be empty

    def info(self, store: str) -> RunInfo:
        return RunInfo(
            self.ref, self.commit, self.pipeline_id, self.verdict, self.recorded_at, f"{store}:{self.row_id}", self.tag
        )


def metric_points(report: StageReport) -> dict[str, list[float]]:
    """Each metric's per-process medians (a metric without samples: its value), finite and positive only."""
    import statistics

    out: dict[str, list[float]] = {}
    for name, m in report.metrics.items():
        if m.samples:
            values = [statistics.median(g) for g in m.samples if g]
        elif m.value is not None:
            values = [float(m.value)]
        else:
            continue
        values = [float(v) for v in values if isinstance(v, int | float) and math.isfinite(v) and v > 0]
        if values:
            out[name] = values
    return out


def contradiction(doc: dict[str, Any], channel: str) -> str | None:
    """A record whose stored report names another channel than the row it was found by is never obeyed."""
    env = doc.get("environment")
    claimed = env.get("channel") if isinstance(env, dict) else None
    if claimed != channel:
        return f"filed under channel {channel!r}, its stored report says {claimed!r}"
    return None


def json_cached(text: Any, seen: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``json_dict``, once per distinct text (the rows then share one dict, which nothing writes to)."""
    if not isinstance(text, str):
        return json_dict(text)
    got = seen.get(text)
    if got is None:
        got = seen[text] = json_dict(text)
    return got


def json_dict(text: Any) -> dict[str, Any]:
    if not text or not isinstance(text, (str, bytes)):
        return {}
    try:  # the strict reader: a column nested 5,000 deep was exit 70 (RecursionError), a duplicate key a decoy
        value = files.parse_json(text, "history store column", what="stored JSON column")
    except InputError:
        return {}
    return value if isinstance(value, dict) else {}
