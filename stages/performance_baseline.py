"""performance_baseline: latency, throughput and memory of the model, from k fresh processes.

Each process is a child (``stages.perf.timing``) started through
``gatekeeper.core.proc.run`` with a timeout: it warms up until two consecutive
windows agree, then times m iterations one by one. Samples keep their process
grouping, because iterations inside one process are not independent samples;
``gatekeeper.stats.compare.compare_runs`` judges them against a baseline later.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gatekeeper.core import proc
from gatekeeper.core.errors import InputError
from gatekeeper.kernel_cache.key import cache_env
from gatekeeper.stats.compare import harrell_davis, process_cv, run_summary
from stages._stage import SkipCheck, StageContext, stage_main
from stages.perf import series, smi
from stages.perf.timing import RESULT_PREFIX

__all__ = ["DESCRIPTION", "NAME", "Options", "add_arguments", "main", "parse_duration", "run"]

NAME = "performance_baseline"
DESCRIPTION = "Latency, throughput and memory of the model in k fresh processes (and an optional soak run)."
SERIES_FILE = f"{NAME}.soak.jsonl"


@dataclass(frozen=True)
class Options:
    processes: int = 5
    iterations: int = 50
    warmup: int = 10
    backward: bool = False
    duration: str | None = None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("performance_baseline")
    g.add_argument("--processes", type=int, default=5, help="fresh processes to time (default 5; nightly: 10)")
    g.add_argument("--iterations", type=int, default=50, help="timed iterations per process (default 50)")
    g.add_argument("--warmup", type=int, default=10, help="minimum warm-up iterations; more run until timings converge")
    g.add_argument("--backward", action="store_true", help="time forward+backward instead of forward only")
    g.add_argument("--duration", help="soak mode: also run this long, e.g. 90s, 30m, 24h")


def parse_duration(text: str) -> float:
    """Seconds from '90', '90s', '30m' or '24h'."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text or "")
    if not m or float(m.group(1)) <= 0:
        raise InputError(None, "--duration", f"{text!r} is not a duration", "e.g. 90s, 30m or 24h")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def _validate(opts: Options) -> None:
    for name in ("processes", "iterations"):
        if getattr(opts, name) < 1:
            raise InputError(None, f"--{name}", f"must be at least 1 (got {getattr(opts, name)})")
    if opts.warmup < 0:
        raise InputError(None, "--warmup", f"must not be negative (got {opts.warmup})")


def _child_env() -> dict[str, str]:
    root = str(Path(__file__).resolve().parent.parent)  # so the child imports these stages, installed or not
    env = {**os.environ, **cache_env()}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    return env


def _child(cfg: dict[str, Any], timeout: float) -> tuple[dict[str, Any] | None, str]:
    res = proc.run(
        [sys.executable, "-m", "stages.perf.timing"], timeout=timeout, env=_child_env(), input_text=json.dumps(cfg)
    )
    for line in reversed(res.stdout.splitlines()):
        if line.startswith(RESULT_PREFIX):
            return json.loads(line[len(RESULT_PREFIX) :]), ""
    tail = "\n".join((res.stderr or res.stdout).strip().splitlines()[-15:])
    return None, f"timing process {res.describe()}" + (f":\n{tail}" if tail else "")


def run(ctx: StageContext) -> None:
    opts: Options = ctx.options
    _validate(opts)
    soak_s = parse_duration(opts.duration) if opts.duration else None
    rec, common = ctx.rec, ctx.common
    base_cfg = {
        "model": common.model,
        "batch_size": common.batch_size,
        "input_shape": common.input_shape,
        "seed": common.seed,
        "device": ctx.device.torch_device,
        "backward": opts.backward,
        "warmup": opts.warmup,
        "iterations": opts.iterations,
    }
    ctx.config["mode"] = "forward+backward" if opts.backward else "forward"
    results: list[dict[str, Any]] = []
    clocks: list[dict[str, Any]] = []
    with rec.group("timing", f"{opts.processes} fresh processes x {opts.iterations} iterations"):
        for i in range(opts.processes):
            with rec.check(f"process.{i + 1}") as h:
                result, error = _child(base_cfg, common.check_timeout)
                assert result is not None, error
                results.append(result)
                times = sorted(result["times_s"])
                state = "converged" if result["warmup_converged"] else "NOT converged"
                h.message = (
                    f"median {times[len(times) // 2] * 1000:.2f} ms over {len(times)} iterations "
                    f"after {result['warmup_iterations']} warm-up ({state})"
                )
            rows, reason = smi.read_clocks(ctx.device.kind)
            clocks.append({"process": i + 1, "devices": rows} if rows else {"process": i + 1, "reason": reason})
        with rec.check("clocks_and_temperature") as h:
            if all("reason" in c for c in clocks):
                raise SkipCheck("; ".join(sorted({c["reason"] for c in clocks})))
            h.message = f"recorded for {len(clocks) - sum('reason' in c for c in clocks)} of {len(clocks)} processes"
    if results:
        _record_timing(ctx, results, clocks)
    if soak_s is not None:
        _soak(ctx, base_cfg, soak_s)
    elif results:
        growth = series.growth_mb_per_hour([(r["memory_t_s"], r["memory_mb"]) for r in results])
        span = max((r["memory_t_s"][-1] - r["memory_t_s"][0] for r in results if len(r["memory_t_s"]) > 1), default=0.0)
        _record_growth(ctx, growth, "over the timed iterations of all processes", span)


def _record_timing(ctx: StageContext, results: list[dict[str, Any]], clocks: list[dict[str, Any]]) -> None:
    rec, batch = ctx.rec, ctx.common.batch_size
    per_process = [[t * 1000.0 for t in r["times_s"]] for r in results]
    pooled = [x for g in per_process for x in g]
    medians = [statistics.median(g) for g in per_process]
    rec.metric(
        "latency_ms", statistics.median(medians), "ms", "lower", samples=per_process,
        description="median of per-process medians; samples per process",
    )  # fmt: skip
    for name, q in (("p50", 0.5), ("p99", 0.99), ("p999", 0.999)):
        rec.metric(f"latency_ms.{name}", harrell_davis(pooled, q), "ms", "lower", description="Harrell-Davis, pooled")
    throughputs = [batch * len(r["times_s"]) / sum(r["times_s"]) for r in results]
    rec.metric(
        "throughput", statistics.median(throughputs), "items/s", "higher", samples=[[t] for t in throughputs],
        description="median of per-process throughputs; one sample per process",
    )  # fmt: skip
    cv = process_cv([[t] for t in throughputs]) if len(throughputs) > 1 else None
    rec.metric("throughput_cv", cv, "ratio", "lower", description="coefficient of variation across processes")
    all_converged = all(r["warmup_converged"] for r in results)
    rec.metric("warmup_converged", 1.0 if all_converged else 0.0, "bool", "higher")
    rec.metric("peak_memory_mb", max(r["peak_memory_mb"] for r in results), "MB", "lower")
    rec.summary["latency_ms"] = run_summary(per_process)
    rec.summary["processes"] = [
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
    s = rec.summary["latency_ms"]
    rec.log(
        f"  latency {s['p50']:.2f} ms (P99 {s['p99']:.2f}, P99.9 {s['p999']:.2f}), "
        f"throughput {statistics.median(throughputs):.1f} items/s, CV {cv if cv is not None else float('nan'):.1%}, "
        f"warm-up {'converged' if all_converged else 'NOT converged in every process'}"
    )


# Seconds of steady running below which a slope is not extrapolated to MB/hour: over a
# few seconds, allocator warm-up (a one-off step of a few MB) reads as hundreds of MB/hour.
MIN_GROWTH_WINDOW_S = 600.0


def _record_growth(ctx: StageContext, growth: tuple[float, float, float] | None, where: str, span_s: float) -> None:
    rec = ctx.rec
    if growth is None:
        rec.skip("memory_growth", f"too few memory samples {where} for a slope")
        return
    slope, lo, hi = growth
    if span_s < MIN_GROWTH_WINDOW_S:
        rec.summary["memory_growth_short_window"] = {"slope_mb_per_hour": slope, "ci": [lo, hi], "span_s": span_s}
        rec.skip(
            "memory_growth",
            f"memory growth needs at least {MIN_GROWTH_WINDOW_S:.0f} s of steady running to extrapolate to MB/hour; "
            f"this run observed {span_s:.1f} s {where} (use soak mode, e.g. --duration 30m)",
        )
        return
    rec.metric("memory_growth_mb_per_hour", slope, "MB/h", "lower", description=f"Theil-Sen slope {where}")
    rec.metric("memory_growth_mb_per_hour.ci_low", lo, "MB/h", "lower", description="95% interval, low end")
    rec.metric("memory_growth_mb_per_hour.ci_high", hi, "MB/h", "lower", description="95% interval, high end")
    rec.record("memory_growth", "passed", f"{slope:+.1f} MB/h [95% CI {lo:+.1f}, {hi:+.1f}] {where}")


def _soak(ctx: StageContext, base_cfg: dict[str, Any], seconds: float) -> None:
    rec = ctx.rec
    path = ctx.out_dir / SERIES_FILE
    path.unlink(missing_ok=True)
    with rec.group("soak", f"soak run for {seconds:.0f} s (series in {SERIES_FILE})"):
        cfg = {**base_cfg, "duration_s": seconds, "series_path": str(path.resolve())}
        with rec.check("soak") as h:
            result, error = _child(cfg, seconds + ctx.common.check_timeout)
            points = series.read_series(path)
            h.details = {"series": SERIES_FILE, "windows": len(points)}
            assert result is not None, f"{error} (kept {len(points)} windows in {SERIES_FILE})"
            h.message = f"{len(points)} windows"
        points = series.read_series(path)
        if len(points) < 2:
            rec.skip("soak.decay", f"only {len(points)} soak window(s): the soak was too short")
            return
        t = [p["t_s"] for p in points]
        thr = [p["throughput"] for p in points if p.get("throughput")]
        loss = series.decay(thr)
        rec.metric("throughput_decay", loss, "ratio", "lower", description="throughput lost, first vs last 10% of soak")
        rec.metric("soak_throughput", statistics.median(thr), "items/s", "higher", samples=thr)
        growth = series.growth_mb_per_hour([(t, [p["memory_mb"] for p in points])])
        _record_growth(ctx, growth, "over the soak run", (t[-1] - t[0]) if len(t) > 1 else 0.0)
        rec.summary["soak"] = {"windows": len(points), "seconds": t[-1], "throughput_decay": loss}


def main(argv: list[str] | None = None) -> int:
    return stage_main(sys.modules[__name__], argv)


if __name__ == "__main__":
    raise SystemExit(main())
