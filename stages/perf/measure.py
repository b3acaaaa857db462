"""Measuring one point in fresh processes: start the timing children, and turn their results into metrics.

``performance_baseline`` measures one point (the model as configured) or, in a
sweep, every point of it; both go through ``measure_point`` and ``record_timing``,
so each sweep point is measured exactly like a single run.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gatekeeper.contract import gpu_state
from gatekeeper.contract.metric_points import point_label, point_name
from gatekeeper.core import proc
from gatekeeper.kernel_cache.key import cache_env
from gatekeeper.stats.compare import harrell_davis, process_cv, run_summary
from stages._stage import SkipCheck, StageContext
from stages.perf import smi
from stages.perf.timing import RESULT_PREFIX

__all__ = ["child", "child_env", "clocks_check", "measure_point", "record_timing"]


def child_env() -> dict[str, str]:
    root = str(Path(__file__).resolve().parents[2])  # so the child imports these stages, installed or not
    env = {**os.environ, **cache_env()}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    return env


def child(cfg: dict[str, Any], timeout: float) -> tuple[dict[str, Any] | None, str]:
    res = proc.run(
        [sys.executable, "-m", "stages.perf.timing"], timeout=timeout, env=child_env(), input_text=json.dumps(cfg)
    )
    for line in reversed(res.stdout.splitlines()):
        if line.startswith(RESULT_PREFIX):
            return json.loads(line[len(RESULT_PREFIX) :]), ""
    tail = "\n".join((res.stderr or res.stdout).strip().splitlines()[-15:])
    return None, f"timing process {res.describe()}" + (f":\n{tail}" if tail else "")


def measure_point(
    ctx: StageContext,
    cfg: dict[str, Any],
    *,
    prefix: str = "",
    deadline: float | None = None,
    count: int | None = None,
    start: int = 0,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    """Time ``cfg`` in --processes fresh processes: (results, clocks, why it stopped early or "").

    Each process is a check (``process.N``, after ``prefix``); a crashed or hung one
    fails its check and the others go on. An unsupported point or a spent
    ``deadline`` (time.monotonic) stops before the next process. ``count`` processes
    instead of --processes, numbered after ``start``: a later round of sequential sampling
    (``stages.perf.rounds``).
    """
    processes = ctx.options.processes if count is None else count
    results: list[dict[str, Any]] = []
    clocks: list[dict[str, Any]] = []
    for i in range(start, start + processes):
        if deadline is not None and time.monotonic() >= deadline:
            return results, clocks, f"the sweep budget ran out after {i - start} of {processes} processes"
        unsupported = ""
        with ctx.rec.check(f"{prefix}process.{i + 1}") as h:
            result, error = child(cfg, ctx.common.check_timeout)
            assert result is not None, error
            if "unsupported" in result:
                unsupported = result["unsupported"]
                raise SkipCheck(unsupported)
            results.append(result)
            times = sorted(result["times_s"])
            state = "converged" if result["warmup_converged"] else "NOT converged"
            h.message = (
                f"median {times[len(times) // 2] * 1000:.2f} ms over {len(times)} iterations "
                f"after {result['warmup_iterations']} warm-up ({state})"
            )
        if unsupported:
            return results, clocks, unsupported
        rows, reason = smi.read_clocks(ctx.device.kind)
        clocks.append({"process": i + 1, "devices": rows} if rows else {"process": i + 1, "reason": reason})
    return results, clocks, ""


def clocks_check(ctx: StageContext, clocks: list[dict[str, Any]]) -> None:
    with ctx.rec.check("clocks_and_temperature") as h:
        if not clocks:
            raise SkipCheck("no timing process finished")
        if all("reason" in c for c in clocks):
            raise SkipCheck("; ".join(sorted({c["reason"] for c in clocks})))
        h.message = f"recorded for {len(clocks) - sum('reason' in c for c in clocks)} of {len(clocks)} processes"


def settings_check(ctx: StageContext) -> None:
    """The GPU settings read when the job started are still the settings after the timings: a power cap or a
    performance level changed in between (another job, a node agent) means the timings mix two machines."""
    from stages.device import read_gpu_settings

    with ctx.rec.check("gpu_settings") as h:
        if not ctx.device.is_gpu:
            raise SkipCheck("no GPU: the settings are a GPU's")
        before = gpu_state.state_of(ctx.environment.extra)
        if not before:
            raise SkipCheck(str(ctx.environment.extra.get("gpu_settings_unknown") or "no GPU setting was read"))
        after, why = read_gpu_settings(ctx.device.kind, bus_ids=getattr(ctx.device, "pci_bus_ids", ()))
        changed = gpu_state.differences(before, after)
        assert not changed, "changed during the timings: " + "; ".join(f"{k} {a} -> {b}" for k, a, b in changed)
        if not after:
            raise SkipCheck(f"read at the start, not after the timings: {why}")
        h.message = gpu_state.describe(before)


def record_timing(
    ctx: StageContext,
    results: list[dict[str, Any]],
    clocks: list[dict[str, Any]],
    batch: int,
    point: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The metrics of one point (the single run: no point), named with the point; returns its summary."""
    rec = ctx.rec

    def name(base: str, suffix: str = "") -> str:
        return point_name(base, point or {}, suffix)

    per_process = [[t * 1000.0 for t in r["times_s"]] for r in results]
    pooled = [x for g in per_process for x in g]
    medians = [statistics.median(g) for g in per_process]
    rec.metric(
        name("latency_ms"), statistics.median(medians), "ms", "lower", samples=per_process,
        description="median of per-process medians; samples per process",
    )  # fmt: skip
    for stat, q in (("p50", 0.5), ("p99", 0.99), ("p999", 0.999)):
        rec.metric(
            name("latency_ms", f".{stat}"), harrell_davis(pooled, q), "ms", "lower", description="Harrell-Davis, pooled"
        )
    throughputs = [batch * len(r["times_s"]) / sum(r["times_s"]) for r in results]
    rec.metric(
        name("throughput"), statistics.median(throughputs), "items/s", "higher", samples=[[t] for t in throughputs],
        description="median of per-process throughputs; one sample per process",
    )  # fmt: skip
    cv = process_cv([[t] for t in throughputs]) if len(throughputs) > 1 else None
    rec.metric(name("throughput_cv"), cv, "ratio", "lower", description="coefficient of variation across processes")
    all_converged = all(r["warmup_converged"] for r in results)
    rec.metric(name("warmup_converged"), 1.0 if all_converged else 0.0, "bool", "higher")
    rec.metric(name("peak_memory_mb"), max(r["peak_memory_mb"] for r in results), "MB", "lower")
    summary: dict[str, Any] = {"latency_ms": run_summary(per_process)}
    summary["processes"] = [
        {
            "process": i + 1,
            "median_ms": round(medians[i], 4),
            "mean_ms": round(statistics.fmean(per_process[i]), 4),
            "throughput": round(throughputs[i], 3),
            "warmup_iterations": r["warmup_iterations"],
            "warmup_converged": r["warmup_converged"],
            "peak_memory_mb": round(r["peak_memory_mb"], 2),
            "threads": r["threads"],
            **{k: v for k, v in clocks[i].items() if k != "process"},
        }
        for i, r in enumerate(results)
    ]
    s = summary["latency_ms"]
    where = f"{point_label(point)} " if point else ""
    rec.log(
        f"  {where}latency {s['p50']:.2f} ms (P99 {s['p99']:.2f}, P99.9 {s['p999']:.2f}), "
        f"throughput {statistics.median(throughputs):.1f} items/s, CV {cv if cv is not None else float('nan'):.1%}, "
        f"warm-up {'converged' if all_converged else 'NOT converged in every process'}"
    )
    return summary
