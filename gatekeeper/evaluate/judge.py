"""Baseline gates over raw samples: the statistical judge (gatekeeper.stats.compare) applied
to a gate, and the Holm correction across every judged gate of one verdict."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal

from gatekeeper.contract.verdict import GateResult, Outcome
from gatekeeper.evaluate.gates import Gate
from gatekeeper.evaluate.metrics import Resolved

__all__ = ["holm_adjust", "judge_gate", "uses_judge"]

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


def judge_gate(gate: Gate, got: Resolved, ref: Resolved, base: dict[str, Any]) -> GateResult:
    from gatekeeper.stats.compare import compare_runs

    better: Literal["lower", "higher"] = "higher" if got.better == "higher" else "lower"
    min_effect = gate.min_effect
    if min_effect is None:
        min_effect = abs(gate.pass_rule.number) if gate.pass_rule.relative else 0.02
    cmp = compare_runs(
        [list(p) for p in ref.samples or ()],
        [list(p) for p in got.samples or ()],
        better=better,
        alpha=gate.alpha,
        min_effect=min_effect,
        unit=got.unit,
    )
    assert got.value is not None  # narrows the type for mypy; the caller checked it  # nosec B101
    assert ref.value is not None  # same  # nosec B101
    change = got.value / ref.value - 1.0 if ref.value else None
    comparison = {**cmp.to_dict(), "alpha": gate.alpha}
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
