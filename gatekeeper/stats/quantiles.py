"""Percentiles of per-process samples: Harrell-Davis estimates, cluster-bootstrap intervals, run summaries.

Harrell-Davis (a Beta-weighted mean of all order statistics) is far less jumpy
than a single order statistic at P99 with a few hundred samples. scipy has it
as ``mstats.hdquantiles``, but that works on masked arrays one quantile at a
time and recomputes the weights on every call; computing the weights once per
sample size lets the cluster bootstrap reuse them.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

__all__ = ["BOOTSTRAP", "Interval", "as_groups", "cluster_interval", "harrell_davis", "run_summary"]

BOOTSTRAP = 200
_NEGLIGIBLE = 1e-13  # Harrell-Davis weights below this (relative to the largest) are left out
_SEED = 20240601  # fixed: the same samples always give the same interval


@dataclass(frozen=True)
class Interval:
    estimate: float | None
    ci: tuple[float, float] | None


def as_groups(samples: Sequence[float] | Sequence[Sequence[float]]) -> list[np.ndarray]:
    """Per-process arrays; a flat list is one process. Empty processes are dropped."""
    if len(samples) == 0:
        return []
    first = samples[0]
    groups = samples if isinstance(first, Sequence | np.ndarray) else [samples]
    return [np.asarray(g, dtype=float) for g in groups if len(g)]  # type: ignore[arg-type]


@functools.lru_cache(maxsize=256)
def _hd_weights(n: int, q: float) -> np.ndarray:
    a, b = q * (n + 1), (1 - q) * (n + 1)
    edges = sps.beta.cdf(np.arange(n + 1) / n, a, b)
    return np.diff(edges)


def harrell_davis(samples: Sequence[float] | np.ndarray, q: float) -> float:
    """The Harrell-Davis estimate of quantile ``q`` (0 < q < 1) of ``samples``."""
    if not 0 < q < 1:
        raise ValueError("q must be between 0 and 1")
    x = np.sort(np.asarray(samples, dtype=float).ravel())
    if x.size == 0:
        raise ValueError("harrell_davis needs at least one sample")
    if x.size == 1:
        return float(x[0])
    return float(_hd_weights(x.size, q) @ x)


def cluster_interval(
    groups: Sequence[Sequence[float]] | Sequence[np.ndarray],
    q: float,
    confidence: float = 0.95,
    *,
    resamples: int = BOOTSTRAP,
) -> Interval:
    """HD quantile of the pooled samples, with a bootstrap interval that resamples whole processes.

    Resampling processes (not iterations) keeps the interval honest when one
    process is slower or spikier than the others. A single process gets no interval.
    """
    arrays = [np.asarray(g, dtype=float) for g in groups if len(g)]
    if not arrays:
        return Interval(None, None)
    pooled = np.concatenate(arrays)
    estimate = harrell_davis(pooled, q)
    if len(arrays) < 2 or pooled.size < 2 or resamples < 1:
        return Interval(estimate, None)
    rng = np.random.default_rng(_SEED)
    k = len(arrays)
    picks = rng.integers(0, k, size=(resamples, k))
    sizes = {len(a) for a in arrays}
    if len(sizes) == 1:  # the usual case: vectorised, one weight vector
        weights = _hd_weights(pooled.size, q)
        # For a high quantile only the top order statistics carry weight, and the pooled top L of
        # any resample lies within the top L of each chosen process: sort just those.
        lo = int(np.argmax(weights > _NEGLIGIBLE * weights.max()))
        top = pooled.size - lo
        tops = np.stack([np.pad(np.sort(a)[-top:], (max(0, top - a.size), 0), constant_values=-np.inf) for a in arrays])
        resampled = tops[picks].reshape(resamples, -1)
        if resampled.shape[1] > top:  # partition first: sorting only the top is the cost that matters
            resampled = np.partition(resampled, resampled.shape[1] - top, axis=1)[:, -top:]
        resampled = np.sort(resampled, axis=1)
        values = resampled @ weights[lo:]
    else:
        values = np.array([harrell_davis(np.concatenate([arrays[i] for i in row]), q) for row in picks])
    lo, hi = np.quantile(values, [(1 - confidence) / 2, (1 + confidence) / 2])
    return Interval(estimate, (float(lo), float(hi)))


def run_summary(groups: Sequence[Sequence[float]]) -> dict[str, float | None]:
    """Mean, stdev, HD P50/P99/P99.9 (pooled), and the CV of process medians."""
    arrays = as_groups(groups)
    pooled = np.concatenate(arrays) if arrays else np.array([])
    if pooled.size == 0:
        return {"mean": None, "stdev": None, "p50": None, "p99": None, "p999": None, "cv": None}
    meds = np.array([np.median(a) for a in arrays])
    return {
        "mean": float(pooled.mean()),
        "stdev": float(pooled.std(ddof=1)) if pooled.size > 1 else 0.0,
        "p50": harrell_davis(pooled, 0.5),
        "p99": harrell_davis(pooled, 0.99),
        "p999": harrell_davis(pooled, 0.999),
        "cv": float(meds.std(ddof=1) / meds.mean()) if meds.size > 1 else None,
        "processes": float(len(arrays)),
        "iterations": float(pooled.size),
    }
