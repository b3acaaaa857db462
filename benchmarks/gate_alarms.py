"""What `gatekeeper history alarms` measures on runners of known noise: the default gates' false alarms.

Each trial records N runs of nothing changing into a real sqlite store: 10 processes x 20 samples a run, every
process its own level (log-normal, sigma 1%) with its samples around it by the same sigma (the change-point
benchmark's model), and every run a level of its own besides (log-normal, sigma = the run noise: 0 is a runner
whose runs differ only by their processes; 1-3% are shared nodes, wandering clocks). Then
``gatekeeper.evaluate.replay.replay`` replays the default gates.yaml over it. Per run noise: the share of the
judged pairs where ``latency-median`` and ``p99-latency`` failed or warned (every one a false alarm: nothing
changed), how many pairs were judged, and the seconds one replay took.

    python benchmarks/gate_alarms.py [--trials 20] [--runs 30] [--seed 2026] [--noise 0,0.005,0.01,0.02,0.03]
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gatekeeper.contract.stage_report import Environment, Metric, StageReport  # noqa: E402
from gatekeeper.evaluate.gates import default_gates_path, load_gates  # noqa: E402
from gatekeeper.evaluate.replay import replay  # noqa: E402
from gatekeeper.history import RunInfo  # noqa: E402
from gatekeeper.history.sqlite import SqliteStore  # noqa: E402

PROCESSES, SAMPLES, PROCESS_NOISE = 10, 20, 0.01
ENV = Environment("2.5.1+rocm6.2", "3.11.7", "runner-1", "stable", "rocm", rocm_version="6.2.4", gfx_arch="gfx942")
GATES = ("latency-median", "p99-latency")


def _run(rng: np.random.Generator, run_noise: float) -> StageReport:
    level = 10.0 * float(np.exp(rng.normal(0, run_noise)))
    samples = [
        list(level * np.exp(rng.normal(0, PROCESS_NOISE)) * np.exp(rng.normal(0, PROCESS_NOISE, SAMPLES)))
        for _ in range(PROCESSES)
    ]
    pooled = np.concatenate(samples)
    metrics = {
        "latency_ms": Metric.of(float(np.median([np.median(s) for s in samples])), "ms", "lower", samples),
        "latency_ms.p99": Metric.of(float(np.quantile(pooled, 0.99)), "ms", "lower"),
    }
    return StageReport("performance_baseline", "passed", "2026-11-01T00:00:00+00:00", 1.0, ENV, metrics)


def trial(
    rng: np.random.Generator, run_noise: float, runs: int, where: Path
) -> tuple[dict[str, tuple[int, int]], float]:
    """(gate -> (alarms, judged), seconds of the replay) of one history."""
    db = where / "history.db"
    store = SqliteStore(db, create=True)
    start = dt.datetime(2026, 1, 1, 2, tzinfo=dt.timezone.utc)
    for night in range(runs):
        at = (start + dt.timedelta(days=night)).isoformat()
        store.save(_run(rng, run_noise), RunInfo("main", f"{night:040x}", str(1000 + night), "pass", at))
    gates = load_gates(default_gates_path(cwd=where))
    t0 = time.perf_counter()
    done = replay(SqliteStore(db), gates, today=dt.date(2026, 12, 4))
    seconds = time.perf_counter() - t0
    db.unlink()
    return {g.gate: (g.alarms, g.judged) for g in done.gates if g.gate in GATES}, seconds


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=20)
    p.add_argument("--runs", type=int, default=30)
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument("--noise", default="0,0.005,0.01,0.02,0.03", help="run noises (sigma of a run's own level)")
    args = p.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    print(
        "| run noise | latency-median alarms | p99-latency alarms | pairs judged (median-gate, mean) | s per replay |"
    )
    print("| ---: | ---: | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory() as tmp:
        for noise in (float(x) for x in args.noise.split(",")):
            totals = {g: [0, 0] for g in GATES}
            seconds = 0.0
            for _ in range(args.trials):
                counts, took = trial(rng, noise, args.runs, Path(tmp))
                seconds += took
                for g, (alarms, judged) in counts.items():
                    totals[g][0] += alarms
                    totals[g][1] += judged
            cells = [f"{a / n:.1%} ({a}/{n})" if n else "-" for a, n in (totals[g] for g in GATES)]
            pairs = totals["latency-median"][1] / args.trials
            print(f"| {noise:.1%} | {cells[0]} | {cells[1]} | {pairs:.1f} | {seconds / args.trials:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
