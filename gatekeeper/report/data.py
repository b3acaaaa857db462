"""What a report shows, gathered once from files and stores: the verdict, the stage
reports, the baselines, the history of the same channel and device, and the failure
diagnoses. The renderers (html, markdown, plots) read only this record."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gatekeeper.contract.analysis import Analysis, read_analysis
from gatekeeper.contract.soak_series import SERIES_FILE, read_series
from gatekeeper.contract.stage_names import STAGE_NAMES
from gatekeeper.contract.stage_report import Environment, StageReport, read_artifacts
from gatekeeper.contract.verdict import Verdict, read_verdict
from gatekeeper.history import BaselineStore, RunInfo, comparability, history_noting, open_store

__all__ = [
    "CategoryRow",
    "ReportData",
    "Run",
    "TrendChange",
    "category_rows",
    "collect",
    "history_points",
    "trend_changes",
]

# Stages whose history is kept for trends, in pipeline order (the stage registry imports no stage).
TREND_STAGES = STAGE_NAMES


@dataclass(frozen=True)
class Run:
    """One earlier (or this) run of a stage: where it came from and what it measured."""

    info: RunInfo
    report: StageReport
    current: bool = False

    @property
    def label(self) -> str:
        when = (self.info.recorded_at or self.report.started_at or "")[5:10]  # MM-DD: the year is in the table
        who = f"#{self.info.pipeline_id}" if self.info.pipeline_id else (self.info.commit or "")[:7]
        return "this run" if self.current else " ".join(x for x in (when, who) if x) or "?"


@dataclass(frozen=True)
class CategoryRow:
    category: str
    cases: int | None
    passed: int | None
    pass_rate: float | None
    failing_ops: tuple[str, ...]


@dataclass(frozen=True)
class ReportData:
    artifacts: Path
    verdict: Verdict | None
    reports: Mapping[str, StageReport]
    environment: Environment | None
    baselines: Mapping[str, StageReport] = field(default_factory=dict)
    notes: tuple[str, ...] = ()  # what is missing, and why, in plain words
    history: Mapping[str, tuple[Run, ...]] = field(default_factory=dict)  # stage -> oldest..newest incl. this run
    diagnoses: tuple[Analysis, ...] = ()
    soak_series: tuple[Mapping[str, Any], ...] = ()  # performance_baseline's soak windows, when it soaked

    @property
    def channel(self) -> str:
        if self.verdict is not None:
            return self.verdict.channel
        return self.environment.channel if self.environment else "stable"


def category_rows(report: StageReport | None) -> tuple[CategoryRow, ...]:
    """The per-category operator table: the stage's own table, else its op_pass_rate.<category> metrics."""
    if report is None:
        return ()
    table = report.summary.get("categories")
    if isinstance(table, Mapping) and table:
        rows = []
        for name, value in table.items():
            row = value if isinstance(value, Mapping) else {}
            rows.append(
                CategoryRow(
                    str(name),
                    _int(row.get("cases")),
                    _int(row.get("passed")),
                    row.get("pass_rate") if isinstance(row.get("pass_rate"), int | float) else None,
                    tuple(str(o) for o in row.get("failing_ops") or ()),
                )
            )
        return tuple(rows)
    prefix = "op_pass_rate."
    return tuple(
        CategoryRow(name[len(prefix) :], None, None, m.value, ())
        for name, m in report.metrics.items()
        if name.startswith(prefix)
    )


def collect(
    artifacts: Path,
    *,
    history: str | None = None,
    baseline: str | None = None,
    limit: int = 10,
    history_store: BaselineStore | None = None,
    baseline_store: BaselineStore | None = None,
) -> ReportData:
    """Read everything a report shows. Stores come as specs (``--history``) or, from tests, as objects."""
    artifacts = Path(artifacts)
    reports = read_artifacts(artifacts)
    notes: list[str] = []
    verdict_path = artifacts / "verdict.json"
    verdict = read_verdict(verdict_path) if verdict_path.is_file() else None
    if verdict is None:
        notes.append(f"no verdict.json in {artifacts}: run 'gatekeeper evaluate' first; the stages are shown as-is")
    if not reports:
        notes.append(f"no stage artifacts (<stage>.json) in {artifacts}")
    environment = _environment(verdict, reports)
    analysis_path = artifacts / "analysis.json"
    diagnoses = (read_analysis(analysis_path),) if analysis_path.is_file() else ()
    if baseline_store is None and baseline:
        baseline_store = open_store(baseline)
    if history_store is None and history:
        history_store = open_store(history)
    baselines = _baselines(baseline_store, reports, notes) if baseline_store is not None else {}
    runs: dict[str, tuple[Run, ...]] = {}
    if history_store is not None and environment is not None:
        runs = _history(history_store, reports, environment, limit, notes)
        if baseline_store is None:  # the newest comparable earlier run is the baseline for the plots
            for stage, seq in runs.items():
                earlier = [r for r in seq if not r.current]
                if earlier and stage not in baselines:
                    baselines[stage] = earlier[-1].report
    elif history_store is None:
        notes.append("no --history store given: no trends over earlier runs")
    soak = tuple(read_series(artifacts / SERIES_FILE))  # kept even when a killed soak wrote no stage report
    return ReportData(artifacts, verdict, reports, environment, baselines, tuple(notes), runs, diagnoses, soak)


def _environment(verdict: Verdict | None, reports: Mapping[str, StageReport]) -> Environment | None:
    if verdict is not None and verdict.environment:
        return Environment.from_dict(verdict.environment)
    for report in reports.values():
        return report.environment
    return None


def _baselines(store: BaselineStore, reports: Mapping[str, StageReport], notes: list[str]) -> dict[str, StageReport]:
    found = {}
    for stage, report in reports.items():
        base = store.latest(stage, report)
        if base is not None and comparability(base, report) is None:
            found[stage] = base
        else:
            notes.append(f"no comparable {stage} baseline in the baseline store")
    return found


def _history(
    store: BaselineStore, reports: Mapping[str, StageReport], env: Environment, limit: int, notes: list[str]
) -> dict[str, tuple[Run, ...]]:
    out: dict[str, tuple[Run, ...]] = {}
    for stage in sorted(set(TREND_STAGES) | set(reports), key=_stage_order):
        current = reports.get(stage)
        earlier: list[Run] = []
        # Ask for more than needed: runs of other devices are filtered out here.
        for info, report in history_noting(store, stage, notes, channel=env.channel, limit=limit * 4):
            if not _same_device(report.environment, env) or _same_run(report, current):
                continue
            earlier.append(Run(info, report))
            if len(earlier) >= limit - (current is not None):
                break
        seq = list(reversed(earlier))
        if current is not None:
            seq.append(Run(RunInfo(recorded_at=current.started_at), current, current=True))
        if seq:
            out[stage] = tuple(seq)
    return out


def _stage_order(stage: str) -> tuple[int, str]:
    return (TREND_STAGES.index(stage) if stage in TREND_STAGES else len(TREND_STAGES), stage)


def _same_device(a: Environment, b: Environment) -> bool:
    return a.device_kind == b.device_kind and a.arch == b.arch


def _same_run(report: StageReport, current: StageReport | None) -> bool:
    return current is not None and report.started_at == current.started_at and report.stage == current.stage


def history_points(runs: Sequence[Run], metric: str) -> list[tuple[str, float]]:
    """(label, value) of ``metric`` over ``runs``, skipping runs that did not measure it."""
    from gatekeeper.evaluate.metrics import resolve

    out = []
    for run in runs:
        got = resolve(f"{run.report.stage}.{metric}", {run.report.stage: run.report})
        if got.ok and got.value is not None:
            out.append((run.label, got.value))
    return out


@dataclass(frozen=True)
class TrendChange:
    """A change point in a trend: the metric, the first run after it, and the change with its interval."""

    metric: str  # stage.metric as the trend shows it
    index: int  # of the first run after the change, in the trend's runs (oldest first)
    label: str  # that run's label
    change: float
    ci: tuple[float, float]
    p_value: float


def trend_changes(runs: Sequence[Run], metric: str) -> list[TrendChange]:
    """The change points of ``metric`` over ``runs`` (``gatekeeper.stats.changepoint``), on each run's
    per-process samples where the metric has them (a body statistic or the metric itself), else its value."""
    from gatekeeper.evaluate.metrics import resolve
    from gatekeeper.stats.changepoint import find_change_points

    labels, groups = [], []
    for run in runs:
        got = resolve(f"{run.report.stage}.{metric}", {run.report.stage: run.report})
        if not got.ok or got.value is None:
            continue  # as history_points: the indexes of both agree
        if got.value <= 0:
            return []  # an error of 0, a rate of 0: not a level to find changes of
        body = got.statistic in (None, "p50", "median", "mean")
        samples = [list(g) for g in got.samples or () if g and min(g) > 0] if body else []
        groups.append(samples or [[got.value]])
        labels.append(run.label)
    try:
        found = find_change_points(groups)
    except ValueError:  # a run with samples that are not positive: no trend to judge
        return []
    stage = runs[0].report.stage if runs else ""
    return [TrendChange(f"{stage}.{metric}", cp.index, labels[cp.index], cp.change, cp.ci, cp.p_value) for cp in found]


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
