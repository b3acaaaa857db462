"""Did a metric's level move between two runs, either way, and by how much: a two-sided judge for questions
that have no "worse" side, such as "did this commit range move the metric on this platform at all"
(``gatekeeper.history.platforms``).

Each run is summarised as the change-point code summarises it (``gatekeeper.stats.changepoint``): the mean
of the logs of its per-process medians, the variance of that mean (the spread of the process medians over
their count) and the number of processes. The process is the unit, as in ``gatekeeper.stats.compare``.

``compare_runs`` there is one-sided (it asks whether the candidate is *worse*, and its "equivalent" means
"not worse by the margin"); here "equivalent" needs the 95% interval inside the margin on both sides, so a
metric that moved a lot in the good direction is never called unchanged. Welch's test on the two means,
written out from the three numbers per run: ``scipy.stats.ttest_ind_from_stats`` gives the p-value but
neither the interval nor the degrees of freedom it needs, and the test below holds the two to each other.

``pooled_shift`` judges several runs a side (the runs of one level before and after the move). Runs of one
series may differ by more than their processes (another node, clocks, a noisy neighbour: a run-level term),
so the run is the unit: each side's level is the mean of its runs' levels, every run weighing the same, and
the variance of a run's level is the larger of two estimates of it:

* from the processes: the within-run variance of one process median, pooled over every run of both sides
  (10 processes x 6 runs: 54 degrees of freedom), over the run's processes;
* from the runs: their scatter about their side's mean, pooled over both sides (k_before + k_after - 2
  degrees of freedom).

An F test of the second against the first (at ``POOL_LEVEL``, as ``gatekeeper.stats.changepoint.run_noise``
tests a history's runs) decides the degrees of freedom: not significantly larger, the runs differ by their
processes only and the processes of every run count; significantly larger, it is Student's t on the run
means with the runs' own k_before + k_after - 2.

Why not Welch on the run means alone: with 3 runs a side it has about 4 degrees of freedom (a t quantile of
2.8 instead of 2.0) and a variance known to a factor of two, so at 3% process noise it could rarely show "no
move" within 2% even where the runs differ by their processes only, which the F test sees. Why not pool
every process of every run as one sample: a run-level term then counts once per process, and a 1%
night-to-night scatter reads as a move. One run a side is ``level_shift`` itself, unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from scipy.special import fdtri, stdtr, stdtrit  # not scipy.stats: history changes reaches here, 1.6 s to import

__all__ = ["POOL_LEVEL", "Shift", "level_shift", "pooled_shift", "shift_difference"]

Direction = Literal["up", "down", "equivalent", "inconclusive"]
Unit = Literal["process", "run"]
Run = tuple[float, float, int]  # mean log of the process medians, variance of that mean, processes
# The pre-test of runs differing beyond their processes. Liberal on purpose: a run-level term it misses is
# judged with the processes' degrees of freedom. At the change scan's 5% a 1% night-to-night scatter (runs
# of 10 processes at 3% noise) slipped through often enough to call 0.9% of 5% code moves a platform's; at
# 25%, 0.4%, for a few points of power where runs differ by their processes only (benchmarks/README.md,
# "Code or platform").
POOL_LEVEL = 0.25


@dataclass(frozen=True)
class Shift:
    """``after / before`` of the levels (geometric means of the process medians), with its 95% interval
    and the two-sided p-value; ``direction``: up or down (significant at ``alpha`` and beyond the margin),
    equivalent (the interval inside the margin both ways), else inconclusive, with ``reason``."""

    direction: Direction
    ratio: float
    ci: tuple[float, float]
    p_value: float
    reason: str
    se: float = math.inf  # of the log of ``ratio`` (inf: not judged)
    df: float = 0.0  # Welch's degrees of freedom (inf: exact)
    runs: tuple[int, int] = (1, 1)  # runs pooled before and after
    unit: Unit = "process"  # what the variance counted: processes, or runs (they differ beyond their processes)

    @property
    def change(self) -> float:
        return self.ratio - 1.0


def shift_difference(a: Shift, b: Shift) -> float:
    """The two-sided p-value that ``a`` and ``b`` moved by the same ratio (their log changes differ by chance):
    Welch's test on the difference of two independent changes, with the smaller of their degrees of
    freedom (conservative). 1.0 when either was not judged."""
    if not (math.isfinite(a.se) and math.isfinite(b.se)):
        return 1.0
    d = math.log(a.ratio) - math.log(b.ratio)
    se = math.sqrt(a.se**2 + b.se**2)
    if se == 0.0:
        return 0.0 if d else 1.0
    return float(2 * stdtr(min(a.df, b.df), -abs(d) / se))


def level_shift(
    before: tuple[float, float, int],
    after: tuple[float, float, int],
    *,
    alpha: float = 0.01,
    min_effect: float = 0.02,
) -> Shift:
    """Judge ``after`` against ``before``, each (mean log, variance of that mean, processes)."""
    (lb, vb, nb), (la, va, na) = before, after
    _check((lb, vb, la, va), (vb, va))
    d = la - lb
    if nb < 2 or na < 2:
        ratio = math.exp(d)
        return Shift("inconclusive", ratio, (ratio, ratio), 1.0, "fewer than 2 processes on a side: no spread to judge")
    var = vb + va
    df = var**2 / (vb**2 / (nb - 1) + va**2 / (na - 1)) if var > 0 else math.inf
    return _judge(d, var, df, alpha, min_effect)


def pooled_shift(
    before: Sequence[Run],
    after: Sequence[Run],
    *,
    alpha: float = 0.01,
    min_effect: float = 0.02,
) -> Shift:
    """Judge the runs ``after`` against the runs ``before`` (each run as ``level_shift`` takes it), every run
    of a side at one level: see the module docstring. One run a side is ``level_shift``."""
    if not before or not after:
        raise ValueError("a side has no run")
    if len(before) == 1 and len(after) == 1:
        return level_shift(before[0], after[0], alpha=alpha, min_effect=min_effect)
    runs = (len(before), len(after))
    every = [*before, *after]
    _check([x for r in every for x in r[:2]], [r[1] for r in every])
    means = [math.fsum(r[0] for r in side) / len(side) for side in (before, after)]
    d = means[1] - means[0]
    scatter = math.fsum((r[0] - m) ** 2 for side, m in zip((before, after), means, strict=True) for r in side)
    df_runs = len(every) - 2
    between = scatter / df_runs  # the variance of one run's level, from the runs
    df_within = sum(r[2] - 1 for r in every if r[2] > 1)
    # the variance of one process median (the runs' variances of their means times their processes), pooled
    process = math.fsum((r[2] - 1) * r[2] * r[1] for r in every if r[2] > 1) / df_within if df_within else 0.0
    own = [process / r[2] for r in every]  # each run's variance from its processes alone
    mean_own = math.fsum(own) / len(own)
    if mean_own > 0 and between <= mean_own * float(fdtri(df_runs, df_within, 1 - POOL_LEVEL)):
        extra = max(between - mean_own, 0.0)  # what the scatter shows beyond the processes (mostly 0)
        var = sum(math.fsum(o + extra for o in own[i : i + k]) / k**2 for i, k in ((0, runs[0]), (runs[0], runs[1])))
        shift = _judge(d, var, float(df_within), alpha, min_effect)
        unit: Unit = "process"
    else:
        shift = _judge(d, between * (1 / runs[0] + 1 / runs[1]), float(df_runs), alpha, min_effect)
        unit = "run"
    return Shift(shift.direction, shift.ratio, shift.ci, shift.p_value, shift.reason, shift.se, shift.df, runs, unit)


def _check(values: Sequence[float], variances: Sequence[float]) -> None:
    if not all(math.isfinite(x) for x in values) or any(v < 0 for v in variances):
        raise ValueError("levels and variances must be finite, variances not negative")


def _judge(d: float, var: float, df: float, alpha: float, min_effect: float) -> Shift:
    """A change ``d`` of the mean log with variance ``var`` and ``df`` degrees of freedom: two-sided."""
    ratio = math.exp(d)
    margin = math.log1p(min_effect)
    se = math.sqrt(var)
    if se == 0.0:  # every process gave the same median on both sides: exact
        direction: Direction = "equivalent" if abs(d) <= margin else "up" if d > 0 else "down"
        p0 = 0.0 if d else 1.0
        return Shift(
            direction, ratio, (ratio, ratio), p0, _reason(direction, (ratio, ratio), min_effect), 0.0, math.inf
        )
    t = d / se
    p = float(2 * stdtr(df, -abs(t)))
    half = float(stdtrit(df, 0.975)) * se
    ci = (math.exp(d - half), math.exp(d + half))
    if p < alpha and abs(d) > margin:
        direction = "up" if d > 0 else "down"
    elif -margin < d - half and d + half < margin:
        direction = "equivalent"
    else:
        direction = "inconclusive"
    return Shift(direction, ratio, ci, p, _reason(direction, ci, min_effect), se, df)


def _reason(direction: Direction, ci: tuple[float, float], min_effect: float) -> str:
    if direction in ("up", "down"):
        return f"moved {direction}, significantly and by more than {min_effect:.0%}"
    if direction == "equivalent":
        return f"the 95% interval excludes a move of {min_effect:.0%} either way"
    return f"the 95% interval {ci[0] - 1:+.1%}..{ci[1] - 1:+.1%} is too wide to tell a {min_effect:.0%} move from none"
