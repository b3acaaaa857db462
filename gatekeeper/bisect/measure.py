"""One measurement round of one candidate: the stage (or the command) run once in its environment.

A *round* of a stage is one ``gatekeeper stage`` run: its processes are the
stage's own (``performance_baseline --processes k`` starts k timing
processes). When a comparison stays unknown the bisection adds rounds; the
rounds of one candidate are pooled by ``pooled`` (per-process samples side by
side) before the judge sees them, exactly as more ``--processes`` would have
given. A round of a command is one run of it; its exit code is the measurement.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gatekeeper.bisect.providers.base import OUT, Prepared
from gatekeeper.contract.stage_report import Check, Metric, StageReport, parse_stage
from gatekeeper.core import budgets, files, proc
from gatekeeper.core.errors import InputError
from gatekeeper.core.redact import redact

__all__ = ["Measured", "Runner", "pooled", "process_count"]

TAIL_LINES = 15
_STATS = ("p50", "median", "p90", "p95", "p99", "p999", "mean", "min", "max", "stdev", "cv")
_WORST = {"error": 3, "failed": 2, "passed": 1, "skipped": 0, "info": 0}


@dataclass
class Measured:
    """What is known of one candidate: its rounds as bisect.json records them, and their stage reports."""

    index: int
    rounds: list[dict[str, Any]] = field(default_factory=list)
    reports: list[StageReport | None] = field(default_factory=list)  # stage mode: one per round (None: no result)

    def processes(self) -> int:
        """Processes measured so far: the timing processes of every round (a round without any counts 1)."""
        return sum(r.get("processes") or 1 for r in self.rounds) if self.rounds else 0

    def report(self) -> StageReport | None:
        """The rounds pooled into one stage report (None when no round wrote one)."""
        return pooled([r for r in self.reports if r is not None])


def process_count(report: StageReport | None, metric: str | None) -> int:
    """Timing processes in ``report``: the sample groups of ``metric`` (else of any sampled metric; at least 1)."""
    if report is None:
        return 1
    if metric and metric in report.metrics and report.metrics[metric].samples:
        return len(report.metrics[metric].samples or ())
    sampled = [len(m.samples) for m in report.metrics.values() if m.samples]
    return max(sampled) if sampled else 1


def pooled(reports: Sequence[StageReport]) -> StageReport | None:
    """Several rounds of one stage as one report, as if its processes had run in one.

    A sampled metric gets every round's per-process samples, and its value is
    recomputed the way the stages compute it (median of the per-process
    medians); the statistics the stage wrote over them (``latency_ms.p99``) are
    dropped so the evaluation computes them from the pooled samples. A metric
    without samples keeps its worst value over the rounds (max where lower is
    better, min where higher is), so pooling never hides a bad round. Checks of
    later rounds are kept, named ``round<k>/<check>``.
    """
    if not reports:
        return None
    if len(reports) == 1:
        return reports[0]
    first = reports[0]
    sampled = {n for r in reports for n, m in r.metrics.items() if m.samples}
    metrics: dict[str, Metric] = {}
    names = list(dict.fromkeys(n for r in reports for n in r.metrics))
    for name in names:
        base, _, stat = name.rpartition(".")
        if stat in _STATS and base in sampled:
            continue
        have = [r.metrics[name] for r in reports if name in r.metrics]
        ref = have[0]
        if name in sampled:
            groups = [list(g) for m in have for g in (m.samples or ())]
            value = statistics.median(statistics.median(g) for g in groups) if groups else None
            metrics[name] = Metric.of(value, ref.unit, ref.better, groups, ref.description)
            continue
        values = [m.value for m in have if m.value is not None]
        if not values:
            metrics[name] = ref
            continue
        worst = max(values) if ref.better == "lower" else min(values) if ref.better == "higher" else values[-1]
        metrics[name] = Metric(worst, ref.unit, ref.better, None, ref.description)
    checks: list[Check] = list(first.checks)
    for k, r in enumerate(reports[1:], 2):
        checks += [replace(c, name=f"round{k}/{c.name}") for c in r.checks]
    status = max((r.status for r in reports), key=lambda s: _WORST.get(s, 0))
    return replace(
        first,
        status=status,
        duration_s=sum(r.duration_s for r in reports),
        metrics=metrics,
        checks=tuple(checks),
    )


class Runner:
    """Runs rounds; everything it writes lies under ``out`` (paths in bisect.json are relative to it)."""

    def __init__(
        self,
        *,
        out: Path,
        stage: str | None,
        stage_args: Sequence[str],
        command: Sequence[str],
        metric: str | None,
        timeout: float,
    ) -> None:
        self.out = out
        self.stage = stage
        self.stage_args = list(stage_args)
        self.command = list(command)
        self.metric = metric
        self.timeout = timeout

    def round_dir(self, prepared: Prepared, k: int) -> Path:
        c = prepared.candidate
        # the label is a name here, never a path (a resumed bisect.json is a file: "../x" stays under ``out``)
        name = re.sub(r"[^A-Za-z0-9._+-]", "_", c.label)[:80]
        return self.out / "candidates" / f"{c.index:04d}-{name}" / f"round{k}"

    def run(self, prepared: Prepared, k: int) -> tuple[dict[str, Any], StageReport | None]:
        """Round ``k`` of ``prepared``'s candidate: (its bisect.json record, its stage report or None)."""
        where = self.round_dir(prepared, k)
        if where.exists():
            shutil.rmtree(where)  # a round an interrupted run left unfinished: measured again, whole
        where.mkdir(parents=True)
        if self.stage:
            argv = ["-m", "gatekeeper", "stage", self.stage, "--out", OUT, *self.stage_args]
            inv = prepared.render(argv, where, python=True)
        else:
            inv = prepared.render(self.command, where)
        env = {**inv.env, "GATEKEEPER_BISECT_CANDIDATE": prepared.candidate.ref, "GATEKEEPER_BISECT_OUT": str(where)}
        res = proc.run(inv.argv, timeout=self.timeout, env=env, cwd=inv.cwd)
        output = (res.stdout or "") + ("\n" if res.stdout and res.stderr else "") + (res.stderr or "")
        files.atomic_write(where / "output.log", output)
        record: dict[str, Any] = {
            "round": k,
            "exit_code": res.returncode,
            "outcome": res.describe(),
            "duration_s": round(res.duration_s, 3),
            "processes": 1,
            "file": None,
            "sha256": None,
            "metrics": {},
            "output_tail": [redact(line)[:300] for line in output.strip().splitlines()[-TAIL_LINES:]],
        }
        if not self.stage:
            return record, None
        path = where / f"{self.stage}.json"
        if not path.exists():
            return record, None
        try:  # read once: the bytes hashed are the bytes parsed (the stage, code under test, wrote them)
            data = budgets.read_capped(path, max_bytes=budgets.MAX_JSON_BYTES, what="stage artifact")
            report = parse_stage(files.parse_json(data, path, what="stage artifact"), path)
        except InputError as err:
            record["outcome"] += f"; its result is unreadable: {err.line()}"
            return record, None
        record["file"] = path.relative_to(self.out).as_posix()
        record["sha256"] = hashlib.sha256(data).hexdigest()
        record["processes"] = process_count(report, self.metric)
        record["metrics"] = summarise(report, self.metric)
        return record, report

    def reload(self, record: dict[str, Any]) -> StageReport | None:
        """A round's stage report again (``--resume``), checked against the hash bisect.json recorded."""
        rel = record.get("file")
        if not rel:
            return None
        path = (self.out / rel).resolve()
        if self.out.resolve() not in path.parents:
            raise InputError(
                self.out / "bisect.json",
                "candidates",
                f"round file {rel!r} lies outside {self.out}",
                "do not edit bisect.json by hand",
            )
        if not path.is_file():
            raise InputError(path, "", "a measured round's stage result is missing", "rerun without --resume")
        # one bounded read of a regular file (the artifact budget): the bytes hashed are the bytes parsed
        data = budgets.read_capped(path, max_bytes=budgets.MAX_JSON_BYTES, what="round's stage result")
        if hashlib.sha256(data).hexdigest() != record.get("sha256"):
            raise InputError(
                path, "", "changed since bisect.json recorded it (sha256 differs)", "rerun without --resume"
            )
        return parse_stage(files.parse_json(data, path, what="stage artifact"), path)


def summarise(report: StageReport, metric: str | None) -> dict[str, Any]:
    """The sampled metrics of a round, as bisect.json shows them: value, unit and per-process medians."""
    out: dict[str, Any] = {}
    for name, m in report.metrics.items():
        if metric and name != metric:
            continue
        if not m.samples and not metric:
            continue
        entry: dict[str, Any] = {"value": m.value, "unit": m.unit}
        if m.samples:
            entry["process_medians"] = [round(statistics.median(g), 6) for g in m.samples if g]
        out[name] = entry
    return out
