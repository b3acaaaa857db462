"""``compare: history``: the newest unconfirmed change point of a metric's history, judged by the gate's rule;
and the words that name an anchor run in a gate's reason. Pure, like ``decide``: the change points were
found before (``gatekeeper.evaluate.anchors``), from the recorded runs and this one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gatekeeper.contract.verdict import GateResult, Outcome
from gatekeeper.evaluate.gates import Gate

__all__ = ["anchor_words", "history_gate"]


def anchor_words(run: Mapping[str, Any]) -> str:
    """``run sqlite:4, branch main, commit abc, from DATE; set by ann on DATE: why`` (or what it is)."""
    parts = [
        f"run {run['run_id']}" if run.get("run_id") else "",
        f"pipeline {run['pipeline_id']}" if run.get("pipeline_id") else "",
        f"ref {run['ref']}" if run.get("ref") else "",
        f"commit {str(run['commit'])[:12]}" if run.get("commit") else "",
        f"from {run['recorded_at']}" if run.get("recorded_at") else "",
    ]
    text = ", ".join(p for p in parts if p) or "a recorded run"
    source = run.get("source")
    if source == "set":
        text += f"; set by {run.get('set_by')} on {run.get('set_at')}: {run.get('reason')}"
    elif source == "release":
        text += f"; the last release ({run.get('tag')})"
    elif source == "window":
        text += "; the oldest run in the anchor window"
    return text


def history_gate(
    gate: Gate, changes: Mapping[str, Mapping[str, Any]], notes: Mapping[str, str], base: dict[str, Any]
) -> GateResult:
    """PASS when the metric's history has no unconfirmed change point (or its change meets the rule), else
    FAIL naming the change (its size, interval, p-value, first run after it and what changed in the stack);
    SKIPPED with the reason when there was no history to judge (the caller applies ``on_missing``)."""
    change = changes.get(gate.metric)
    if change is None:
        why = notes.get(gate.metric, "no history store was given (--baseline)")
        return GateResult(outcome=Outcome.SKIPPED, reason=f"no history to judge: {why}", **base)
    runs = change.get("runs", 0)
    if change.get("index") is None:
        reason = f"{gate.metric}: no unconfirmed change point in the last {runs} runs (this one included)"
        return GateResult(outcome=Outcome.PASS, reason=reason, **base)
    before, after = float(change["before"]), float(change["after"])
    ci = change.get("ci") or (change["change"], change["change"])
    first = change.get("first_run") or {}
    where = anchor_words(first)
    stack = change.get("stack_changes") or []
    moved = "; ".join(f"{s['component']} {s['before']} -> {s['after']}" for s in stack[:6]) or "nothing recorded"
    size = f"{change['change'] * 100:+.1f}% [95% CI {ci[0] * 100:+.1f}, {ci[1] * 100:+.1f}], p={change['p_value']:.2g}"
    text = (
        f"{gate.metric} changed {size} at run {change['index'] + 1} of the last {runs} ({where}); "
        f"stack changed: {moved}"
    )
    elsewhere = change.get("platforms")
    if elsewhere:
        text += f"; on every platform at these commits: {elsewhere['call']}: {elsewhere['why']}"
    base = {**base, "value": after, "baseline_value": before, "change": change["change"]}
    if gate.pass_rule.holds(after, before):
        return GateResult(outcome=Outcome.PASS, reason=f"{text}; within {gate.pass_rule.text}", **base)
    confirm = "gatekeeper history anchor --set RUN --by NAME --reason TEXT confirms it"
    return GateResult(
        outcome=Outcome.FAIL, reason=f"{text}; breaks {gate.pass_rule.text}, unconfirmed ({confirm})", **base
    )
