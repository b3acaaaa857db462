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
* A segment is split where a two-sample t statistic between its left and right part is largest. The
  variance in that statistic is the larger of the runs' own scatter around the two part means and the
  within-run variance: a short part that happens to look quiet cannot fake a large t, and a history
  whose runs genuinely differ from night to night (a run-level effect) is judged by that scatter.
* The split counts when the largest t is rare among the largest t's of the same segment with its runs
  shuffled (a permutation test: exact under "nothing changed", whatever the noise looks like; stopped
  early once the p-value is clearly above ``alpha``). Both parts are then searched again.
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
_EARLY_STOP = 20  # Besag-Clifford: stop once this many shuffles beat the observed statistic
_MAX_CELLS = 2_000_000  # shuffled values held at once


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
    width = max((len(m) for m in medians), default=0)
    table = np.full((len(medians), max(width, 1)), np.nan)
    for i, m in enumerate(medians):
        if len(m) == 0:
            raise ValueError(f"run {i} has no samples")
        table[i, : len(m)] = m
    present = ~np.isnan(table)
    if np.any(table[present] <= 0) or not np.all(np.isfinite(table[present])):
        bad = int(np.argmax(np.any(present & ~(table > 0), axis=1) | np.any(present & ~np.isfinite(table), axis=1)))
        raise ValueError(f"run {bad}: samples must be positive and finite (times, rates, sizes)")
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


def _max_t(xs: np.ndarray, floor: float, min_size: int) -> tuple[np.ndarray, np.ndarray]:
    """For each row of ``xs`` (one segment, or its shuffles): max |t| over the splits, and where it is."""
    n = xs.shape[1]
    ks = np.arange(min_size, n - min_size + 1)  # left part x[:k]
    c1 = np.cumsum(xs, axis=1)
    c2 = np.cumsum(xs * xs, axis=1)
    total1, total2 = c1[:, -1:], c2[:, -1:]
    s1l, s2l = c1[:, ks - 1], c2[:, ks - 1]
    nl, nr = ks.astype(float), (n - ks).astype(float)
    ml, mr = s1l / nl, (total1 - s1l) / nr
    ssw = (s2l - nl * ml * ml) + ((total2 - s2l) - nr * mr * mr)
    var = np.maximum(np.maximum(ssw, 0.0) / (n - 2), floor)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.abs(mr - ml) / np.sqrt(var * (1 / nl + 1 / nr))
    t = np.where(np.isfinite(t), t, 0.0)  # a constant segment: no evidence of anything
    best = np.argmax(t, axis=1)
    return t[np.arange(len(t)), best], ks[best]


def _test_segment(
    x: np.ndarray, floor: float, min_size: int, budget: _Budget, rng: np.random.Generator
) -> tuple[int | None, float]:
    """Where the segment would split, and the permutation p-value of that split. The shuffles stop early
    once the answer cannot change: clearly above alpha (Besag-Clifford), or no shuffle at all reaching the
    observed statistic after enough of them to put the p-value below alpha."""
    observed, where = _max_t(x[None, :], floor, min_size)
    if observed[0] == 0.0:
        return None, 1.0
    enough = math.ceil(2 / budget.alpha)  # with none beaten, p = 1/(enough+1) < alpha / 2
    beaten, done, batch = 0, 0, 64
    cap = max(64, _MAX_CELLS // len(x))  # shuffles per batch: bounded memory on a long history
    while done < budget.permutations:
        size = min(batch, budget.permutations - done, cap)
        shuffled = rng.permuted(np.broadcast_to(x, (size, len(x))), axis=1)
        stats_, _ = _max_t(shuffled, floor, min_size)
        beaten += int(np.sum(stats_ >= observed[0] - 1e-12))
        done += size
        if beaten >= _EARLY_STOP and (beaten + 1) / (done + 1) > budget.alpha:
            break
        if beaten == 0 and done >= enough:
            break
        batch = min(batch * 2, 512)
    return int(where[0]), (beaten + 1) / (done + 1)


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
