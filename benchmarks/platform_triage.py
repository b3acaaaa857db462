"""How often `gatekeeper history platforms` calls a move the code's or a platform's, right and wrong.

Two platforms (ROCm and CUDA) each ran k commits up to the base and k from the head on (k runs a side, one
per commit: 1, 3 or 5), 10 processes x 20 samples per run, every process its own level (log-normal, sigma =
the per-process noise, 1% or 3%) with its samples scattered around it by the same sigma (the change-point
benchmark's model, ``benchmarks/changepoints.py``). Scenarios: nothing moved; the code moved (both
platforms by the same step); the platform moved (ROCm only). A last block gives every run a level of its
own besides (log-normal, sigma 1%: runs that differ beyond their processes, as nights on shared nodes do).
Each trial is judged by ``gatekeeper.history.platforms.platform_triage`` on in-memory records, as the
command reads a store (per-process medians), with its defaults (alpha 0.01, min_effect 2%), at the head
commit against the newest commit both ran before it (the base).

    python benchmarks/platform_triage.py [--trials 1000] [--seed 2026] [--runs 1,3,5]
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gatekeeper.history.platforms import platform_triage  # noqa: E402
from gatekeeper.history.sql_schema import SeriesRow  # noqa: E402

PROCESSES, SAMPLES = 10, 20
PLATFORMS = (("rocm", "gfx942"), ("cuda", "sm_90"))
CALLS = ("no change", "code", "platform", "mixed", "inconclusive", "one platform")


def _medians(rng: np.random.Generator, level: float, noise: float) -> list[float]:
    procs = level * np.exp(rng.normal(0, noise, PROCESSES))
    return [float(np.median(p * np.exp(rng.normal(0, noise, SAMPLES)))) for p in procs]


def _row(i: int, platform: tuple[str, str], commit: str, day: int, medians: list[float]) -> SeriesRow:
    kind, arch = platform
    return SeriesRow(
        i, "performance_baseline", "stable", kind, arch, None, "demo", "main", None, commit, str(i), "pass",
        f"2026-11-01T{day:02d}:00:00+00:00", points={"latency_ms": medians}, config={"model": "demo"},
    )  # fmt: skip


def _commit(day: int) -> str:
    return f"{day:040x}"


def trial(
    rng: np.random.Generator, noise: float, rocm_step: float, cuda_step: float, runs: int = 1, run_noise: float = 0.0
) -> str:
    """One history of ``runs`` runs a side on each platform; the call at the first commit after the step."""
    rows = []
    for day in range(1, 2 * runs + 1):
        for p, step in zip(PLATFORMS, (rocm_step, cuda_step), strict=True):
            level = 10.0 * (1 + step if day > runs else 1.0)
            if run_noise:  # drawn only then: one run a side without it draws what the one-run benchmark drew
                level *= float(np.exp(rng.normal(0, run_noise)))
            rows.append(_row(len(rows), p, _commit(day), day, _medians(rng, level, noise)))
    [finding] = platform_triage(rows, commit=_commit(runs + 1)).findings
    return finding.call


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--runs", default="1,3,5", help="runs a side, comma-separated")
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    sides = [int(k) for k in args.runs.split(",")]
    scenarios = [("nothing moved", 0.0, 0.0)]
    for step in (0.03, 0.05, 0.10):
        scenarios += [(f"code +{step:.0%}", step, step), (f"ROCm only +{step:.0%}", step, 0.0)]
    blocks = [(noise, 0.0, k, scenarios) for k in sides for noise in (0.01, 0.03)]
    blocks += [(0.03, 0.01, k, [s for s in scenarios if s[0] in ("nothing moved", "code +5%", "ROCm only +5%")])
               for k in sides]  # fmt: skip
    print("| noise | runs a side | scenario | right call | " + " | ".join(CALLS) + " |")
    print("| --- | ---: | --- | ---: | " + " | ".join("---:" for _ in CALLS) + " |")
    started = time.perf_counter()
    for noise, run_noise, k, rows in blocks:
        for name, rocm, cuda in rows:
            counts = collections.Counter(trial(rng, noise, rocm, cuda, k, run_noise) for _ in range(args.trials))
            right = "no change" if rocm == cuda == 0 else "code" if rocm == cuda else "platform"
            cells = " | ".join(f"{counts[c] / args.trials:.1%}" for c in CALLS)
            label = f"{noise:.0%}" + (f" + runs {run_noise:.0%}" if run_noise else "")
            print(f"| {label} | {k} | {name} | {right} | {cells} |", flush=True)
    print(f"\n{args.trials} trials per row, seed {args.seed}, {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
