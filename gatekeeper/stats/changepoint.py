"""Change points in a metric's history: where did its level move, by how much, and how sure is that.

``find_change_points(runs)`` takes the per-process sample groups of each run, oldest first, and
returns every change with the index of the first run after it, the relative change of the level
with a 95% interval, and a p-value. Pure: no I/O, no clock; the permutations use a fixed seed, so
the same history always gives the same answer.

How (binary segmentation with a permutation test):

* Each run is reduced to the mean of the logs of its per-process medians (the process is the unit,
  as in ``gatekeeper.stats.compare``), and to the variance that estimate would have if runs did not
  differ from each other at all: the spread of its process medians over their number. That second
  number is what other tools do not have: they see one median per run.
* A segment is split where a two-sample t statistic between its left and right part is largest; when
  no plain split is significant, where one between a middle part and the rest is (a change and a change
  back: a regression that was later fixed, which a plain split cannot see, each side averaging it away;
  tested at a quarter of ``alpha``, and only in segments of at most 150 runs, as the pairs grow with the
  square of the length). The variance in that statistic is the larger of the runs' own
  scatter around the two part means and the within-run variance: a short part that happens to look
  quiet cannot fake a large t, and a history whose runs genuinely differ from night to night (a
  run-level effect) is judged by that scatter.
* The split counts when the largest t is rare among the largest t's of the same segment with its runs
  shuffled (a permutation test: exact under "nothing changed", whatever the noise looks like; stopped
  early once the p-value is clearly above ``alpha``). A change so clear that a Bonferroni bound over
  every candidate is far below ``alpha`` needs no shuffle. Both parts are then searched again.
* Each change is finally measured between its neighbouring changes: the ratio of the levels with a
  Welch interval.

Why not a library: Apache Otava's ``compute_change_points`` (E-Divisive, the "Hunter" algorithm) and
MongoDB's signal-processing-algorithms judge one scalar per run and give no interval for the change;
ruptures segments without any significance test, so it cannot say whether a change is noise. The
per-process variance above is what lets this find a 1-2% step that they miss;
``benchmarks/changepoints.py`` runs Otava beside this on the same series.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as sps

__all__ = ["ChangePoint", "find_change_points", "level_changes", "median_levels", "run_levels"]

MIN_SIZE = 3  # runs on each side of a change: fewer cannot tell a step from one odd run
ALPHA = 0.01  # per segment test; on a history with no change this is the chance of a false change
PERMUTATIONS = 999
_EARLY_STOP = 10  # Besag-Clifford: stop once this many shuffles beat the observed statistic
_MAX_CELLS = 2_000_000  # shuffled values held at once
_TWO_CHANGES_MAX = 150  # longer segments are scanned for one split only (pairs grow with the square)


@dataclass(frozen=True)
class ChangePoint:
    index: int  # the first run after the change (runs[index] is the first at the new level)
    change: float  # relative change of the level: after / before - 1
    ci: tuple[float, float]  # 95% interval of ``change``
    p_value: float  # permutation p-value of the split, in the segment where it was found
    before: float  # the level (geometric mean of the per-run estimates) between the previous change and this
    after: float  # ... between this change and the next

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "change": self.change,
            "ci": list(self.ci),
            "p_value": self.p_value,
            "before": self.before,
            "after": self.after,
        }


def run_levels(runs: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    """Per run: the mean log of its process medians, and that mean's variance from within the run (0 when
    the run has one process). A run is a list of per-process sample lists; a flat list is one process."""
    medians = []
    for i, run in enumerate(runs):
        groups = _groups(run)
        if not groups:
            raise ValueError(f"run {i} has no samples")
        medians.append([float(np.median(g)) for g in groups])
    return median_levels(medians)


def median_levels(medians: Sequence[Sequence[float]]) -> tuple[np.ndarray, np.ndarray]:
    """``run_levels`` from the per-process medians of each run (what a history store keeps), vectorised."""
    widths = {len(m) for m in medians}
    if len(widths) == 1 and 0 not in widths:  # every run has as many processes: one array, no loop
        table = np.asarray(medians, dtype=float)
        present = np.ones(table.shape, dtype=bool)
    else:
        table = np.ones((len(medians), max(max(widths, default=1), 1)))
        present = np.zeros(table.shape, dtype=bool)
        for i, m in enumerate(medians):
            if len(m) == 0:
                raise ValueError(f"run {i} has no samples")
            table[i, : len(m)] = m
            present[i, : len(m)] = True
    bad = present & ~(np.isfinite(table) & (table > 0))
    if bad.any():
        raise ValueError(
            f"run {int(np.argmax(bad.any(axis=1)))}: samples must be positive and finite (times, rates, sizes)"
        )
    logs = np.log(np.where(present, table, 1.0))
    counts = present.sum(axis=1)
    levels = np.where(present, logs, 0.0).sum(axis=1) / counts
    dev = np.where(present, logs - levels[:, None], 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        within = np.where(counts > 1, (dev * dev).sum(axis=1) / (counts - 1) / counts, 0.0)
    return levels, within


def find_change_points(
    runs: Sequence[Any],
    *,
    alpha: float = ALPHA,
    min_size: int = MIN_SIZE,
    permutations: int = PERMUTATIONS,
    seed: int = 0,
) -> list[ChangePoint]:
    """Every change of level in ``runs`` (oldest first), in index order. See the module docstring."""
    if min_size < 2:
        raise ValueError("min_size must be at least 2")
    if len(runs) < 2 * min_size:
        return []
    x, within = run_levels(runs)
    return level_changes(x, within, alpha=alpha, min_size=min_size, permutations=permutations, seed=seed)


def level_changes(
    x: np.ndarray,
    within: np.ndarray,
    *,
    alpha: float = ALPHA,
    min_size: int = MIN_SIZE,
    permutations: int = PERMUTATIONS,
    seed: int = 0,
) -> list[ChangePoint]:
    """``find_change_points`` on run levels already computed (``run_levels`` or ``median_levels``)."""
    if len(x) < 2 * min_size:
        return []
    floor = float(within.mean())  # the variance of one run's estimate if runs did not differ
    rng = np.random.default_rng(seed)
    found: dict[int, float] = {}
    stack = [(0, len(x))]
    while stack:
        a, b = stack.pop()
        if b - a < 2 * min_size:
            continue
        split, p = _test_segment(x[a:b], floor, min_size, _Budget(alpha, permutations), rng)
        if split is None or p > alpha:
            continue
        found[a + split] = p
        stack += [(a, a + split), (a + split, b)]
    edges = [0, *sorted(found), len(x)]
    out = []
    for k in range(1, len(edges) - 1):
        left, right = x[edges[k - 1] : edges[k]], x[edges[k] : edges[k + 1]]
        out.append(_measure(edges[k], left, right, floor, found[edges[k]]))
    return out


@dataclass(frozen=True)
class _Budget:
    alpha: float
    permutations: int


def _groups(run: Any) -> list[np.ndarray]:
    if len(run) == 0:
        return []
    first = run[0]
    groups = run if isinstance(first, Sequence | np.ndarray) else [run]
    return [np.asarray(g, dtype=float) for g in groups if len(g)]


def _splits(n: int, min_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Plain splits as (i, j) pairs: the part x[i:n] against x[:i]."""
    ks = np.arange(min_size, n - min_size + 1)
    return ks, np.full(len(ks), n)


def _bumps(n: int, min_size: int) -> tuple[np.ndarray, np.ndarray]:
    """A change and a change back: (i, j) with 0 < i < j < n, the middle x[i:j] and the rest each at least
    ``min_size`` runs."""
    i, j = np.triu_indices(n + 1, k=min_size)
    keep = (i > 0) & (j < n) & (n - (j - i) >= min_size)
    return i[keep], j[keep]


def _scan(xs: np.ndarray, floor: float, pairs: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """For each row of ``xs`` (one segment, or its shuffles): the largest pooled two-sample t between a
    middle part and the rest over ``pairs``, and the index of that pair. The variance is the larger of the
    residuals around the two means and the within-run ``floor`` (a part that happens to look quiet cannot
    fake a large t)."""
    n = xs.shape[1]
    i, j = pairs
    zero = np.zeros((len(xs), 1))
    c1 = np.concatenate([zero, np.cumsum(xs, axis=1)], axis=1)
    c2 = np.concatenate([zero, np.cumsum(xs * xs, axis=1)], axis=1)
    s1, s2 = c1[:, j] - c1[:, i], c2[:, j] - c2[:, i]
    t1, t2 = c1[:, -1:] - s1, c2[:, -1:] - s2
    nin = (j - i).astype(float)
    nout = n - nin
    mi, mo = s1 / nin, t1 / nout
    ssw = (s2 - nin * mi * mi) + (t2 - nout * mo * mo)
    var = np.maximum(np.maximum(ssw, 0.0) / (n - 2), floor)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.abs(mi - mo) / np.sqrt(var * (1 / nin + 1 / nout))
    t = np.where(np.isfinite(t), t, 0.0)  # a constant segment: no evidence of anything
    best = np.argmax(t, axis=1)
    return t[np.arange(len(t)), best], best


def _test_segment(
    x: np.ndarray, floor: float, min_size: int, budget: _Budget, rng: np.random.Generator
) -> tuple[int | None, float]:
    """Where the segment would split, and the p-value of that split: first the plain splits at ``alpha``;
    when none is significant and the segment is short enough, a change and a change back at ``alpha / 4``
    (so a history with no change is wrongly split at most 1.25 ``alpha`` of the time)."""
    x = x - x.mean()  # the statistics do not change; the sums stay small
    n = len(x)
    split, p = _test_pairs(x, floor, _splits(n, min_size), alpha=budget.alpha, budget=budget, rng=rng)
    if p <= budget.alpha or n > _TWO_CHANGES_MAX:
        return split, p
    bumps = _bumps(n, min_size)
    if len(bumps[0]) == 0:
        return split, p
    at, q = _test_pairs(x, floor, bumps, alpha=budget.alpha / 4, budget=budget, rng=rng)
    return (at, q) if q <= budget.alpha / 4 else (split, p)


def _test_pairs(
    x: np.ndarray,
    floor: float,
    pairs: tuple[np.ndarray, np.ndarray],
    *,
    alpha: float,
    budget: _Budget,
    rng: np.random.Generator,
) -> tuple[int | None, float]:
    """The permutation p-value of the largest t over ``pairs``, and where to split (the middle part's
    start; a plain split's only change). The shuffles stop early once the answer cannot change: clearly
    above alpha (Besag-Clifford), or no shuffle at all reaching the observed statistic after enough of them
    to put the p-value below alpha. A change so clear that a Bonferroni bound over every pair is far below
    alpha needs no shuffle: a long history with one clear step costs one scan, not a thousand."""
    observed, best = _scan(x[None, :], floor, pairs)
    if observed[0] == 0.0:
        return None, 1.0
    split = int(pairs[0][best[0]])
    bonferroni = min(1.0, 2 * float(sps.t.sf(observed[0], len(x) - 2)) * len(pairs[0]))
    if bonferroni < alpha / 10:
        return split, bonferroni
    enough = math.ceil(2 / alpha)  # with none beaten, p = 1/(enough+1) < alpha / 2
    beaten, done, batch = 0, 0, 32
    cap = max(16, _MAX_CELLS // len(pairs[0]))  # shuffles per batch: bounded memory
    while done < budget.permutations:
        size = min(batch, budget.permutations - done, cap)
        shuffled = rng.permuted(np.broadcast_to(x, (size, len(x))), axis=1)
        stats_, _ = _scan(shuffled, floor, pairs)
        beaten += int(np.sum(stats_ >= observed[0] - 1e-12))
        done += size
        if beaten >= _EARLY_STOP and (beaten + 1) / (done + 1) > alpha:
            break
        if beaten == 0 and done >= enough:
            break
        batch = min(batch * 2, 512)
    return split, (beaten + 1) / (done + 1)


def _measure(index: int, left: np.ndarray, right: np.ndarray, floor: float, p: float) -> ChangePoint:
    d = float(right.mean() - left.mean())
    vl = max(float(left.var(ddof=1)) if len(left) > 1 else 0.0, floor) / len(left)
    vr = max(float(right.var(ddof=1)) if len(right) > 1 else 0.0, floor) / len(right)
    se = math.sqrt(vl + vr)
    if se > 0:
        denom = (vl**2 / max(len(left) - 1, 1)) + (vr**2 / max(len(right) - 1, 1))
        df = (vl + vr) ** 2 / denom if denom > 0 else len(left) + len(right) - 2
        half = float(sps.t.ppf(0.975, df)) * se
    else:
        half = 0.0
    return ChangePoint(
        index=index,
        change=math.expm1(d),
        ci=(math.expm1(d - half), math.expm1(d + half)),
        p_value=p,
        before=math.exp(float(left.mean())),
        after=math.exp(float(right.mean())),
    )
