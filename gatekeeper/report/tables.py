"""The report's tables as rows of plain text, shared by the HTML and markdown renderers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gatekeeper.contract.stage_report import Environment, StageReport
from gatekeeper.contract.verdict import GateResult, Outcome
from gatekeeper.evaluate import point_gates
from gatekeeper.report.data import ReportData, category_rows

__all__ = [
    "HEADLINE",
    "OUTCOME_LABEL",
    "Table",
    "category_table",
    "change_table",
    "environment_table",
    "gate_table",
    "number",
    "stage_table",
    "sweep_tables",
]

HEADLINE = {"pass": "PASSED", "warn": "PASSED WITH WARNINGS", "blocked": "BLOCKED"}  # not a password  # nosec B105
OUTCOME_LABEL = {
    Outcome.PASS: "pass",
    Outcome.WARN: "warn",
    Outcome.FAIL: "fail",
    Outcome.INCONCLUSIVE: "inconclusive",
    Outcome.WAIVED: "waived",
    Outcome.SKIPPED: "skipped",
}


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    classes: tuple[str, ...] = ()  # one CSS class per row (outcome), for the HTML renderer


def number(value: float | None, unit: str = "") -> str:
    if value is None:
        return "—"
    if unit == "ratio" and (value == 0 or 1e-3 <= value <= 1):
        return f"{value * 100:.4g}%"
    text = f"{value:.4g}"
    return f"{text} {unit}".strip() if unit and unit != "bool" else text


def _change(change: float | None) -> str:
    return "—" if change is None else f"{change * 100:+.1f}%"


def _order(g: GateResult) -> int:
    if g.blocking:
        return 0
    return {Outcome.FAIL: 1, Outcome.WARN: 2, Outcome.INCONCLUSIVE: 3, Outcome.WAIVED: 4, Outcome.PASS: 5}.get(
        g.outcome, 6
    )


def gate_table(gates: Sequence[GateResult]) -> Table:
    rows, classes = [], []
    for g in sorted(gates, key=_order):
        tags = [t for t in ("blocking" if g.blocking else "", g.severity if g.severity != "blocking" else "") if t]
        if g.mode == "shadow":
            tags.append("shadow")
        label = OUTCOME_LABEL[g.outcome] + (f" ({', '.join(tags)})" if tags else "")
        rule = g.rule + (f"; warn {g.warn_rule}" if g.warn_rule else "")
        rows.append(
            (
                g.name,
                label,
                number(g.value, g.unit),
                rule,
                number(g.baseline_value, g.unit),
                _change(g.change),
                g.reason,
            )
        )
        classes.append("blocking" if g.blocking else g.outcome.value)
    header = ("gate", "outcome", "value", "rule", "baseline", "change", "reason")
    return Table(header, tuple(rows), tuple(classes))


def sweep_tables(points: Sequence[GateResult]) -> list[tuple[str, Table]]:
    """(caption, table) of the results of ``metric[*]`` gates, one per sweep: a row per point, a column per gate."""
    out = []
    for t in point_gates.sweep_tables(points):
        rows, classes = [], []
        for point, results in t.rows:
            cells = [point[k] for k in t.keys]
            for gate in t.gates:
                r = results.get(gate)
                if r is None:
                    cells.append("—")
                    continue
                change = f" ({_change(r.change)})" if r.change is not None else ""
                cells.append(f"{OUTCOME_LABEL[r.outcome]} {number(r.value, r.unit)}{change}")
            worst = min(results.values(), key=_order)
            rows.append(tuple(cells))
            classes.append("blocking" if worst.blocking else worst.outcome.value)
        caption = f"Sweep over {', '.join(t.keys)} ({len(rows)} points, each judged on its own)"
        out.append((caption, Table((*t.keys, *t.gates), tuple(rows), tuple(classes))))
    return out


def category_table(data: ReportData) -> Table | None:
    rows = category_rows(data.reports.get("functional_test"))
    if not rows:
        return None
    out, classes = [], []
    for r in rows:
        failing = ", ".join(r.failing_ops[:12]) + (
            f" (+{len(r.failing_ops) - 12} more)" if len(r.failing_ops) > 12 else ""
        )
        out.append(
            (
                r.category,
                "—" if r.cases is None else str(r.cases),
                "—" if r.passed is None else str(r.passed),
                number(r.pass_rate, "ratio"),
                failing or "—",
            )
        )
        classes.append("pass" if r.pass_rate is not None and r.pass_rate >= 1 else ("fail" if r.failing_ops else ""))
    return Table(("category", "cases", "passed", "pass rate", "failing operators"), tuple(out), tuple(classes))


def stage_table(reports: dict[str, StageReport] | Sequence[StageReport]) -> Table:
    items = reports.values() if isinstance(reports, dict) else reports
    rows, classes = [], []
    for r in items:
        c = r.counts()
        bad = [
            f"{x.name}: {x.message.splitlines()[0] if x.message else x.status}"
            for x in r.checks
            if x.status in ("failed", "error")
        ]
        rows.append(
            (
                r.stage,
                r.status,
                f"{c['passed']} passed, {c['failed']} failed, {c['error']} errors, {c['skipped']} skipped"
                + (f", {c['info']} info" if c["info"] else ""),
                f"{r.duration_s:.1f} s",
                "; ".join(bad[:5]) + (f" (+{len(bad) - 5} more)" if len(bad) > 5 else "") or "—",
            )
        )
        classes.append({"passed": "pass", "failed": "fail", "error": "fail"}.get(r.status, "skipped"))
    return Table(("stage", "status", "checks", "duration", "failed checks"), tuple(rows), tuple(classes))


_ENV_FIELDS = (
    ("channel", "channel"),
    ("device", "device_kind"),
    ("GPU", "device_name"),
    ("architecture", "gfx_arch"),
    ("compute capability", "compute_capability"),
    ("devices", "device_count"),
    ("torch", "torch_version"),
    ("torch git hash", "torch_git_hash"),
    ("ROCm", "rocm_version"),
    ("HIP", "hip_version"),
    ("CUDA", "cuda_version"),
    ("driver", "driver"),
    ("Python", "python"),
    ("host", "host"),
)


def change_table(data: ReportData) -> Table | None:
    """Every change point the trends show (``gatekeeper history changes`` has the whole history)."""
    from gatekeeper.report.data import trend_changes
    from gatekeeper.report.plots import TREND_METRICS

    rows = []
    for stage, metric in TREND_METRICS:
        for c in trend_changes(data.history.get(stage, ()), metric):
            interval = f"{c.change * 100:+.1f}% [{c.ci[0] * 100:+.1f}, {c.ci[1] * 100:+.1f}]"
            rows.append((c.metric, c.label, interval, f"{c.p_value:.2g}"))
    if not rows:
        return None
    return Table(("metric", "first run after", "change [95% CI]", "p"), tuple(rows))


def environment_table(env: Environment | None) -> Table | None:
    if env is None:
        return None
    rows = [(label, str(getattr(env, name))) for label, name in _ENV_FIELDS if getattr(env, name) not in (None, "")]
    rows += [(str(k), str(v)) for k, v in env.extra.items() if v not in (None, "")]
    return Table(("", ""), tuple(rows))


def headline(data: ReportData) -> str:
    if data.verdict is None:
        return "NO VERDICT"
    return HEADLINE.get(data.verdict.result, data.verdict.result.upper())
