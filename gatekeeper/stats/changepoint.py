"""Change points in a metric's history: where did its level move, by how much, and how sure is that.

``find_change_points(runs)`` takes the per-process sample groups of each run, oldest first, and
returns every change with the index of the first run after it, the relative change of the level
with a 95% interval, a p-value, and the runs the change may lie between. Pure: no I/O, no clock, no
randomness that is not seeded; the same history always gives the same answer.

How (a likelihood-ratio scan with binary segmentation):

* **Each run** is reduced to the mean of the logs of its per-process medians (the process is the unit, as
  in ``gatekeeper.stats.compare``). How far that mean scatters if the runs do not differ from each other
  beyond their processes is known from the processes themselves: the spread of the process medians
  within each run, pooled over every run of the history (10 processes x 30 runs: 270 degrees of
  freedom, an almost exactly known variance). That is what other tools do not have: they see one median
  per run and must learn the noise from the scatter of the runs, 28 degrees of freedom in 30 runs.
* **Runs may differ from night to night beyond their processes** (another node, clocks, a noisy
  neighbour: a run-level effect). The scatter of consecutive runs (half the mean squared successive
  difference, which a step barely moves) is compared with the within-run variance by an F test at
  ``EXTRA_LEVEL``; when it is larger, it is the run variance, with its own (fewer) degrees of freedom, and
  the scan's tail is averaged over that estimate's uncertainty. An outlier run lands there too.
* **The scan**: for every split k of a segment, Z_k = the standardized difference between the mean level
  after and before k (weighted by each run's variance): the likelihood-ratio statistic for one change of
  the mean. The largest |Z_k| is judged against its distribution when nothing changed
  (``gatekeeper.stats.changepoint_null``: Siegmund's approximation for the maximum over all splits,
  simulated for short segments). When no plain split is significant, the largest standardized difference
  between a middle part and the rest (a change and a change back: a regression that was later fixed,
  which a plain split cannot see, each side averaging it away) is judged at a quarter of the level, in
  segments of at most 150 runs.
* **Binary segmentation**: a significant split is kept and both parts are searched again, each at the
  level times its share of the runs (so every depth of the search spends at most ``alpha`` in all: a
  history with one real change gets about ``alpha`` false ones on top, not twice that).
* **Location by maximum likelihood**: each change is finally moved to the split that maximises the
  likelihood between its neighbouring changes, and reported with the runs it may lie between (``span``:
  the smallest set of splits holding 90% of the likelihood, flat over the splits).
* **Size**: the ratio of the levels between the neighbouring changes, with a Welch interval whose
  variance is never below the run variance above (a quiet stretch cannot narrow it).

What these choices cost, measured (``benchmarks/changepoint_ablation.py``, benchmarks/README.md "Where the
rest goes"): against a scan that knows the run variance exactly, learning it gives away about 0.012 of the
recall of a 1% step on issue 24's benchmark, at the same rate of false changes; each part that could buy
some of it back costs more elsewhere. Trusting the within-run variance alone doubles the false changes
when runs differ by about their own spread; dropping the change-and-change-back scan loses most fixed
regressions; placing a change where three runs hold the most likelihood names its very run far less often;
a larger ``ALPHA`` nearly doubles the false changes for less than 0.03. ``tests/stats/test_changepoint_power.py``
holds those lines.

Why not a library: Apache Otava's ``compute_change_points`` (E-Divisive, the "Hunter" algorithm) and
MongoDB's signal-processing-algorithms judge one scalar per run and give no interval for the change;
ruptures segments without any significance test, so it cannot say whether a change is noise. The
within-run variance above is what lets this find a 1-2% step that they miss;
``benchmarks/changepoints.py`` runs Otava beside this on the same series.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import special  # not scipy.stats: its import alone takes seconds, `history changes` pays it

from gatekeeper.stats.changepoint_null import bump_p, bump_pairs, split_p

__all__ = [
    "ChangePoint",
    "find_change_points",
    "level_changes",
    "median_levels",
    "median_table",
    "ragged_table",
    "run_levels",
]

MIN_SIZE = 3  # runs on each side of a change: fewer cannot tell a step from one odd run
ALPHA = 0.01  # the level of the first test: on a history with no change, the chance of a false change
EXTRA_LEVEL = 0.05  # the F test that decides whether runs differ beyond their processes
SPAN_MASS = 0.90  # the likelihood held by a change's span
_TWO_CHANGES_MAX = 150  # longer segments are scanned for one split only (the pairs grow with the square)
_REFINE_ROUNDS = 10


@dataclass(frozen=True)
class ChangePoint:
    index: int  # the first run after the change (runs[index] is the first at the new level)
    change: float  # relative change of the level: after / before - 1
    ci: tuple[float, float]  # 95% interval of ``change``
    p_value: float  # of the scan that found the change, in the segment where it was found
    before: float  # the level (geometric mean of the per-run estimates) between the previous change and this
    after: float  # ... between this change and the next
    span: tuple[int, int] | None = None  # first and last index the change may lie at (90% of the likelihood)

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "change": self.change,
            "ci": list(self.ci),
            "p_value": self.p_value,
            "before": self.before,
            "after": self.after,
            "span": list(self.span) if self.span else [self.index, self.index],
        }


def run_levels(runs: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    """Per run: the mean log of its process medians, and that mean's variance from within the run (0 when
    the run has one process). A run is a list of per-process sample lists; a flat list is one process."""
    levels, within, _ = _run_table(runs)
    return levels, within


def median_levels(medians: Sequence[Sequence[float]]) -> tuple[np.ndarray, np.ndarray]:
    """``run_levels`` from the per-process medians of each run (what a history store keeps), vectorised."""
    levels, within, _ = median_table(medians)
    return levels, within


def median_table(medians: Sequence[Sequence[float]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``median_levels`` and the number of processes of each run."""
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
    return _table_levels(table, present)


def ragged_table(values: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``median_table`` from every run's per-process medians laid end to end, ``counts[i]`` of them for run i
    (each at least 1): no Python loop over the runs."""
    values = np.asarray(values, dtype=float)
    counts = np.asarray(counts, dtype=np.intp)
    if len(counts) and counts.min() < 1:
        raise ValueError(f"run {int(np.argmin(counts))} has no samples")
    bad = ~(np.isfinite(values) & (values > 0))
    if bad.any():
        run = int(np.searchsorted(np.cumsum(counts), int(np.argmax(bad)), side="right"))
        raise ValueError(f"run {run}: samples must be positive and finite (times, rates, sizes)")
    if not len(counts):
        return np.zeros(0), np.zeros(0), counts
    logs = np.log(values)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    levels = np.add.reduceat(logs, starts) / counts
    dev = logs - np.repeat(levels, counts)
    with np.errstate(divide="ignore", invalid="ignore"):
        within = np.where(counts > 1, np.add.reduceat(dev * dev, starts) / (counts - 1) / counts, 0.0)
    return levels, within, counts


def _table_levels(table: np.ndarray, present: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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
    return levels, within, counts


def _run_table(runs: Sequence[Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    medians = []
    for i, run in enumerate(runs):
        groups = _groups(run)
        if not groups:
            raise ValueError(f"run {i} has no samples")
        medians.append([float(np.median(g)) for g in groups])
    return median_table(medians)


def find_change_points(runs: Sequence[Any], *, alpha: float = ALPHA, min_size: int = MIN_SIZE) -> list[ChangePoint]:
    """Every change of level in ``runs`` (oldest first), in index order. See the module docstring."""
    if min_size < 2:
        raise ValueError("min_size must be at least 2")
    if len(runs) < 2 * min_size:
        return []
    x, within, counts = _run_table(runs)
    return level_changes(x, within, counts=counts, alpha=alpha, min_size=min_size)


@dataclass(frozen=True)
class Noise:
    """How much one run's level scatters when nothing changed, and how well that is known."""

    variance: np.ndarray  # per run: the larger of its within-run variance and the scatter of the runs
    dfs: tuple[float, ...]  # the estimates whose larger one that is, by their degrees of freedom
    extra: bool  # the runs differ beyond their processes (judged by the scatter of the runs alone)


def run_noise(x: np.ndarray, within: np.ndarray, counts: np.ndarray | None = None) -> Noise:
    """The run variance of a history: the larger of the pooled within-run variance and the scatter of
    consecutive runs. When that scatter is not significantly larger (an F test at ``EXTRA_LEVEL``), the runs
    are taken to differ only by their processes, and the scans are judged knowing that the variance is the
    larger of two estimates of the same thing; when it is, by the scatter's own degrees of freedom."""
    n = len(x)
    if counts is None:  # unknown process counts: each run's within-run variance counts as one degree of freedom
        counts = np.where(within > 0, 2, 1)
    counts = np.asarray(counts, dtype=float)
    dof = np.maximum(counts - 1, 0)
    df_within = float(dof.sum())
    if df_within > 0:
        pooled = float(np.sum(dof * counts * within) / df_within)  # the variance of one process's log median
        own = pooled / counts
    else:
        pooled, own = 0.0, np.zeros(n)
    diffs = np.diff(x)
    between = float(np.sum(diffs * diffs) / (2 * (n - 1))) if n > 1 else 0.0
    df_between = 2 * (n - 1) ** 2 / (3 * n - 4) if n > 1 else 1.0  # von Neumann's mean squared successive difference
    mean_own = float(own.mean())
    variance = own + max(between - mean_own, 0.0)
    if mean_own > 0 and between <= mean_own * float(special.fdtri(df_between, df_within, 1 - EXTRA_LEVEL)):
        return Noise(variance, (df_within, df_between), extra=False)
    return Noise(variance, (df_between,), extra=True)


def level_changes(
    x: np.ndarray,
    within: np.ndarray,
    *,
    counts: np.ndarray | None = None,
    alpha: float = ALPHA,
    min_size: int = MIN_SIZE,
) -> list[ChangePoint]:
    """``find_change_points`` on run levels already computed (``run_levels`` or ``median_table``);
    ``counts``: the processes of each run, which weigh each run's within-run variance in the pooled one."""
    x = np.asarray(x, dtype=float)
    if len(x) < 2 * min_size:
        return []
    noise = run_noise(x, np.asarray(within, dtype=float), counts)
    if not np.all(noise.variance > 0):
        return []  # every run at the same level, no spread anywhere: nothing can be judged
    found: dict[int, float] = {}
    stack = [(0, len(x), alpha)]
    while stack:
        a, b, level = stack.pop()
        if b - a < 2 * min_size:
            continue
        edges, p = _test_segment(x[a:b], noise.variance[a:b], noise.dfs, min_size, level)
        if not edges:
            continue
        cuts = [a, *(a + e for e in edges), b]
        for e in edges:
            found[a + e] = p
        stack += [(lo, hi, level * (hi - lo) / (b - a)) for lo, hi in itertools.pairwise(cuts)]
    where = _refine(x, noise.variance, sorted(found), min_size)
    p_of = dict(zip(where, (found[k] for k in sorted(found)), strict=True))
    edges = [0, *where, len(x)]
    out = []
    for k in range(1, len(edges) - 1):
        lo, at, hi = edges[k - 1], edges[k], edges[k + 1]
        span = _span(x[lo:hi], noise.variance[lo:hi], min_size)
        floors = (float(noise.variance[lo:at].mean()), float(noise.variance[at:hi].mean()))
        out.append(_measure(at, x[lo:at], x[at:hi], floors=floors, p=p_of[at], span=(lo + span[0], lo + span[1])))
    return out


def _groups(run: Any) -> list[np.ndarray]:
    if len(run) == 0:
        return []
    first = run[0]
    groups = run if isinstance(first, Sequence | np.ndarray) else [run]
    return [np.asarray(g, dtype=float) for g in groups if len(g)]


def split_scan(x: np.ndarray, v: np.ndarray, min_size: int) -> tuple[np.ndarray, np.ndarray]:
    """The splits k = min_size .. n - min_size and Z_k: the standardized difference between the weighted
    mean of x[k:] and of x[:k], each run weighted by 1 / its variance ``v``."""
    n = len(x)
    w = 1 / v
    cw, cwx = np.cumsum(w), np.cumsum(w * x)
    k = np.arange(min_size, n - min_size + 1)
    left_w, left = cw[k - 1], cwx[k - 1]
    right_w, right = cw[-1] - left_w, cwx[-1] - left
    z = (right / right_w - left / left_w) / np.sqrt(1 / left_w + 1 / right_w)
    return k, z


def _bump_scan(x: np.ndarray, v: np.ndarray, min_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = len(x)
    i, j = bump_pairs(n, min_size)
    w = 1 / v
    cw = np.concatenate([[0.0], np.cumsum(w)])
    cwx = np.concatenate([[0.0], np.cumsum(w * x)])
    in_w, inside = cw[j] - cw[i], cwx[j] - cwx[i]
    out_w, outside = cw[-1] - in_w, cwx[-1] - inside
    z = (inside / in_w - outside / out_w) / np.sqrt(1 / in_w + 1 / out_w)
    return i, j, z


def _test_segment(
    x: np.ndarray, v: np.ndarray, dfs: tuple[float, ...], min_size: int, level: float
) -> tuple[list[int], float]:
    """The change(s) a segment splits at, and their p-value; none when nothing is significant. First one
    plain split at ``level``; then, in a segment short enough, a change and a change back at ``level / 4``
    (so a history with no change is wrongly split at most 1.25 ``level`` of the time)."""
    n = len(x)
    k, z = split_scan(x, v, min_size)
    best = int(np.argmax(np.abs(z)))
    p = split_p(float(abs(z[best])), n, min_size, dfs)
    if p <= level:
        return [int(k[best])], p
    if n > _TWO_CHANGES_MAX:
        return [], p
    i, j, zb = _bump_scan(x, v, min_size)
    if len(i) == 0:
        return [], p
    top = int(np.argmax(np.abs(zb)))
    q = bump_p(float(abs(zb[top])), n, min_size, dfs)
    if q <= level / 4:
        return [int(i[top]), int(j[top])], q
    return [], p


def _refine(x: np.ndarray, v: np.ndarray, where: list[int], min_size: int) -> list[int]:
    """Each change moved to its maximum-likelihood split between its neighbouring changes, until none moves."""
    where = list(where)
    for _ in range(_REFINE_ROUNDS):
        moved = False
        for idx in range(len(where)):
            lo = where[idx - 1] if idx else 0
            hi = where[idx + 1] if idx + 1 < len(where) else len(x)
            k, z = split_scan(x[lo:hi], v[lo:hi], min_size)  # changes lie at least min_size runs apart
            best = lo + int(k[int(np.argmax(np.abs(z)))])
            if best != where[idx]:
                where[idx], moved = best, True
        if not moved:
            break
    return where


def _span(x: np.ndarray, v: np.ndarray, min_size: int) -> tuple[int, int]:
    """The first and last split of the smallest set holding ``SPAN_MASS`` of the likelihood between the
    neighbouring changes (the profile likelihood of a split is exp(Z_k^2 / 2), flat over the splits)."""
    k, z = split_scan(x, v, min_size)
    loglik = z * z / 2
    weight = np.exp(loglik - loglik.max())
    order = np.argsort(-weight, kind="stable")
    mass = np.cumsum(weight[order]) / weight.sum()
    keep = order[: int(np.searchsorted(mass, SPAN_MASS)) + 1]
    return int(k[keep].min()), int(k[keep].max())


def _measure(
    index: int, left: np.ndarray, right: np.ndarray, *, floors: tuple[float, float], p: float, span: tuple[int, int]
) -> ChangePoint:
    d = float(right.mean() - left.mean())
    floor_l, floor_r = floors
    vl = max(float(left.var(ddof=1)) if len(left) > 1 else 0.0, floor_l) / len(left)
    vr = max(float(right.var(ddof=1)) if len(right) > 1 else 0.0, floor_r) / len(right)
    se = math.sqrt(vl + vr)
    if se > 0:
        denom = (vl**2 / max(len(left) - 1, 1)) + (vr**2 / max(len(right) - 1, 1))
        df = (vl + vr) ** 2 / denom if denom > 0 else len(left) + len(right) - 2
        half = float(special.stdtrit(df, 0.975)) * se
    else:
        half = 0.0
    return ChangePoint(
        index=index,
        change=math.expm1(d),
        ci=(math.expm1(d - half), math.expm1(d + half)),
        p_value=p,
        before=math.exp(float(left.mean())),
        after=math.exp(float(right.mean())),
        span=span,
    )
