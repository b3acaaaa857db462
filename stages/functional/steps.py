"""The steps of the functional_test stage, one per group of checks. Each records
its checks on the recorder, adds to the tally and returns its summary part."""

from __future__ import annotations

import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stages.functional.report import Tally
from stages.functional.runner import CaseRunner
from stages.isolate import IsolatedOutcome, Worker
from stages.progress import Progress

__all__ = [
    "Plan",
    "attention",
    "catalog",
    "checkpoints",
    "distributed",
    "opinfo",
    "sparse",
    "traced",
    "user_cases",
]


@dataclass(frozen=True)
class Plan:
    device: Any  # stages.device.DeviceInfo
    categories: tuple[str, ...]
    dtypes: tuple[str, ...]
    seeds: tuple[int, ...]
    timeout: float
    model: str | None
    batch_size: int
    input_shape: tuple[int, ...] | None
    seed: int

    @property
    def dev(self) -> str:
        return self.device.torch_device


def _record_value(rec: Any, name: str, outcome: IsolatedOutcome, group: str | None = None) -> Any:
    """Record a worker call that returns {"status", "message", ...}; crashes and timeouts are failures."""
    if outcome.kind == "ok" and isinstance(outcome.value, dict) and "status" in outcome.value:
        v = outcome.value
        return rec.record(
            name,
            v["status"],
            v.get("message", ""),
            duration_s=outcome.duration_s,
            group=group,
            details=v.get("details"),
        )
    return rec.outcome(name, outcome, group=group)


def catalog(rec: Any, runner: CaseRunner, plan: Plan, tally: Tally) -> None:
    from stages.functional.catalog import cases_in

    cases = cases_in(plan.categories)
    progress = Progress("catalog", len(cases), stream=rec.stream)
    done = [0]
    lock = threading.Lock()  # workers finish on their own threads

    def tick(i: int, _: IsolatedOutcome) -> None:
        with lock:
            done[0] += 1
            progress.update(done[0], cases[i].name)

    items = [(c.name, plan.dev, plan.dtypes, plan.seeds) for c in cases]
    outcomes = runner.map("stages.functional.runner:run_case", items, on_done=tick)
    for case, outcome in zip(cases, outcomes, strict=True):
        errors = None
        if outcome is not None and outcome.kind == "ok":
            details = outcome.value["details"]
            errors = details.pop("errors")
            details["max_rel_error"] = {d: max(e) for d, e in errors.items()}
            details["seeds"] = len(plan.seeds)
        check = _record_value(rec, case.name, outcome)  # type: ignore[arg-type]
        tally.add(case.category, case.name, case.op, check.status, errors)


def attention(rec: Any, runner: CaseRunner, plan: Plan, tally: Tally) -> dict[str, Any]:
    """SDPA with one backend forced per case; the tally counts them as the ``attention`` category."""
    from stages.functional.attention import cases, long_lengths

    todo = cases()
    progress = Progress("attention", len(todo), stream=rec.stream)
    done = [0]
    lock = threading.Lock()

    def tick(i: int, _: IsolatedOutcome) -> None:
        with lock:
            done[0] += 1
            progress.update(done[0], todo[i].name)

    items = [(c.name, plan.dev, plan.dtypes, plan.seed) for c in todo]
    outcomes = runner.map("stages.functional.attention:run_attention_case", items, on_done=tick)
    backends: dict[str, dict[str, int]] = {}
    for case, outcome in zip(todo, outcomes, strict=True):
        if outcome is not None and outcome.kind == "ok":
            details = outcome.value["details"]
            details["max_rel_error"] = {d: max(e) for d, e in details.pop("errors").items()}
        check = _record_value(rec, case.name, outcome)  # type: ignore[arg-type]
        # the errors stay in the check details: the catalog's per-dtype precision metrics keep their meaning
        tally.add("attention", case.name, f"{case.op}[{case.backend}]", check.status)
        counts = backends.setdefault(case.backend, {"passed": 0, "failed": 0, "skipped": 0})
        counts[{"error": "failed"}.get(check.status, check.status)] += 1
    lengths = {b: list(long_lengths(plan.device.torch_device.split(":")[0], b)) for b in backends}
    return {"backends": backends, "long_sequence_tokens": lengths}


def distributed(rec: Any, plan: Plan, tally: Tally) -> dict[str, Any]:
    from stages.functional.distributed import backend_for, run_distributed

    backend, _, note = backend_for(plan.device)
    rec.log(f"  2 ranks, {note}")
    for r in run_distributed(plan.device, seed=plan.seed, timeout=min(plan.timeout, 60.0)):
        check = rec.record(r.name, r.status, r.message, duration_s=r.duration_s, details={"backend": backend})
        tally.add("distributed", r.name, "c10d::" + r.name.split(".")[1], check.status)
    return {"backend": note}


def user_cases(rec: Any, runner: CaseRunner, plan: Plan, path: Path, names: list[str]) -> dict[str, Any]:
    items = [(str(path), n, plan.dev) for n in names]
    passed = 0
    for name, outcome in zip(names, runner.map("stages.functional.user_cases:run_user_case", items), strict=True):
        check = rec.outcome(f"user.{name}", outcome)
        passed += check.status == "passed"
    rate = passed / len(names)
    rec.metric("user_case_pass_rate", rate, "ratio", "higher", description=f"case_* functions of {path.name} passed")
    return {"file": str(path), "cases": len(names), "passed": passed}


def traced(rec: Any, runner: CaseRunner, plan: Plan) -> dict[str, Any]:
    key = (plan.model, plan.batch_size, plan.input_shape, plan.seed)
    listed = runner.call("stages.functional.traced:op_list", *key, timeout=max(plan.timeout, 300.0))
    if not listed.ok:
        rec.outcome("traced.capture", listed)
        rec.metric("traced_op_pass_rate", None, "ratio", "higher")
        rec.metric("model_grad_cosine_min", None, "ratio", "higher")
        return {"capture": listed.message.splitlines()[0] if listed.message else listed.kind}
    ops = listed.value
    rec.log(f"  captured {len(ops)} distinct aten ops, {sum(ops.values())} signatures (forward + backward, train mode)")
    outcomes = runner.map("stages.functional.traced:replay_op", [(*key, op, plan.dev) for op in ops])
    passed: list[str] = []
    failed: list[str] = []
    skipped: list[str] = []
    fallbacks, missing, drift = [], [], []
    for op, outcome in zip(ops, outcomes, strict=True):
        check = _record_value(rec, f"traced.{op}", outcome)  # type: ignore[arg-type]
        {"passed": passed, "skipped": skipped}.get(check.status, failed).append(op)
        value = outcome.value if outcome is not None and outcome.ok else {}
        problems = value.get("details", {}).get("problems", [])
        if value.get("fallbacks"):
            fallbacks.append(op)
        if any(p.startswith("missing:") for p in problems) or (check.status == "failed" and not value):
            missing.append(op)  # no kernel, or the replay crashed or hung the worker
        if any(p.startswith("drift:") for p in problems):
            drift.append(op)
    tested = len(passed) + len(failed)
    rec.metric("traced_op_pass_rate", len(passed) / tested if tested else None, "ratio", "higher")
    model = runner.call(
        "stages.functional.model_compare:model_vs_cpu", *key, plan.dev, timeout=max(plan.timeout, 300.0)
    )
    summary: dict[str, Any] = {"ops": len(ops), "signatures": sum(ops.values()), "passed": len(passed)}
    summary.update(failing_ops=failed, missing_ops=missing, cpu_fallbacks=fallbacks, drifting_ops=drift)
    summary["untested"] = skipped
    if not model.ok:
        rec.outcome("traced.model.forward_backward", model)
        rec.metric("model_grad_cosine_min", None, "ratio", "higher")
        return summary
    m = model.value
    with rec.check("traced.model.forward_backward") as h:
        h.details = {"rows": {k: {"cosine": c, "max_rel_error": e} for k, (c, e) in m["rows"].items()}}
        h.message = f"gradient cosine min {m['grad_cosine_min']:.6f}, max relative error {m['max_rel_error']:.3g}"
        if m["zero_gradients"]:  # noted, not hidden: rounding noise on both sides
            h.details["zero_gradients"] = m["zero_gradients"]
        worst = min(((k, v) for k, v in m["rows"].items() if v[0] is not None), key=lambda kv: kv[1][0])
        assert min(m["grad_cosine_min"], m["output_cosine_min"]) >= 0.999, (
            f"cosine similarity {worst[1][0]:.6f} < 0.999 at {worst[0]} (device vs CPU float64)"
        )
        assert m["max_rel_error"] <= 1e-2, f"max relative error {m['max_rel_error']:.3g} > 0.01 (device vs CPU float64)"
    rec.metric("model_grad_cosine_min", m["grad_cosine_min"], "ratio", "higher")
    rec.metric("model_max_rel_error", m["max_rel_error"], "ratio", "lower")
    summary.update(grad_cosine_min=m["grad_cosine_min"], model_max_rel_error=m["max_rel_error"])
    return summary


def checkpoints(rec: Any, runner: CaseRunner, plan: Plan, trials: int, steps: int) -> dict[str, Any]:
    """Each trial: one uninterrupted run of 2*steps that also saves after ``steps`` (in a catalog
    worker), then the restore + ``steps`` more in the restore worker, a process that never trained."""
    from stages.functional.checkpoint import compare_states

    bitwise = not plan.device.is_gpu
    results: list[float] = []
    with tempfile.TemporaryDirectory(prefix="gk-ckpt-") as tmp, Worker() as restorer:
        for i in range(trials):
            seed = plan.seed + i
            args = (plan.model, seed, plan.dev, plan.batch_size, plan.input_shape)
            path = str(Path(tmp) / f"trial{i}.pt")
            start = time.monotonic()
            straight = runner.call("stages.functional.checkpoint:train", *args, 2 * steps, steps, path)
            resumed = (
                restorer.call("stages.functional.checkpoint:resume", *args, steps, path, timeout=plan.timeout + 120)
                if straight.ok
                else straight
            )
            name = f"checkpoint.trial{i}"
            if not resumed.ok:
                rec.outcome(name, resumed)
                results.append(0.0)
                continue
            ok, message, worst = compare_states(resumed.value, straight.value, bitwise=bitwise)
            details = {"seed": seed, "steps": [steps, steps], "bitwise_required": bitwise, "max_rel_diff": worst}
            elapsed = time.monotonic() - start
            rec.record(name, "passed" if ok else "failed", message, duration_s=elapsed, details=details)
            results.append(1.0 if ok else 0.0)
    rate = sum(results) / len(results) if results else None
    rec.metric("checkpoint_restore_rate", rate, "ratio", "higher", samples=results or None)
    return {"trials": trials, "restored": int(sum(results)), "comparison": "bitwise" if bitwise else "tolerance"}


def sparse(rec: Any, runner: CaseRunner, plan: Plan) -> dict[str, Any]:
    from stages.functional.sparse import SPARSE_CASES

    names = list(SPARSE_CASES)
    outcomes = runner.map("stages.functional.sparse:run_sparse_case", [(n, plan.dev, plan.seed) for n in names])
    failed = []
    for name, outcome in zip(names, outcomes, strict=True):
        if rec.outcome(f"sparse.{name}", outcome).status != "passed":
            failed.append(name)
    rec.metric("sparse_pass_rate", 1 - len(failed) / len(names), "ratio", "higher")
    return {"cases": len(names), "passed": len(names) - len(failed), "failing": failed}


def opinfo(rec: Any, runner: CaseRunner, plan: Plan, budget: float) -> dict[str, Any]:
    from stages.functional.opinfo_sweep import missing_dependency

    reason = missing_dependency()
    if reason:
        rec.skip("opinfo.sweep", reason)
        return {"skipped": reason}
    deadline = time.monotonic() + budget
    listed = runner.call("stages.functional.opinfo_sweep:list_ops", timeout=max(plan.timeout, 300.0))
    if not listed.ok:
        rec.outcome("opinfo.sweep", listed)
        return {"error": listed.message.splitlines()[0] if listed.message else listed.kind}
    keys = listed.value
    items = [(k, plan.dev, list(plan.dtypes)) for k in keys]
    outcomes = runner.map(
        "stages.functional.opinfo_sweep:run_opinfo", items, timeout=min(plan.timeout, 120.0), deadline=deadline
    )
    counts = {"passed": 0, "failed": 0, "skipped": 0, "error": 0}
    failing = []
    for key, outcome in zip(keys, outcomes, strict=True):
        if outcome is None:
            continue
        check = _record_value(rec, f"opinfo.{key}", outcome, group="opinfo")
        counts[check.status] += 1
        if check.status in ("failed", "error"):
            failing.append(key)
    not_run = sum(o is None for o in outcomes)
    if not_run:
        rec.skip("opinfo.remaining", f"{not_run} of {len(keys)} OpInfos not run: --opinfo-budget {budget:g} s spent")
    tested = counts["passed"] + counts["failed"] + counts["error"]
    rec.metric("opinfo_pass_rate", counts["passed"] / tested if tested else None, "ratio", "higher")
    return {"opinfos": len(keys), **counts, "not_run (budget)": not_run, "failing": failing}
