"""How often each baseline gate cries wolf on a store's own history: its false-alarm rate, measured.

A gate's alpha is a promise made for an ideal runner. On a real one (a shared node, a GPU whose clocks wander
between jobs, runs that differ more than their processes do) the rate of needless red pipelines can be many
times that. This replays the gates on the recorded history: each run against the run before it in the same
series (same branch, channel, device and configuration), through the very ``evaluate`` a pipeline runs, but
only across pairs where nothing is known to have changed: no change point of any metric between them
(``gatekeeper.stats.find_change_points`` over the series), no stack component and no GPU setting changed
(``gatekeeper.history.changes.stack_diff``), and a comparable baseline (``comparability``). A gate that fails
or warns there raised a false alarm, or saw a change too small for the history to show; either way it is what
the gate costs in red and yellow pipelines nobody can act on. Waivers are left out: this measures the rules.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gatekeeper.contract.stage_report import StageReport
from gatekeeper.contract.verdict import Outcome
from gatekeeper.evaluate.decide import Inputs, evaluate
from gatekeeper.evaluate.gates import Gate, Gates
from gatekeeper.history.baseline import BaselineStore, RunInfo, comparability
from gatekeeper.history.changes import group_key, stack_diff
from gatekeeper.history.sql_schema import SeriesRow
from gatekeeper.stats.changepoint import find_change_points

__all__ = ["GateAlarms", "Replay", "alarms_report", "gates_judged", "replay"]


@dataclass(frozen=True)
class GateAlarms:
    gate: str
    metric: str
    severity: str
    judged: int = 0  # judgements (pairs; pairs x points for a [*] gate) that ended pass, warn, fail or inconclusive
    failed: int = 0
    warned: int = 0
    inconclusive: int = 0
    alpha: float | None = None  # the judge's significance level, when the gate compares samples
    first_alarms: tuple[str, ...] = ()  # "pipeline A -> pipeline B (fail)": where to look

    @property
    def alarms(self) -> int:
        """Judgements that said something changed: failed (a red pipeline) or warned (a yellow one)."""
        return self.failed + self.warned

    @property
    def rate(self) -> float | None:
        return self.alarms / self.judged if self.judged else None

    def interval(self) -> tuple[float, float] | None:
        """95% Clopper-Pearson interval of the alarm rate (scipy.stats.binomtest)."""
        if not self.judged:
            return None
        from scipy.stats import binomtest

        ci = binomtest(self.alarms, self.judged).proportion_ci(confidence_level=0.95, method="exact")
        return float(ci.low), float(ci.high)

    def to_dict(self) -> dict[str, Any]:
        ci = self.interval()
        return {
            "gate": self.gate, "metric": self.metric, "severity": self.severity, "judged": self.judged,
            "failed": self.failed, "warned": self.warned, "inconclusive": self.inconclusive, "alarms": self.alarms,
            "rate": self.rate,
            "ci": list(ci) if ci else None, "alpha": self.alpha, "first_alarms": list(self.first_alarms),
        }  # fmt: skip


@dataclass(frozen=True)
class Replay:
    gates: tuple[GateAlarms, ...]
    runs: int  # records read
    series: int
    pairs: int  # consecutive pairs replayed
    left_out: Mapping[str, int] = field(default_factory=dict)  # why other consecutive pairs were not
    skipped_records: tuple[str, ...] = ()  # records the store could not read

    def to_dict(self) -> dict[str, Any]:
        return {
            "runs": self.runs, "series": self.series, "pairs": self.pairs, "left_out": dict(self.left_out),
            "gates": [g.to_dict() for g in self.gates], "skipped_records": list(self.skipped_records),
        }  # fmt: skip


def replay(
    store: BaselineStore,
    gates: Gates,
    *,
    today: dt.date,
    channel: str | None = None,
    limit: int = 200,
    shown: int = 3,
) -> Replay:
    """The ``compare: baseline`` gates of ``gates`` replayed over the newest ``limit`` records of each stage."""
    chosen = gates_judged(gates)
    tally = {g.name: _Tally() for g in chosen}
    left_out: dict[str, int] = {}
    runs = n_series = pairs = 0
    skipped: list[str] = []
    for stage in sorted({g.stage for g in chosen if g.stage}):
        stage_gates = replace(gates, gates=tuple(g for g in chosen if g.stage == stage), waivers=())
        records = list(reversed(store.history(stage, channel=channel, limit=limit)))
        skipped += [str(s) for s in getattr(store, "skipped", ()) or ()]
        runs += len(records)
        for series in _series(records):
            n_series += 1
            boundaries = _change_boundaries([r for _, r in series])
            for i in range(1, len(series)):
                (info_b, before), (info_a, after) = series[i - 1], series[i]
                why = _why_not(before, after, info_b, info_a, i in boundaries)
                if why:
                    left_out[why] = left_out.get(why, 0) + 1
                    continue
                pairs += 1
                inputs = Inputs(
                    stage_gates, {stage: after}, after.environment.channel, today, baselines={stage: before}
                )
                for result in evaluate(inputs).gates:
                    name = _base_name(result.name, tally)
                    if name is not None:
                        tally[name].add(result.outcome, f"{_run(info_b)} -> {_run(info_a)}")
    out = tuple(tally[g.name].alarms(g, shown) for g in chosen)
    return Replay(out, runs, n_series, pairs, dict(sorted(left_out.items())), tuple(skipped))


class _Tally:
    def __init__(self) -> None:
        self.outcomes: dict[Outcome, int] = {}
        self.where: list[str] = []

    def add(self, outcome: Outcome, where: str) -> None:
        if outcome is Outcome.SKIPPED:  # not judged (a when: condition, a metric this run lacks)
            return
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
        if outcome in (Outcome.FAIL, Outcome.WARN):
            self.where.append(f"{where} ({outcome})")

    def alarms(self, gate: Gate, shown: int) -> GateAlarms:
        o = self.outcomes
        return GateAlarms(
            gate.name, gate.metric, gate.severity, judged=sum(o.values()), failed=o.get(Outcome.FAIL, 0),
            warned=o.get(Outcome.WARN, 0), inconclusive=o.get(Outcome.INCONCLUSIVE, 0), alpha=gate.alpha,
            first_alarms=tuple(self.where[:shown]),
        )  # fmt: skip


def _series(records: Iterable[tuple[RunInfo, StageReport]]) -> list[list[tuple[RunInfo, StageReport]]]:
    """The records (oldest first) split into the series ``history changes`` reads (``group_key``): branch,
    channel, device kind and arch, configuration, project."""
    groups: dict[tuple[Any, ...], list[tuple[RunInfo, StageReport]]] = {}
    for info, report in records:
        groups.setdefault(group_key(_row(report, info)), []).append((info, report))
    return [g for g in groups.values() if len(g) >= 2]


def _change_boundaries(reports: Sequence[StageReport]) -> set[int]:
    """The indices i where the pair (i - 1, i) may straddle a change point of some metric (its whole span)."""
    out: set[int] = set()
    names = {n for r in reports for n, m in r.metrics.items() if m.samples and len(m.samples) >= 2}
    for name in sorted(names):
        have = [i for i, r in enumerate(reports) if (m := r.metrics.get(name)) and m.samples and len(m.samples) >= 2]
        groups = [reports[i].metrics[name].samples for i in have]
        for cp in find_change_points(groups):
            first, last = cp.span or (cp.index, cp.index)
            # a change at position p of the metric's own runs lies between have[p - 1] and have[p]
            for p in range(max(first, 1), last + 1):
                out.update(range(have[p - 1] + 1, have[p] + 1))
    return out


def _why_not(before: StageReport, after: StageReport, info_b: RunInfo, info_a: RunInfo, straddles: bool) -> str:
    if straddles:
        return "a change point between them"
    if comparability(before, after) is not None:
        return "not comparable"
    if stack_diff(_row(before, info_b), _row(after, info_a)):
        return "the stack changed between them"
    return ""


def _row(report: StageReport, info: RunInfo) -> SeriesRow:
    env = report.environment
    config = json.loads(json.dumps(dict(report.config), sort_keys=True, default=str))  # as the store keeps it
    return SeriesRow(
        -1, report.stage, env.channel, env.device_kind, env.arch, env.rocm_version, report.config.get("model"),
        info.ref, info.tag, info.commit, info.pipeline_id, info.verdict, info.recorded_at or "", env.to_dict(),
        dict(info.stack or {}), {}, config,
    )  # fmt: skip


def _base_name(result_name: str, counts: Mapping[str, Any]) -> str | None:
    """The gate a result belongs to: its own name, or a [*] gate's point result ``name[label]``."""
    if result_name in counts:
        return result_name
    base = result_name.split("[", 1)[0]
    return base if base in counts else None


def _run(info: RunInfo) -> str:
    return f"pipeline {info.pipeline_id}" if info.pipeline_id else f"run {info.run_id or '?'}"


def gates_judged(gates: Gates) -> tuple[Gate, ...]:
    """The gates ``replay`` measures: ``compare: baseline`` gates of a stage."""
    return tuple(g for g in gates.gates if g.compare == "baseline" and g.stage and not g.junit)


def alarms_report(
    *, history: str, gates_path: str | None = None, channel: str | None = None, limit: int = 200, fmt: str = "table"
) -> tuple[str, list[str]]:
    """``gatekeeper history alarms``: ``replay`` over a store, as a table, JSON or markdown; with the records the
    store could not read, for warnings."""
    from gatekeeper.core.errors import InputError
    from gatekeeper.evaluate.gates import default_gates_path, load_gates
    from gatekeeper.history import open_store
    from gatekeeper.history.postgres import redact_url

    if limit < 2:
        raise InputError(None, "--limit", f"{limit} runs make no pair", "give at least 2 (default 200)")
    path = default_gates_path(gates_path)
    gates = load_gates(path)
    store = open_store(history)
    done = replay(store, gates, today=dt.datetime.now(dt.timezone.utc).date(), channel=channel, limit=limit)
    if fmt == "json":
        return json.dumps({"store": redact_url(history), "gates_file": str(path), **done.to_dict()}, indent=1) + "\n", [
            *done.skipped_records
        ]
    head = (
        f"{done.pairs} pairs of consecutive runs with nothing known to have changed between them "
        f"({done.runs} runs in {done.series} series of {redact_url(history)}; gates: {path})"
    )
    left = ", ".join(f"{n} with {why}" if why.startswith("a ") else f"{n} {why}" for why, n in done.left_out.items())
    lines = _md(head, done, left) if fmt == "md" else _table(head, done, left)
    return "\n".join(lines) + "\n", list(done.skipped_records)


def _cells(g: GateAlarms) -> list[str]:
    ci = g.interval()
    rate = f"{g.rate:.1%}" if g.rate is not None else "-"
    return [
        g.gate, g.metric, str(g.judged), str(g.failed), str(g.warned), rate,
        f"{ci[0]:.1%}-{ci[1]:.1%}" if ci else "-", f"{g.alpha:g}" if g.alpha is not None else "-", str(g.inconclusive),
    ]  # fmt: skip


_HEAD = ["gate", "metric", "judged", "failed", "warned", "alarm rate", "95% interval", "alpha", "inconclusive"]


def _table(head: str, done: Replay, left: str) -> list[str]:
    from gatekeeper.core.escape import terminal

    rows = [_HEAD, *([terminal(c, newlines=False) for c in _cells(g)] for g in done.gates if g.judged)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(_HEAD))]
    lines = [terminal(head) + ":"]
    lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    for g in done.gates:
        if g.first_alarms:
            lines.append(terminal(f"  {g.gate} alarms at: " + "; ".join(g.first_alarms), newlines=False))
    if left:
        lines.append(f"left out: {left}")
    if idle := _idle(done):
        lines.append(f"not judged (no two consecutive runs to compare had their metric): {terminal(idle)}")
    lines.append(_MEANING)
    return lines


def _md(head: str, done: Replay, left: str) -> list[str]:
    from gatekeeper.core.escape import md_text

    lines = [md_text(head), "", "| " + " | ".join(_HEAD) + " | first alarms |", "|" + " --- |" * (len(_HEAD) + 1)]
    for g in (g for g in done.gates if g.judged):
        lines.append("| " + " | ".join(md_text(c) for c in [*_cells(g), "; ".join(g.first_alarms)]) + " |")
    if left:
        lines += ["", f"Left out: {md_text(left)}."]
    if idle := _idle(done):
        lines += ["", f"Not judged (no two consecutive runs to compare had their metric): {md_text(idle)}."]
    return [*lines, "", _MEANING]


def _idle(done: Replay) -> str:
    return ", ".join(g.gate for g in done.gates if not g.judged)


_MEANING = (
    "A gate that failed or warned between two runs with nothing changed raised a false alarm, or saw a change too "
    "small for the history to show: compare the alarm rate with alpha. Far above it, the runner's runs differ "
    "more than their processes show (docs/history.md, 'How often a gate cries wolf')."
)
