"""The parent side of cross-stack parity (``--golden-save`` / ``--golden``): run the worker
functions of ``stages.functional.golden`` and record the checks and metrics."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stages.functional.runner import CaseRunner
from stages.functional.steps import Plan

__all__ = ["GOLDEN_MAX_REL_ERROR", "GOLDEN_MIN_COSINE", "golden_compare", "golden_save"]

# The stage's own parity limits (the cross-stack-parity gates read the metrics).
GOLDEN_MIN_COSINE = 0.9999
GOLDEN_MAX_REL_ERROR = 1e-3


def _golden_args(plan: Plan) -> dict[str, Any]:
    return {
        "spec": plan.model,
        "batch_size": plan.batch_size,
        "input_shape": plan.input_shape,
        "seed": plan.seed,
        "device": plan.dev,
    }


def golden_save(rec: Any, runner: CaseRunner, plan: Plan, directory: Path) -> dict[str, Any]:
    target, timeout = "stages.functional.golden:save", max(plan.timeout, 300.0)
    outcome = runner.call(target, timeout=timeout, directory=str(directory), **_golden_args(plan))
    if not outcome.ok:
        rec.outcome("golden.save", outcome)
        return {"error": outcome.message.splitlines()[0] if outcome.message else outcome.kind}
    v = outcome.value
    stack = v["stack"]
    message = f"{v['tensors']} outputs and gradients of torch {stack['torch']} on {stack['device_name']} -> {directory}"
    rec.record("golden.save", "passed", message, duration_s=outcome.duration_s, details=v)
    return {"saved_to": str(directory), "tensors": v["tensors"], "torch": stack["torch"]}


def _parity_verdict(v: dict[str, Any], theirs: dict[str, Any]) -> tuple[str, str]:
    cos, err = v["cosine_min"], v["max_rel_error"]
    if cos is None:
        return "failed", "no output or gradient to compare"
    said = (
        f"cosine min {cos:.6f}, max relative error {err:.3g} against the golden of torch {theirs.get('torch')} "
        f"on {theirs.get('device_name')}"
    )
    if v["problems"]:
        return "failed", "; ".join(f"{k}: {p}" for k, p in v["problems"].items()) + f"; {said}"
    worst = min((kv for kv in v["rows"].items() if kv[1]["cosine"] is not None), key=lambda kv: kv[1]["cosine"])
    if cos < GOLDEN_MIN_COSINE:
        return "failed", f"cosine similarity {cos:.6f} < {GOLDEN_MIN_COSINE} at {worst[0]}; {said}"
    if err > GOLDEN_MAX_REL_ERROR:
        return "failed", f"max relative error {err:.3g} > {GOLDEN_MAX_REL_ERROR:g}; {said}"
    return "passed", said


def golden_compare(rec: Any, runner: CaseRunner, plan: Plan, directory: Path, meta: dict[str, Any]) -> dict[str, Any]:
    outcome = runner.call(
        "stages.functional.golden:compare",
        timeout=max(plan.timeout, 300.0),
        directory=str(directory),
        meta=meta,
        **_golden_args(plan),
    )
    theirs = meta["stack"]
    summary: dict[str, Any] = {"golden": str(directory), "golden_torch": theirs.get("torch")}
    summary["golden_device"] = f"{theirs.get('device')} ({theirs.get('device_name')})"
    if not outcome.ok:
        rec.outcome("golden.compare", outcome)
        rec.metric("golden_cosine_min", None, "ratio", "higher")
        rec.metric("golden_max_rel_error", None, "ratio", "lower")
        return summary
    v = outcome.value
    cos, err = v["cosine_min"], v["max_rel_error"]
    details = {"golden_stack": theirs, "this_stack": v["stack"], "rows": v["rows"]}
    rec.record("golden.compare", *_parity_verdict(v, theirs), duration_s=outcome.duration_s, details=details)
    rec.metric("golden_cosine_min", cos, "ratio", "higher", description=f"vs the golden of torch {theirs.get('torch')}")
    rec.metric("golden_max_rel_error", err, "ratio", "lower", description=f"vs the golden in {directory}")
    return summary | {"cosine_min": cos, "max_rel_error": err}
