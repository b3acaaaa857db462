"""Resolve a gate's metric name against stage reports: ``stage.metric``,
``stage.metric.<statistic>`` over the metric's samples, and
``stage.checks.<count>`` derived from the stage's checks."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from gatekeeper.contract.metric_points import PATTERN, SKIPPED
from gatekeeper.contract.stage_report import StageReport

__all__ = ["CHECK_COUNTS", "STATISTICS", "Resolved", "resolve"]

# statistic suffix -> quantile (None: not a quantile)
STATISTICS: dict[str, float | None] = {
    "p50": 0.50,
    "median": 0.50,
    "p90": 0.90,
    "p95": 0.95,
    "p99": 0.99,
    "p999": 0.999,
    "mean": None,
    "min": None,
    "max": None,
    "stdev": None,
    "cv": None,
}
CHECK_COUNTS = ("failed", "passed", "errors", "skipped", "total", "pass_rate")
FAILING_SHOWN = 5  # failing names a reason shows; the rest are counted


@dataclass(frozen=True)
class Resolved:
    value: float | None
    unit: str = ""
    better: str = "none"
    base: str = ""  # the metric the statistic was taken over ("" for a plain metric)
    statistic: str | None = None
    samples: tuple[tuple[float, ...], ...] | None = None  # of the base metric, per process
    missing: str = ""  # why there is no value
    # The first few failing items behind a count (check or test names) and how many there are in all: a gate on
    # the count that does not pass names them, so the red job says which test broke, not only how many.
    failing: tuple[str, ...] = ()
    failing_total: int = 0

    @property
    def ok(self) -> bool:
        return not self.missing and self.value is not None


def resolve(metric: str, reports: Mapping[str, StageReport], waived: Collection[str] = ()) -> Resolved:
    """``waived``: names of checks to leave out of ``stage.checks.*`` counts."""
    stage, _, name = metric.partition(".")
    report = reports.get(stage)
    if report is None:
        return Resolved(
            None, missing=f"no {stage}.json in the artifacts (the stage did not run, or died before writing it)"
        )
    if name.startswith("checks.") and name.split(".", 1)[1] in CHECK_COUNTS:
        return _check_count(report, name.split(".", 1)[1], waived)
    base, _, stat = name.rpartition(".")
    if stat in STATISTICS and base in report.metrics:
        # A statistic over a sampled metric: the stage's own estimate when it wrote one
        # (stage.metric.p99), else computed here; the samples go along for the judge.
        m = report.metrics[base]
        own = report.metrics.get(name)
        if own is not None and own.value is not None:
            return Resolved(own.value, own.unit or m.unit, m.better, base, stat, m.samples)
        flat = m.flat_samples
        if not flat:
            return Resolved(
                None, m.unit, m.better, base, stat, missing=f"{stage}.{base} has no samples to take {stat} of"
            )
        return Resolved(_statistic(stat, flat), m.unit, m.better, base, stat, m.samples)
    if name in report.metrics:
        m = report.metrics[name]
        if m.value is None:
            # A stage that skipped a metric (e.g. a sweep point) says why in its description.
            why = f": {m.description[len(SKIPPED) :]}" if m.description.startswith(SKIPPED) else ""
            return Resolved(None, m.unit, m.better, missing=f"{metric} was not measured in this run{why}")
        return Resolved(m.value, m.unit, m.better, samples=m.samples)
    if PATTERN in name:  # a [*] gate with no point to expand to
        return Resolved(None, missing=f"{stage} reported no point of {name}: this run measured no sweep")
    skipped = _skipped_check_for(report, name)
    if skipped:
        return Resolved(None, missing=f"{stage} did not measure {name}: {skipped}")
    known = ", ".join(sorted(report.metrics)[:8]) or "none"
    return Resolved(None, missing=f"{stage} reported no metric {name!r} (it has: {known})")


def _skipped_check_for(report: StageReport, metric: str) -> str:
    """The reason of a skipped check that produces ``metric`` (check memory_growth -> memory_growth_mb_per_hour)."""

    def norm(text: str) -> str:
        return text.split("#", 1)[0].replace(".", "_")

    wanted = norm(metric)
    for check in report.checks:
        if check.status == "skipped" and wanted.startswith(norm(check.name)):
            return check.message.strip().splitlines()[0] if check.message.strip() else "skipped"
    return ""


def _check_count(report: StageReport, what: str, waived: Collection[str]) -> Resolved:
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0, "info": 0}
    for c in report.checks:
        status = "skipped" if c.name in waived else c.status
        counts[{"error": "errors"}.get(status, status)] += 1
    total = sum(counts.values()) - counts["info"]  # a fact is not a check that ran
    bad = ("error",) if what == "errors" else ("failed", "error")
    names = [c.name for c in report.checks if c.name not in waived and c.status in bad]
    failing, failing_total = tuple(names[:FAILING_SHOWN]), len(names)
    if what == "total":
        return Resolved(float(total), "checks", "none")
    if what == "pass_rate":
        ran = counts["passed"] + counts["failed"] + counts["errors"]
        if ran == 0:
            return Resolved(None, "ratio", "higher", missing=f"no {report.stage} check ran")
        return Resolved(counts["passed"] / ran, "ratio", "higher", failing=failing, failing_total=failing_total)
    if what in ("failed", "errors") and not any(c.status in ("passed", "failed", "error") for c in report.checks):
        # Fail closed: "0 failed" where no check ran (none at all, or every one skipped) is no data, not a pass;
        # the gate's on_missing decides. A waived check ran: its waiver, not this rule, decides.
        return Resolved(None, "checks", "lower", missing=f"no {report.stage} check ran")
    if what == "failed":  # failed or errored: both are checks that did not pass
        return Resolved(
            float(counts["failed"] + counts["errors"]), "checks", "lower", failing=failing, failing_total=failing_total
        )
    if what == "errors":
        return Resolved(float(counts[what]), "checks", "lower", failing=failing, failing_total=failing_total)
    return Resolved(float(counts[what]), "checks", "none")


def _statistic(stat: str, samples: list[float]) -> float:
    import numpy as np

    arr = np.asarray(samples, dtype=float)
    q = STATISTICS[stat]
    if q is not None:
        if len(arr) < 3:
            return float(np.quantile(arr, q))
        # Harrell-Davis: a smooth quantile estimate with far less variance in the tails
        from scipy.stats.mstats import hdquantiles

        return float(hdquantiles(arr, prob=[q])[0])
    if stat == "mean":
        return float(arr.mean())
    if stat == "min":
        return float(arr.min())
    if stat == "max":
        return float(arr.max())
    sd = float(arr.std(ddof=1)) if len(arr) > 1 else 0.0
    return sd if stat == "stdev" else (sd / float(arr.mean()) if arr.mean() else float("nan"))
