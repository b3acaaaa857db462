"""The tail test: did the rate of slow iterations (above tail_factor x the baseline median) go up?

Spikes cluster: one process with a bad allocator layout or a noisy neighbour
has many, the next has none. Pooling iterations would treat each spike as
independent evidence and over-alarm, so the process is the unit here: each
process contributes its exceedance count, and a permutation test over the
process labels asks whether the candidate's processes have more. The test is
exact under "no change" (the labels are exchangeable), enumerating every
split when there are few enough (10 + 10 processes: 184,756 splits), and
Monte Carlo otherwise. Its statistic, the sum of sqrt(count + 3/8) (Anscombe's
variance-stabilising transform for counts), lets one very spiky process weigh
less than a broad increase.

``alpha`` here is the tail's own level: ``compare_runs`` passes alpha/2, as it
makes two claims per metric (body and tail).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from typing import Literal

import numpy as np

__all__ = ["MIN_TAIL_ITERATIONS", "permutation_p", "tail_test"]

TailVerdict = Literal["regression", "no_change", "inconclusive"]

MIN_TAIL_ITERATIONS = 20  # per process: below this a rate of a few percent is mostly zeros
_EXACT_LIMIT = 200_000  # enumerate splits up to this many, else sample
_RESAMPLES = 20_000
_SEED = 7  # fixed: the same samples always give the same p-value


@functools.lru_cache(maxsize=4)  # 10 + 10 processes: 184,756 x 20 float32, about 15 MB
def _split_masks(n: int, k: int) -> np.ndarray:
    """Every way to choose ``k`` of ``n`` positions, as rows of 0/1 (for one matrix product)."""
    rows = np.fromiter(itertools.chain.from_iterable(itertools.combinations(range(n), k)), dtype=np.int32)
    masks = np.zeros((math.comb(n, k), n), dtype=np.float32)  # half the memory; sums of <= 64 scores
    masks[np.repeat(np.arange(masks.shape[0]), k), rows] = 1.0
    return masks


def permutation_p(candidate: Sequence[float], baseline: Sequence[float]) -> float:
    """One-sided p-value that ``candidate`` values are larger, by the sum statistic over all label splits."""
    z = np.concatenate([np.asarray(candidate, float), np.asarray(baseline, float)])
    n, k = z.size, len(candidate)
    observed = z[:k].sum() - 1e-9 * max(1.0, abs(z).max())  # ties count as "at least as large"
    if math.comb(n, k) <= _EXACT_LIMIT:
        return float(np.mean(_split_masks(n, k) @ z.astype(np.float32) >= np.float32(observed)))
    rng = np.random.default_rng(_SEED)
    picks = np.argsort(rng.random((_RESAMPLES, n)), axis=1)[:, :k]
    hits = int(np.sum(z[picks].sum(axis=1) >= observed))
    return (hits + 1) / (_RESAMPLES + 1)


def tail_test(
    b: Sequence[np.ndarray],
    c: Sequence[np.ndarray],
    *,
    better: str,
    alpha: float,
    factor: float,
    min_processes: int,
) -> tuple[TailVerdict, float | None, float | None, float | None]:
    """(verdict, pooled rate baseline, pooled rate candidate, p-value) for per-process sample arrays."""
    center = float(np.median([np.median(g) for g in b]))

    def slow(g: np.ndarray) -> int:
        return int(np.sum(g > factor * center) if better == "lower" else np.sum(g < center / factor))

    counts_b = np.array([slow(g) for g in b], float)
    counts_c = np.array([slow(g) for g in c], float)
    sizes_b = np.array([len(g) for g in b], float)
    sizes_c = np.array([len(g) for g in c], float)
    rate_b, rate_c = float(counts_b.sum() / sizes_b.sum()), float(counts_c.sum() / sizes_c.sum())
    if len(b) < min_processes or len(c) < min_processes or min(sizes_b.min(), sizes_c.min()) < MIN_TAIL_ITERATIONS:
        return "inconclusive", rate_b, rate_c, None
    # counts scaled to a common process length, so unequal iteration counts compare fairly
    m = float(np.mean(np.concatenate([sizes_b, sizes_c])))
    score_b = np.sqrt(counts_b / sizes_b * m + 0.375)
    score_c = np.sqrt(counts_c / sizes_c * m + 0.375)
    p = permutation_p(score_c, score_b)
    verdict: TailVerdict = "regression" if p < alpha and rate_c > rate_b else "no_change"
    return verdict, rate_b, rate_c, p
