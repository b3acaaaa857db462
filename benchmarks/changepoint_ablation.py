"""Where ``find_change_points`` loses power: the method as shipped beside variants that each change one
thing, on the same series as ``benchmarks/changepoints.py`` (its model, its profiles), recorded in
benchmarks/README.md, "Where the rest goes".

    python benchmarks/changepoint_ablation.py [--series 2000] [--seed 11] [--mean]
"""

from __future__ import annotations

import argparse
import contextlib

import numpy as np
from changepoints import ISSUE, PROCESSES, PROFILES, RUNS, SAMPLES

from gatekeeper.stats import changepoint
from gatekeeper.stats.changepoint import median_table


def level_series(
    rng: np.random.Generator, count: int, step: float, noise: float, run_effect: float = 0.0, *, mean: bool = False
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, int | None]]:
    """``count`` series as ``make_series`` draws them (the same model, vectorised), reduced to what
    ``level_changes`` reads: (levels, within-run variances, processes, step run). ``mean``: each process
    summarised by the mean log of its samples instead of its median."""
    out = []
    for _ in range(count):
        at = int(rng.integers(8, 23)) if step else None
        level = np.full(RUNS, np.log(10.0))
        if at is not None:
            level[at:] += np.log1p(step)
        if run_effect:
            level += rng.normal(0, run_effect, RUNS)
        logs = (level[:, None] + rng.normal(0, noise, (RUNS, PROCESSES)))[:, :, None]
        logs = logs + rng.normal(0, noise, (RUNS, PROCESSES, SAMPLES))
        summary = logs.mean(axis=2) if mean else np.median(logs, axis=2)
        x, within, counts = median_table(np.exp(summary).tolist())
        out.append((x, within, counts, at))
    return out


@contextlib.contextmanager
def _variant(**attrs: object):  # type: ignore[no-untyped-def]
    """``gatekeeper.stats.changepoint`` with some module attributes replaced, for one ablation row."""
    saved = {name: getattr(changepoint, name) for name in attrs}
    for name, value in attrs.items():
        setattr(changepoint, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(changepoint, name, value)


def ablation(args: argparse.Namespace) -> None:
    """find_change_points as shipped beside variants that each change one thing, on the same series (the
    issue's two noise profiles, ``args.series`` per cell), and the A/A rate of the two profiles where runs
    differ as a whole. Recall as in the accuracy table; "exact": the share of the found steps placed at
    their very run (what names the right run's stack changes in ``history changes``)."""
    rng = np.random.default_rng(args.seed)
    cells = {}
    for profile, noise, run_effect in PROFILES:
        for step in (0.01, 0.02, 0.0) if profile in ISSUE else (0.0,):
            cells[(profile, step)] = level_series(rng, args.series, step, noise, run_effect)
    orig_noise, orig_refine, orig_test = changepoint.run_noise, changepoint._refine, changepoint._test_segment

    truth = {"variance": 0.0}  # the run variance of the cell being scanned

    def known_noise(x: np.ndarray, within: np.ndarray, counts: np.ndarray | None = None) -> changepoint.Noise:
        return changepoint.Noise(np.full(len(x), truth["variance"]), (), extra=False)

    def within_noise(x: np.ndarray, within: np.ndarray, counts: np.ndarray | None = None) -> changepoint.Noise:
        got = orig_noise(x, within, counts)
        if got.extra:
            return got
        own = np.asarray(counts, float) - 1
        pooled = float(np.sum(own * np.asarray(counts) * within) / own.sum())
        return changepoint.Noise(pooled / np.asarray(counts, float), (float(own.sum()),), extra=False)

    def window_refine(x: np.ndarray, v: np.ndarray, where: list[int], min_size: int) -> list[int]:
        where = orig_refine(x, v, where, min_size)
        for idx in range(len(where)):
            lo = where[idx - 1] if idx else 0
            hi = where[idx + 1] if idx + 1 < len(where) else len(x)
            k, z = changepoint.split_scan(x[lo:hi], v[lo:hi], min_size)
            weight = np.exp(z * z / 2 - float(np.max(z * z / 2)))
            padded = np.pad(weight, 1)
            where[idx] = lo + int(k[int(np.argmax(padded[:-2] + padded[1:-1] + padded[2:]))])
        return where

    def split_only(x, v, dfs, min_size, level):  # type: ignore[no-untyped-def]
        with _variant(_TWO_CHANGES_MAX=0):
            return orig_test(x, v, dfs, min_size, level * 1.25)

    variants: list[tuple[str, dict[str, object], float]] = [
        ("as shipped (alpha 0.01)", {}, 0.01),
        ("run variance known exactly (not learnt; in every profile)", {"run_noise": known_noise}, 0.01),
        (
            "within-run variance alone unless the F test rejects (no max with the runs' scatter)",
            {"run_noise": within_noise},
            0.01,
        ),
        ("no change-and-change-back scan, its share to the split (alpha 0.0125)", {"_test_segment": split_only}, 0.01),
        ("placed at the centre of the 3 runs with the most likelihood", {"_refine": window_refine}, 0.01),
        ("alpha 0.018", {}, 0.018),
        ("alpha 0.018, preliminary F test at 0.25", {"EXTRA_LEVEL": 0.25}, 0.018),
    ]
    mean_cells = {}
    if args.mean:
        rng = np.random.default_rng(args.seed)
        for profile, noise, run_effect in PROFILES:
            for step in (0.01, 0.02, 0.0) if profile in ISSUE else (0.0,):
                mean_cells[(profile, step)] = level_series(rng, args.series, step, noise, run_effect, mean=True)
        variants.append(("each process summarised by its mean log sample, not its median", {"cells": mean_cells}, 0.01))
    head = "| variant | " + " | ".join(
        [f"recall 1% ({p})" for p in ISSUE] + ["recall 1% (avg)", "recall 2% (avg)", "of those, at their run"]
        + [f"A/A ({p})" for p, _, _ in PROFILES]
    ) + " |"  # fmt: skip
    print(f"seed {args.seed}, {args.series} series per cell\n")
    print(head)
    print("|" + " --- |" * (head.count("|") - 1))
    variance = {  # what a run's level scatters by in each profile: its processes, and the runs as a whole
        p: n**2 * (1 + np.pi / (2 * SAMPLES)) / PROCESSES + e**2 for p, n, e in PROFILES
    }
    for name, attrs, alpha in variants:
        use = attrs.pop("cells", cells)
        found = {}
        with _variant(**attrs):
            for key, series in use.items():  # type: ignore[union-attr]
                truth["variance"] = variance[key[0]]
                found[key] = [[cp.index for cp in changepoint.level_changes(x, w, counts=c, alpha=alpha)]
                              for x, w, c, _ in series]  # fmt: skip
        recall, exact, placed = {}, 0, 0
        for (profile, step), got in found.items():
            ats = [at for *_, at in use[(profile, step)]]  # type: ignore[index]
            if step:
                hits = [[i for i in f if abs(i - at) <= 1] for f, at in zip(got, ats, strict=True)]
                recall[(profile, step)] = np.mean([bool(h) for h in hits])
                exact += sum(at in f for f, at in zip(got, ats, strict=True))
                placed += sum(bool(h) for h in hits)
            else:
                recall[(profile, step)] = np.mean([bool(f) for f in got])
        cols = [f"{recall[(p, 0.01)]:.3f}" for p in ISSUE]
        cols += [f"{np.mean([recall[(p, s)] for p in ISSUE]):.3f}" for s in (0.01, 0.02)]
        cols += [f"{exact / max(placed, 1):.2f}"] + [f"{recall[(p, 0.0)]:.2%}" for p, _, _ in PROFILES]
        print(f"| {name} | " + " | ".join(cols) + " |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=2000, help="series per cell (default 2000)")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--mean", action="store_true", help="also: each process summarised by its mean log sample")
    ablation(parser.parse_args())


if __name__ == "__main__":
    main()
