"""Group-sequential boundaries by alpha spending (Lan and DeMets): the z values that a sequence of looks at
increasing information fractions may cross so that, under "no change", the chance of crossing any of the
first k is exactly the level spent by look k. The sequential rule (``gatekeeper.stats.sequential``) uses the
power family ``level * t**RHO``; ``spending_boundaries`` takes any non-decreasing spending.

The crossing probabilities are integrated numerically over the paths that crossed no earlier boundary
(Armitage, McPherson and Rowe's recursion, Simpson's rule on a z grid).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np
from scipy import optimize
from scipy.special import ndtr, ndtri

__all__ = ["RHO", "boundaries", "spending_boundaries"]

RHO = 1.0  # spending exponent: level * t**RHO (1: spends evenly, so clear cases stop at the first looks)

_LOW, _HIGH, _STEP = -8.0, 8.0, 0.05  # integration grid on the z scale (Simpson's rule)


def boundaries(fractions: Sequence[float], level: float, rho: float = RHO) -> tuple[float, ...]:
    """One-sided upper boundaries (z scale) at information ``fractions`` (increasing, in (0, 1]) that spend
    ``level * t**rho`` in all: P(Z_j >= c_j for some j <= k) = level * t_k**rho under "no change"."""
    ts = tuple(round(min(1.0, max(float(t), 1e-9)), 9) for t in fractions)
    return spending_boundaries(ts, tuple(level * t**rho for t in ts))


def spending_boundaries(fractions: Sequence[float], spent: Sequence[float]) -> tuple[float, ...]:
    """The boundaries for any spending: ``spent[k]`` is the level used up to look k (non-decreasing).

    No well-kept Python library computes these (R has gsDesign and rpact); the recursion is
    short and is checked against the published Lan-DeMets O'Brien-Fleming and Pocock boundaries
    and by simulation in tests/stats/test_sequential.py.
    """
    if not fractions or len(fractions) != len(spent):
        raise ValueError("one spending level per look, and at least one look")
    return _boundaries(tuple(float(t) for t in fractions), tuple(float(a) for a in spent))


@functools.lru_cache(maxsize=4096)
def _boundaries(fractions: tuple[float, ...], spent: tuple[float, ...]) -> tuple[float, ...]:
    if len(fractions) == 1:
        return (float(ndtri(1.0 - spent[0])) if spent[0] > 0 else math.inf,)
    head = _boundaries(fractions[:-1], spent[:-1])  # a prefix's boundaries do not depend on later looks
    grid, dens = _density(fractions[:-1], head)
    return (*head, _next_bound(grid, dens, fractions[-2], fractions[-1], spent[-1] - spent[-2]))


@functools.lru_cache(maxsize=4096)
def _density(fractions: tuple[float, ...], bounds: tuple[float, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Grid and Simpson-weighted sub-density of Z at the last look, over the paths that crossed no boundary."""
    if len(fractions) == 1:
        grid = _grid(bounds[0])
        return grid, np.exp(-0.5 * grid**2) / math.sqrt(2 * math.pi) * _simpson(grid)
    grid, dens = _density(fractions[:-1], bounds[:-1])
    r = math.sqrt(fractions[-2] / fractions[-1])
    s = math.sqrt(1.0 - r * r)
    new = _grid(bounds[-1])
    kern = np.exp(-0.5 * ((new[:, None] - r * grid[None, :]) / s) ** 2) / (s * math.sqrt(2 * math.pi))
    return new, (kern @ dens) * _simpson(new)


def _next_bound(grid: np.ndarray, dens: np.ndarray, t0: float, t1: float, increment: float) -> float:
    if increment <= 0.0:
        return math.inf
    r = math.sqrt(t0 / t1)
    s = math.sqrt(1.0 - r * r)

    def crossing(u: float) -> float:
        return float(dens @ ndtr((r * grid - u) / s))

    if crossing(-30.0) <= increment:
        return -math.inf
    return float(optimize.brentq(lambda u: crossing(u) - increment, -30.0, 40.0, xtol=1e-7))


def _grid(upper: float) -> np.ndarray:
    hi = min(upper, _HIGH)
    n = max(3, math.ceil((hi - _LOW) / _STEP) + 1)
    n += n % 2 == 0  # Simpson needs an odd count
    return np.linspace(_LOW, hi, n)


def _simpson(grid: np.ndarray) -> np.ndarray:
    h = grid[1] - grid[0]
    w = np.ones(len(grid))
    w[1:-1:2], w[2:-1:2] = 4.0, 2.0
    return w * h / 3.0
