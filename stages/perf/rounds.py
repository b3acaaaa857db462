"""Sequential sampling in performance_baseline: time processes in rounds until the judge can decide.

The first round is --processes fresh processes. With a comparable baseline
(``--baseline SPEC``, the store ``gatekeeper evaluate`` reads), its stored
per-process latency samples are reused (never re-measured) and, after every
further process, the stopping rule ``gatekeeper.stats.sequential`` is asked:
regression, improvement or equivalent ends the run; otherwise one more process,
until --max-processes processes were started or --max-seconds have passed, when
the run ends as inconclusive. The rule's error rates hold whenever it stops, so
the evaluate judge replays the recorded looks (``summary.sequential``) and comes
to the same answer.

Without a baseline there is nothing to decide: the first round is the whole run.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from gatekeeper.contract.stage_report import StageReport, utc_now
from gatekeeper.core.errors import InputError
from gatekeeper.history import baseline_branch, comparability, open_store
from gatekeeper.stats.sequential import SequentialRule
from gatekeeper.stats.sequential_plan import Plan, Step
from stages._stage import StageContext
from stages.perf import measure

__all__ = ["MAX_CV_LIMIT", "METRIC", "NOISE_HINT", "Baseline", "load_baseline", "measure_rounds"]

METRIC = "latency_ms"  # the metric the rounds decide on (the default latency-median gate's)
MAX_CV_LIMIT = 0.5  # --max-cv at most this, as a gate's max_cv in gates.yaml
# The rounds' noise guard is --max-cv; evaluate judges the recorded rounds at the gate's own max_cv.
NOISE_HINT = (
    "--max-cv of performance_baseline; more processes (--max-processes), a quieter runner, "
    "or raise --max-cv with the gate's max_cv"
)


@dataclass(frozen=True)
class Baseline:
    samples: list[list[float]] | None  # per-process latency samples (ms); None: no usable baseline
    note: str = ""  # why there is none, in plain words
    run: dict[str, Any] = field(default_factory=dict)  # where it came from (RunInfo)


def load_baseline(ctx: StageContext, spec: str | None) -> Baseline:
    """The newest comparable stored result, as ``gatekeeper evaluate`` picks it (same store, branch and policy).

    A spec that cannot be opened is bad input (exit 2); a store that cannot be read now
    (network, permissions) costs only the early stop: the run goes on with --processes.
    """
    if not spec:
        return Baseline(None, "no --baseline store was given")
    store = open_store(spec, os.environ, missing_ok=True)  # a first run: the store does not exist yet
    like = StageReport(ctx.name, "passed", utc_now(), 0.0, ctx.environment, config=dict(ctx.config))
    try:
        record = store.latest_record(ctx.name, like, branch=baseline_branch(os.environ))
    except InputError as err:
        return Baseline(None, f"the baseline store could not be read ({err.line()})")
    if record is None:
        why = getattr(store, "why_missing", "") or f"the store {spec} has no comparable {ctx.name} result"
        return Baseline(None, why)
    info, report = record
    reason = comparability(report, like)
    if reason:
        return Baseline(None, f"the stored result is not comparable: {reason}")
    m = report.metrics.get(METRIC)
    if m is None or not m.samples:
        return Baseline(None, f"the baseline ({info.describe()}) has no per-process {METRIC} samples")
    converged = report.metrics.get("warmup_converged")
    if converged is not None and converged.value == 0.0:
        return Baseline(None, f"the baseline's warm-up did not converge ({info.describe()})")
    return Baseline([list(g) for g in m.samples], "", info.to_dict())


def _samples(results: list[dict[str, Any]]) -> list[list[float]]:
    return [[t * 1000.0 for t in r["times_s"]] for r in results]


def measure_rounds(
    ctx: StageContext, cfg: dict[str, Any], baseline: Baseline
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    """Time rounds of fresh processes; like ``measure.measure_point`` (results, clocks, why it stopped early),
    and writes ``summary.sequential`` (processes, looks, plan, verdict, why it stopped) and an info check."""
    opts, rec = ctx.options, ctx.rec
    start = time.monotonic()
    results, clocks, why = measure.measure_point(ctx, cfg)
    attempted = opts.processes
    if why or baseline.samples is None or not results:
        stopped = why or (
            f"no baseline to decide against ({baseline.note}): ran the first round of {opts.processes} processes"
            if results
            else "every timing process failed"
        )
        rec.summary["sequential"] = {"metric": METRIC, "sequential": False, "processes": len(results)}
        rec.summary["sequential"] |= {"attempted": attempted, "stopped": stopped}
        rec.record("sequential", "info", f"{len(results)} processes: {stopped}")
        return results, clocks, why
    plan = Plan(max_processes=opts.max_processes, min_effect=opts.min_effect, max_cv=opts.max_cv)
    rule = SequentialRule(plan, noise_hint=NOISE_HINT)
    while True:
        spent = ""
        if attempted >= opts.max_processes and len(results) < opts.max_processes:
            spent = f"--max-processes {opts.max_processes} started, {attempted - len(results)} failed"
        elif opts.max_seconds is not None and time.monotonic() - start >= opts.max_seconds:
            spent = f"--max-seconds {opts.max_seconds:g} spent"
        step = rule.look(baseline.samples, _samples(results), budget_spent=spent)
        _log_look(ctx, step)
        if step.stop:
            break
        more, more_clocks, _ = measure.measure_point(ctx, cfg, count=1, start=attempted)
        attempted += 1
        results += more
        clocks += more_clocks
    seconds = time.monotonic() - start
    rec.summary["sequential"] = {
        "metric": METRIC,
        "sequential": True,
        "processes": len(results),
        "attempted": attempted,
        "baseline_processes": len(baseline.samples),
        "baseline": baseline.run,
        "looks": [list(x) for x in step.looks],
        "plan": plan.to_dict(),
        "max_seconds": opts.max_seconds,
        "seconds": round(seconds, 2),
        "verdict": step.verdict,
        "stopped": step.reason,
    }
    rec.record(
        "sequential",
        "info",
        f"{len(results)} processes against the baseline's {len(baseline.samples)} in {seconds:.0f} s: "
        f"{step.verdict}: {step.reason}",
    )
    return results, clocks, ""


def _log_look(ctx: StageContext, step: Step) -> None:
    ratio = f"median {(step.ratio - 1) * 100:+.1f}%" if step.ratio is not None else "no estimate"
    state = step.verdict if step.stop else "more processes"
    ctx.rec.log(f"  look {len(step.looks)}: {step.processes} processes, {ratio} -> {state}")
