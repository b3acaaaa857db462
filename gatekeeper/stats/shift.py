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
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from scipy.special import stdtr, stdtrit  # not scipy.stats: history changes reaches here, 1.6 s to import

__all__ = ["Shift", "level_shift", "shift_difference"]

Direction = Literal["up", "down", "equivalent", "inconclusive"]


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
    if not all(math.isfinite(x) for x in (lb, vb, la, va)) or vb < 0 or va < 0:
        raise ValueError("levels and variances must be finite, variances not negative")
    d = la - lb
    ratio = math.exp(d)
    margin = math.log1p(min_effect)
    if nb < 2 or na < 2:
        return Shift("inconclusive", ratio, (ratio, ratio), 1.0, "fewer than 2 processes on a side: no spread to judge")
    se = math.sqrt(vb + va)
    if se == 0.0:  # every process gave the same median on both sides: exact
        direction: Direction = "equivalent" if abs(d) <= margin else "up" if d > 0 else "down"
        p0 = 0.0 if d else 1.0
        return Shift(
            direction, ratio, (ratio, ratio), p0, _reason(direction, (ratio, ratio), min_effect), 0.0, math.inf
        )
    df = (vb + va) ** 2 / (vb**2 / (nb - 1) + va**2 / (na - 1))
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
