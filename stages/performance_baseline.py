"""performance_baseline: latency, throughput and memory of the model, from k fresh processes.

Each process is a child (``stages.perf.timing``) started through
``gatekeeper.core.proc.run`` with a timeout: it warms up until two consecutive
windows agree, then times m iterations one by one. Samples keep their process
grouping, because iterations inside one process are not independent samples;
``gatekeeper.stats.compare.compare_runs`` judges them against a baseline later.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any

from gatekeeper.contract.failures import CheckKind, MetricKind
from gatekeeper.contract.metric_points import SKIPPED, point_label, point_name
from gatekeeper.core.errors import InputError
from stages._stage import StageContext, stage_main
from stages.perf import extras, measure, rounds, series, sweep

__all__ = ["DESCRIPTION", "NAME", "Options", "add_arguments", "main", "parse_duration", "run"]

NAME = "performance_baseline"
DESCRIPTION = "Latency, throughput and memory of the model in k fresh processes (and an optional soak run)."
SERIES_FILE = series.SERIES_FILE


@dataclass(frozen=True)
class Options:
    processes: int = 5
    iterations: int = 50
    warmup: int = 10
    backward: bool = False
    duration: str | None = None
    sweep: list[str] | None = None
    sweep_budget: str | None = None
    # opt-in measurements beside the timing runs (stages/perf/extras.py)
    efficiency: bool = False
    copy_bandwidth: bool = False
    copy_sizes: str = "auto"
    load: str | None = None
    load_duration: str = "30s"
    max_batch: int = 1
    max_wait_ms: float = 0.0
    load_timeout: float = 1.0
    baseline: str | None = None
    max_processes: int = 20
    max_seconds: float | None = None
    min_effect: float = 0.03
    max_cv: float = 0.05


# Every check and metric this stage writes, with the failure category of each (contract/failures.py).
CHECKS = (
    CheckKind(
        "*process.*",
        "configuration_error",
        "a fresh timing process runs the model to the end (the message has its exit and last lines)",
        "run the model's forward on the device by hand with the batch size and input shape of the run; a timing "
        "process that hangs or crashes is named by its timeout or signal",
    ),
    CheckKind(
        "point*",
        "performance_regression",
        "a sweep point the device can run was measured",
        "give the sweep a larger --sweep-budget, or drop the point the device cannot run",
    ),
    CheckKind(
        "clocks_and_temperature",
        "performance_regression",
        "GPU clocks and temperatures were recorded beside the timings",
        "check that rocm-smi / amd-smi / nvidia-smi run on the runner",
    ),
    CheckKind(
        "gpu_settings",
        "infra_error",
        "the GPU's power cap, performance level and partitions did not change while the timings ran",
        "keep the runner's GPU settings fixed for the whole job (no other job or agent may run rocm-smi "
        "--setperflevel / --setpoweroverdrive or nvidia-smi -pl on it), then run the stage again",
    ),
    CheckKind(
        "memory_growth",
        "performance_regression",
        "allocated memory does not grow while the model runs",
        "look for tensors kept across iterations (lists of outputs, autograd graphs kept alive, caches)",
    ),
    CheckKind(
        "copy*",
        "performance_regression",
        "host-device copy bandwidth at each size, pinned and pageable",
        "check the PCIe link (verify_hip's hygiene.pcie_link) and that the copies run from pinned memory",
    ),
    CheckKind(
        "efficiency*",
        "performance_regression",
        "TFLOPS per op and dtype and the fraction of the device's rated peak",
        "compare the clocks and the library versions with a run that reached the peak fraction",
    ),
    CheckKind(
        "load*",
        "performance_regression",
        "an open-loop load test: latency from the intended send time at each request rate",
        "lower the rate or raise --max-batch; a rate the model cannot keep up with queues without bound",
    ),
    CheckKind(
        "sequential",
        "performance_regression",
        "how many processes the sequential rule ran against the baseline and why it stopped (info only)",
        "raise --max-processes or --max-seconds when it stopped on its budget with an inconclusive verdict",
    ),
    CheckKind(
        "soak*",
        "performance_regression",
        "the soak run (--duration) keeps its throughput",
        "read the soak series (performance_baseline.series.jsonl) for the window where throughput fell",
    ),
)
METRICS = (
    MetricKind("latency_ms*", "performance_regression", "latency of one batch"),
    MetricKind("throughput*", "performance_regression", "items per second, its variation and decay"),
    MetricKind("peak_memory_mb*", "performance_regression", "peak device memory"),
    MetricKind("warmup_converged*", "performance_regression", "1 when the warm-up converged"),
    MetricKind("memory_growth_mb_per_hour*", "performance_regression", "memory growth over time"),
    MetricKind("soak_throughput", "performance_regression", "throughput over a soak run"),
    MetricKind("copy_bandwidth_gbps*", "performance_regression", "host-device copy bandwidth"),
    MetricKind("tflops*", "performance_regression", "achieved TFLOPS per op and dtype"),
    MetricKind("compute_efficiency*", "performance_regression", "fraction of the rated peak"),
    MetricKind("load_*", "performance_regression", "open-loop load latency, rate and errors"),
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("performance_baseline")
    g.add_argument("--processes", type=int, default=5, help="fresh processes to time (default 5; nightly: 10)")
    g.add_argument("--iterations", type=int, default=50, help="timed iterations per process (default 50)")
    g.add_argument("--warmup", type=int, default=10, help="minimum warm-up iterations; more run until timings converge")
    g.add_argument("--backward", action="store_true", help="time forward+backward instead of forward only")
    g.add_argument("--duration", help="soak mode: also run this long, e.g. 90s, 30m, 24h")
    g.add_argument(
        "--sweep",
        action="append",
        metavar="KEY=V1,V2",
        help=f"measure every combination instead of one point (repeatable; keys: {', '.join(sweep.KEYS)})",
    )
    g.add_argument("--sweep-budget", metavar="DURATION", help="stop starting sweep points after this long, e.g. 10m")
    extras.add_arguments(g)
    g.add_argument(
        "--baseline",
        metavar="SPEC",
        help="sequential sampling: reuse this store's comparable result (as evaluate --baseline) and add "
        "processes after the first --processes until the judge decides",
    )
    g.add_argument(
        "--max-processes", type=int, default=20, help="with --baseline: at most this many processes (default 20)"
    )
    g.add_argument("--max-seconds", type=float, help="with --baseline: start no process after this many seconds")
    g.add_argument(
        "--min-effect",
        type=float,
        default=0.03,
        help="with --baseline: the tolerance the rounds decide on, as your latency gate's (default 0.03 = +3%%)",
    )
    g.add_argument(
        "--max-cv",
        type=float,
        default=0.05,
        help="with --baseline: the noise guard the rounds decide under, as your latency gate's max_cv (default 0.05)",
    )


def parse_duration(text: str, option: str = "--duration") -> float:
    """Seconds from '90', '90s', '30m' or '24h'."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text or "")
    if not m or float(m.group(1)) <= 0:
        raise InputError(None, option, f"{text!r} is not a duration", "e.g. 90s, 30m or 24h")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def _validate(opts: Options) -> None:
    for name in ("processes", "iterations"):
        if getattr(opts, name) < 1:
            raise InputError(None, f"--{name}", f"must be at least 1 (got {getattr(opts, name)})", "pass 1 or more")
    if opts.warmup < 0:
        raise InputError(None, "--warmup", f"must not be negative (got {opts.warmup})", "pass 0 or more")
    extras.validate(opts, parse_duration)
    if opts.max_processes < max(opts.processes, 3):
        raise InputError(
            None, "--max-processes", f"must be at least --processes and 3 (got {opts.max_processes})", "e.g. 20"
        )
    if opts.max_seconds is not None and opts.max_seconds <= 0:
        raise InputError(
            None, "--max-seconds", f"must be positive (got {opts.max_seconds:g})", "pass a positive number of seconds"
        )
    if not 0.0 < opts.min_effect < 1.0:
        raise InputError(None, "--min-effect", f"must lie between 0 and 1 (got {opts.min_effect:g})", "e.g. 0.03")
    if not 0.0 < opts.max_cv <= rounds.MAX_CV_LIMIT:
        raise InputError(
            None,
            "--max-cv",
            f"must lie in (0, {rounds.MAX_CV_LIMIT:g}] (got {opts.max_cv:g})",
            "e.g. 0.05, as gates.yaml",
        )


def run(ctx: StageContext) -> None:
    opts: Options = ctx.options
    _validate(opts)
    soak_s = parse_duration(opts.duration) if opts.duration else None
    axes = sweep.parse_sweep(opts.sweep or ())
    budget_s = parse_duration(opts.sweep_budget, "--sweep-budget") if opts.sweep_budget else None
    if budget_s is not None and not axes:
        raise InputError(None, "--sweep-budget", "caps a sweep, and no --sweep was given", "add --sweep KEY=V1,V2")
    common = ctx.common
    from stages.models import resolve_model

    # A model that does not import: exit 2 with one line, not a failure per timing process. It is only
    # imported here; building and running it stays in the timing processes (a crash is a failed check).
    resolve_model(common.model)
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
    # normalised (batch_size=08 is 8), so equal sweeps compare as equal (gatekeeper.history.comparability)
    ctx.config["sweep"] = {a.key: list(a.values) for a in axes} if axes else None
    results: list[dict[str, Any]] = []
    if axes:
        if opts.baseline:
            ctx.rec.log("  --baseline drives the rounds of a single run; a sweep times --processes per point")
        run_sweep(ctx, base_cfg, axes, budget_s)
    else:
        found = rounds.load_baseline(ctx, opts.baseline)
        header = f"{opts.processes} fresh processes x {opts.iterations} iterations"
        if found.samples is not None:
            header += f", then one more at a time until the judge decides (at most {opts.max_processes})"
        with ctx.rec.group("timing", header):
            results, clocks, _ = rounds.measure_rounds(ctx, base_cfg, found)
            measure.clocks_check(ctx, clocks)
            measure.settings_check(ctx)
        if results:
            ctx.rec.summary.update(measure.record_timing(ctx, results, clocks, base_cfg["batch_size"]))
    if soak_s is not None:
        _soak(ctx, base_cfg, soak_s)
    elif results:
        growth = series.growth_mb_per_hour([(r["memory_t_s"], r["memory_mb"]) for r in results])
        span = max((r["memory_t_s"][-1] - r["memory_t_s"][0] for r in results if len(r["memory_t_s"]) > 1), default=0.0)
        _record_growth(ctx, growth, "over the timed iterations of all processes", span)
    extras.run(ctx, parse_duration)


def run_sweep(
    ctx: StageContext, base_cfg: dict[str, Any], axes: tuple[sweep.Axis, ...], budget_s: float | None
) -> None:
    """Measure every point like a single run; one the device cannot run, or not reached within
    the budget, is skipped with the reason (a point cut short publishes nothing)."""
    rec, opts = ctx.rec, ctx.options
    todo = sweep.points(axes)
    start = time.monotonic()
    deadline = None if budget_s is None else start + budget_s
    rows: list[dict[str, Any]] = []
    converged: list[bool] = []
    all_clocks: list[dict[str, Any]] = []
    header = f"{len(todo)} points x {opts.processes} fresh processes x {opts.iterations} iterations"
    with rec.group("sweep", header + (f", budget {budget_s:.0f} s" if budget_s else "")):
        for n, point in enumerate(todo):
            label = point_label(point)
            cfg = sweep.child_config(base_cfg, point)
            t0 = time.monotonic()
            rec.log(f"  point {n + 1}/{len(todo)} {label}")
            why = sweep.unsupported(cfg, ctx.device.kind)
            if why is None and deadline is not None and t0 >= deadline:
                why = f"the sweep budget of {budget_s:.0f} s was spent after {n} of {len(todo)} points"
            results: list[dict[str, Any]] = []
            if why is None:
                results, clocks, why = measure.measure_point(ctx, cfg, prefix=f"point{label}.", deadline=deadline)
                all_clocks += clocks
            row: dict[str, Any] = {"point": point, "label": label}
            if not why and not results:
                why = "every timing process failed (see its process checks)"
                row["status"] = "failed"
            if why:
                _unmeasured(ctx, point, why)
                rows.append({"status": "skipped", **row, "reason": why, "seconds": round(time.monotonic() - t0, 2)})
                continue
            summary = measure.record_timing(ctx, results, clocks, cfg["batch_size"], point)
            converged.append(all(r["warmup_converged"] for r in results))
            rows.append({**row, "status": "measured", "seconds": round(time.monotonic() - t0, 2), **summary})
        measure.clocks_check(ctx, all_clocks)
        measure.settings_check(ctx)
    if converged:  # the judge reads the plain metric: one unconverged point makes the timings inconclusive
        rec.metric(
            "warmup_converged", 1.0 if all(converged) else 0.0, "bool", "higher", description="every sweep point"
        )
    rec.summary["sweep"] = {
        "axes": {a.key: list(a.values) for a in axes},
        "budget_s": budget_s,
        "seconds": round(time.monotonic() - start, 2),
        "points": rows,
    }
    done = sum(r["status"] == "measured" for r in rows)
    rec.log(f"  sweep: {done} of {len(rows)} points measured in {time.monotonic() - start:.1f} s")


def _unmeasured(ctx: StageContext, point: dict[str, str], why: str) -> None:
    """A point not measured still names its metrics (value None) and a skipped check, so gates say why."""
    if not why.startswith("every timing process failed"):
        ctx.rec.skip(f"point{point_label(point)}", why)
    for base, unit, better in (
        ("latency_ms", "ms", "lower"),
        ("throughput", "items/s", "higher"),
        ("peak_memory_mb", "MB", "lower"),
    ):
        ctx.rec.metric(point_name(base, point), None, unit, better, description=f"{SKIPPED}{why}")


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
            result, error = measure.child(cfg, seconds + ctx.common.check_timeout)
            points = series.read_series(path)
            h.details = {"series": SERIES_FILE, "windows": len(points)}
            assert result is not None, f"{error} (kept {len(points)} windows in {SERIES_FILE})"
            h.message = f"{len(points)} windows"
        points = series.read_series(path)
        if len(points) < 2:
            why = f"only {len(points)} soak window(s): the soak was too short"
            rec.skip("soak.decay", why)
            rec.metric("throughput_decay", None, "ratio", "lower", description=f"{SKIPPED}{why}")  # the gate says why
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
