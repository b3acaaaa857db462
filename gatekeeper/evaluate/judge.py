"""Baseline gates over raw samples: the statistical judge (gatekeeper.stats.compare) applied
to a gate, and the Holm correction across every judged gate of one verdict."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

from gatekeeper.contract.verdict import GateResult, Outcome
from gatekeeper.evaluate.gates import Gate
from gatekeeper.evaluate.metrics import Resolved

if TYPE_CHECKING:  # scipy is imported only when a statistical comparison runs
    from gatekeeper.stats.compare import Comparison

__all__ = ["holm_adjust", "judge_gate", "noise_hint", "uses_judge"]

_BODY_STATS = (None, "p50", "median", "mean")
_MIN_PROCESSES = 2


def uses_judge(candidate: Resolved, baseline: Resolved) -> bool:
    """Samples from at least two processes on both sides: a statistical test is possible."""
    return bool(
        candidate.samples
        and baseline.samples
        and len(candidate.samples) >= _MIN_PROCESSES
        and len(baseline.samples) >= _MIN_PROCESSES
    )


def judge_gate(
    gate: Gate, got: Resolved, ref: Resolved, base: dict[str, Any], sequential: Mapping[str, Any] | None = None
) -> GateResult:
    """``sequential``: the stage's ``summary.sequential`` (how its processes were sampled). When its processes were
    added until a decision (``gatekeeper.stats.sequential``), the body is judged by replaying that rule on the
    recorded looks: a fixed-sample test on data that stopped when it looked decided would over-alarm."""
    from gatekeeper.stats.compare import compare_runs

    better: Literal["lower", "higher"] = "higher" if got.better == "higher" else "lower"
    min_effect = gate.min_effect
    if min_effect is None:
        min_effect = abs(gate.pass_rule.number) if gate.pass_rule.relative else 0.02
    b, c = [list(p) for p in ref.samples or ()], [list(p) for p in got.samples or ()]
    record = _record_for(sequential, got.base or _name(gate))
    extra: dict[str, Any] = {}
    if record and record.get("sequential"):
        cmp, extra = _replay(record, b, c, gate=gate, better=better, min_effect=min_effect, unit=got.unit)
    else:
        cmp = compare_runs(
            b,
            c,
            better=better,
            alpha=gate.alpha,
            min_effect=min_effect,
            max_cv=gate.max_cv,
            unit=got.unit,
            noise_hint=noise_hint(gate),
        )
        if record and record.get("stopped"):
            cmp = replace(cmp, stopped=str(record["stopped"]))
    assert got.value is not None  # narrows the type for mypy; the caller checked it  # nosec B101
    assert ref.value is not None  # same  # nosec B101
    change = got.value / ref.value - 1.0 if ref.value else None
    comparison = {**cmp.to_dict(), "alpha": gate.alpha, "max_cv": gate.max_cv, **extra}
    base = {**base, "baseline_value": ref.value, "change": change, "comparison": {**comparison, "kind": "body"}}
    line = cmp.line()
    if got.statistic in _BODY_STATS:
        if cmp.verdict == "regression":
            if gate.warn_rule and gate.warn_rule.holds(got.value, ref.value):
                return GateResult(
                    outcome=Outcome.WARN, reason=f"{line}; within the warn rule {gate.warn_rule.text}", **base
                )
            return GateResult(outcome=Outcome.FAIL, reason=f"{line}; rule {gate.pass_rule.text}", **base)
        if cmp.verdict == "inconclusive":  # the line ends with the judge's reason
            return GateResult(outcome=Outcome.INCONCLUSIVE, reason=line, **base)
        return GateResult(outcome=Outcome.PASS, reason=line, **base)
    # A tail statistic (P99...): the interval-backed tail test decides together with the rule,
    # never the bare ratio alone (on noisy runners it raises false alarms).
    base["comparison"] = {**comparison, "kind": "tail"}
    rule_ok = gate.pass_rule.holds(got.value, ref.value)
    shown = f"{gate.metric} {ref.value:.4g} -> {got.value:.4g} {got.unit}".rstrip()
    if cmp.tail_verdict == "regression" and not rule_ok:
        return GateResult(outcome=Outcome.FAIL, reason=f"{shown} breaks {gate.pass_rule.text}, and {line}", **base)
    if cmp.tail_verdict == "regression":
        return GateResult(outcome=Outcome.WARN, reason=f"{shown} within {gate.pass_rule.text}, but {line}", **base)
    if not rule_ok:
        # An invalid comparison (a run fluctuating too much) cannot clear the tail either.
        unsure = cmp.tail_verdict == "inconclusive" or cmp.verdict == "inconclusive"
        outcome = Outcome.INCONCLUSIVE if unsure else Outcome.WARN
        why = "the comparison is inconclusive" if outcome is Outcome.INCONCLUSIVE else "the tail test finds no change"
        return GateResult(outcome=outcome, reason=f"{shown} breaks {gate.pass_rule.text}, but {why}: {line}", **base)
    return GateResult(outcome=Outcome.PASS, reason=f"{shown} meets {gate.pass_rule.text}; {line}", **base)


def noise_hint(gate: Gate) -> str:
    """The noise guard's setting and its fix, as the reason names them when a side fluctuates too much."""
    return f"max_cv of gate {gate.name}; more processes, a quieter runner, or raise max_cv in gates.yaml"


def _name(gate: Gate) -> str:
    return gate.metric.partition(".")[2]


def _record_for(sequential: Mapping[str, Any] | None, metric: str) -> Mapping[str, Any] | None:
    """The sampling record of ``metric``: the record itself when it names that metric, or, when it samples several
    metrics at once (``metrics``: each metric's own looks, as a bisection's rounds record them), that metric's looks."""
    if not sequential:
        return None
    per = sequential.get("metrics")
    if isinstance(per, Mapping) and isinstance(per.get(metric), list):
        return {**sequential, "metric": metric, "looks": per[metric]}
    return sequential if sequential.get("metric") == metric else None


def _replay(
    record: Mapping[str, Any],
    b: list[list[float]],
    c: list[list[float]],
    *,
    gate: Gate,
    better: Literal["lower", "higher"],
    min_effect: float,
    unit: str,
) -> tuple[Comparison, dict[str, Any]]:
    """The stage's sequential rule at its last look, with this gate's alpha, tolerance and noise guard and this
    baseline.

    Only the looks and the budget are taken from the record (they are how the processes were sampled); what
    decides is the gate's. A record that stopped under another ``max_cv`` (the stage's --max-cv) is judged at the
    gate's: the error spending depends only on the looks, so a look the guard held back still spent its share, and
    the gate in gates.yaml is the only place that can loosen or tighten the guard (never an artifact)."""
    from gatekeeper.stats.sequential import compare_sequential
    from gatekeeper.stats.sequential_plan import Plan

    planned = record.get("plan") or {}
    # A baseline that grew with the candidate (a bisection's reference) looked at its own count each time;
    # a reused stored baseline counts once, with all its processes, at every look.
    grows = bool(planned.get("baseline_grows"))
    pairs = _pairs(record.get("looks"), len(b) if not grows else None)
    note = ""
    if not pairs or pairs[-1] != (len(b), len(c)):  # a record that does not match the samples: one look (stricter)
        note = f"the recorded looks do not end at the {len(c)} processes judged; judged as a single look"
        pairs = [(len(b), len(c))]
    plan = Plan(
        max_processes=max(int(planned.get("max_processes", len(c))), len(c), 3),
        better=better,
        alpha=gate.alpha,
        min_effect=min_effect,
        power=float(planned.get("power", 0.9)),
        max_cv=gate.max_cv,
        baseline_grows=grows,
    )
    recorded_cv = planned.get("max_cv")
    if isinstance(recorded_cv, int | float) and not isinstance(recorded_cv, bool) and recorded_cv != gate.max_cv:
        shift = f"the rounds stopped under max_cv {recorded_cv:.3g}; judged at the gate's {gate.max_cv:g}"
        note = f"{note}; {shift}" if note else shift
    stopped = str(record.get("stopped") or "")
    cmp = compare_sequential(
        b,
        c,
        plan,
        pairs[:-1],
        stopped=stopped + (f" ({note})" if note else ""),
        unit=unit,
        noise_hint=noise_hint(gate),
    )
    return cmp, {"sequential": True, "looks": [list(x) for x in pairs], "detect": plan.target}


def _pairs(looks: Any, baseline: int | None) -> list[tuple[int, int]]:
    """The recorded (baseline, candidate) processes of every look; [] when they are not counts that only grow.
    ``baseline``: the reused baseline's count, the same at every look."""
    if not isinstance(looks, list | tuple):
        return []
    out: list[tuple[int, int]] = []
    for x in looks:
        if not (isinstance(x, list | tuple) and len(x) == 2 and all(type(v) is int and v >= 0 for v in x)):
            return []
        pair = (baseline if baseline is not None else x[0], x[1])
        if out and (pair[0] < out[-1][0] or pair[1] < out[-1][1]):
            return []
        out.append(pair)
    return out


def holm_adjust(results: list[GateResult]) -> list[GateResult]:
    """Control the false-alarm rate across every body comparison in one verdict (Holm).

    compare_runs tests the body at alpha/2 (the other half is the tail's), so the
    adjusted p-values are held against alpha/2 too. A regression that is no longer
    significant after the correction becomes inconclusive.
    """
    judged = [
        (i, r, r.comparison)
        for i, r in enumerate(results)
        if r.comparison and r.comparison.get("kind") == "body" and r.comparison.get("p_value") is not None
    ]
    if len(judged) < 2:
        return results
    from gatekeeper.stats.compare import holm

    adjusted = holm([c["p_value"] for _, _, c in judged])
    out = list(results)
    for (i, r, c), p_adj in zip(judged, adjusted, strict=True):
        comparison = {**c, "p_value_holm": p_adj}
        alpha = c.get("alpha", 0.01)
        if r.outcome in (Outcome.FAIL, Outcome.WARN) and p_adj is not None and p_adj >= alpha / 2:
            out[i] = replace(
                r,
                outcome=Outcome.INCONCLUSIVE,
                comparison=comparison,
                reason=f"{r.reason}; not significant after Holm over {len(judged)} comparisons (p={p_adj:.2g})",
            )
        else:
            out[i] = replace(r, comparison=comparison)
    return out
