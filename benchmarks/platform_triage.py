"""How often `gatekeeper history platforms` calls a move the code's or a platform's, right and wrong.

Two platforms (ROCm and CUDA) each ran a base and a head commit: one run per platform and commit, 10
processes x 20 samples per run, every process its own level (log-normal, sigma = the per-process noise,
1% or 3%) with its samples scattered around it by the same sigma (the change-point benchmark's model,
``benchmarks/changepoints.py``). Scenarios: nothing moved; the code moved (both platforms by the same
step); the platform moved (ROCm only). Each trial is judged by ``gatekeeper.history.platforms.platform_triage``
on in-memory records, as the command reads a store (per-process medians), with its defaults (alpha 0.01,
min_effect 2%).

    python benchmarks/platform_triage.py [--trials 1000] [--seed 2026]
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
        f"2026-11-0{day}T00:00:00+00:00", points={"latency_ms": medians}, config={"model": "demo"},
    )  # fmt: skip


def trial(rng: np.random.Generator, noise: float, rocm_step: float, cuda_step: float) -> str:
    rows = []
    for day, commit in ((1, "a" * 40), (2, "b" * 40)):
        for p, step in zip(PLATFORMS, (rocm_step, cuda_step), strict=True):
            level = 10.0 * (1 + step if day == 2 else 1.0)
            rows.append(_row(len(rows), p, commit, day, _medians(rng, level, noise)))
    [finding] = platform_triage(rows, commit="b" * 40).findings
    return finding.call


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=2026)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    scenarios = [("nothing moved", 0.0, 0.0)]
    for step in (0.03, 0.05, 0.10):
        scenarios += [(f"code +{step:.0%}", step, step), (f"ROCm only +{step:.0%}", step, 0.0)]
    print("| noise | scenario | right call | " + " | ".join(CALLS) + " |")
    print("| --- | --- | ---: | " + " | ".join("---:" for _ in CALLS) + " |")
    started = time.perf_counter()
    for noise in (0.01, 0.03):
        for name, rocm, cuda in scenarios:
            counts = collections.Counter(trial(rng, noise, rocm, cuda) for _ in range(args.trials))
            right = "no change" if rocm == cuda == 0 else "code" if rocm == cuda else "platform"
            cells = " | ".join(f"{counts[c] / args.trials:.1%}" for c in CALLS)
            print(f"| {noise:.0%} | {name} | {right} | {cells} |")
    print(f"\n{args.trials} trials per row, seed {args.seed}, {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
