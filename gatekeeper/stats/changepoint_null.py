"""How large the scans of ``gatekeeper.stats.changepoint`` get when nothing changed: their p-values.

Two scans over a segment of ``n`` runs whose levels are independent normal with a known variance:

* **split**: the largest |Z_k| over the splits k = m .. n-m, Z_k the standardized difference between the
  mean of the runs after k and before it (the likelihood ratio statistic for one change of the mean);
* **bump**: the largest |Z_ij| over the middle parts [i, j), at least ``m`` runs inside and on each side,
  Z_ij the standardized difference between the mean inside and outside (a change and a
  change back).

Their tails come from the approximations for the maximum of a Gaussian random field with Brownian local
behaviour, corrected for the discrete grid by Siegmund's ``nu`` (Siegmund 1988, "Confidence sets in
change-point problems", Int. Stat. Rev. 56; James, James and Siegmund 1987, Biometrika 74):

    P(max_k |Z_k| > b)   ~ 2 sum_k  b phi(b) r_k nu(b sqrt(2 r_k)),              r_k = n / (2 k (n - k))
    P(max_ij |Z_ij| > b) ~ 2 sum_ij b^3 phi(b) r_L^2 nu(b sqrt(2 r_L))^2,         r_L = n / (2 L (n - L)), L = j - i

Checked against simulation (``tests/stats/test_changepoint_null.py``): within 10% of the simulated tail for
p between 0.05 and 0.002 from 20 runs up to thousands. Below ``SIMULATE_BELOW`` runs the approximation
runs low (a fifth at 8 runs; a tenth for the bump scan at 30), so short segments are judged against a
simulated null instead: a fixed seed per length, so the answer is the same every time (the module stays
pure).

When the run variance is itself estimated, the statistic is the known-variance one times sqrt(V / V_hat),
and its tail is the known-variance tail averaged over the distribution of V_hat / V (Gauss-Legendre on its
probability scale): chi2_f / f for one estimate with f degrees of freedom, and for the larger of two
independent ones (the within-run and the between-run variance) the distribution whose distribution
function is the product of theirs.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import special  # not scipy.stats: its import alone takes seconds, `history changes` pays it

__all__ = ["bump_p", "split_p"]

SIMULATE_BELOW = {"split": 24, "bump": 48}  # segments shorter than this are judged against a simulated null
_SIM_SPLITS = 50_000  # simulated histories per length, for the split scan
_SIM_BUMPS = 20_000  # ... for the bump scan (its pairs grow with the square of the length)
_NODES = 48  # Gauss-Legendre nodes for the average over an estimated variance
_EXACT_DF = 20_000  # an estimated variance with more degrees of freedom is taken as known
_GRID = 1_000  # a segment with more splits sums its tail over about this many (see _split_positions)
_EXACT_EDGE = 250


def nu(x: np.ndarray) -> np.ndarray:
    """Siegmund's correction for the overshoot of a discrete walk over a boundary (1 for a continuous one)."""
    x = np.asarray(x, dtype=float)
    y = np.maximum(x, 1e-12) / 2
    cdf = special.ndtr(y) - 0.5
    value = (2 / np.maximum(x, 1e-12)) * cdf / (y * special.ndtr(y) + np.exp(-y * y / 2) / math.sqrt(2 * math.pi))
    return np.where(x < 1e-6, 1.0, value)


def _phi(b: np.ndarray) -> np.ndarray:
    return np.exp(-b * b / 2) / math.sqrt(2 * math.pi)


def _split_positions(n: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    """The splits k = m .. n - m to sum over, with their weights: every split of a short segment; for a long
    one, every split within ``_EXACT_EDGE`` of either end (where the terms change fast) and a geometric grid
    between (the terms are smooth there, about 1 / k), weighted by the splits each point stands for."""
    if n - 2 * m + 1 <= _GRID:
        k = np.arange(m, n - m + 1, dtype=float)
        return k, np.ones_like(k)
    half = n / 2
    near = np.arange(m, _EXACT_EDGE, dtype=float)
    edges = np.geomspace(_EXACT_EDGE - 0.5, half, _GRID // 4 + 1)
    mid = np.sqrt(edges[:-1] * edges[1:])
    k = np.concatenate([near, mid])
    weight = np.concatenate([np.ones_like(near), np.diff(edges)])
    return np.concatenate([k, n - k]), np.concatenate([weight, weight])  # the terms are symmetric in k, n - k


def _split_tail(b: np.ndarray, n: int, m: int) -> np.ndarray:
    """The approximate P(max |Z_k| > b) for each b, known variance."""
    k, weight = _split_positions(n, m)
    r = n / (2 * k * (n - k))
    bb = np.asarray(b, dtype=float)[..., None]
    terms = bb * _phi(bb) * r * nu(bb * np.sqrt(2 * r)) * weight
    return np.minimum(2 * terms.sum(axis=-1), 1.0)


def _bump_tail(b: np.ndarray, n: int, m: int) -> np.ndarray:
    """The approximate P(max |Z_ij| > b) for each b, known variance; the pairs grouped by their length."""
    lengths = np.arange(m, n - 2 * m + 1, dtype=float)
    count = n - lengths - 2 * m + 1  # middles of length L with m <= i and j <= n - m
    keep = count > 0
    lengths, count = lengths[keep], count[keep]
    r = n / (2 * lengths * (n - lengths))
    bb = np.asarray(b, dtype=float)[..., None]
    terms = count * bb**3 * _phi(bb) * r * r * nu(bb * np.sqrt(2 * r)) ** 2
    return np.minimum(2 * terms.sum(axis=-1), 1.0)


@functools.lru_cache(maxsize=256)
def _simulated(kind: str, n: int, m: int) -> np.ndarray:
    """The sorted maxima of the scan over simulated histories of ``n`` runs with nothing changed (fixed seed)."""
    rng = np.random.default_rng([n, m, 0 if kind == "split" else 1, 20261204])
    if kind == "split":
        k = np.arange(m, n - m + 1)
        x = rng.standard_normal((_SIM_SPLITS, n))
        c = np.cumsum(x, axis=1)
        d = (c[:, -1:] - c[:, k - 1]) / (n - k) - c[:, k - 1] / k
        top = (np.abs(d) / np.sqrt(1 / k + 1 / (n - k))).max(axis=1)
    else:
        i, j = bump_pairs(n, m)
        if len(i) == 0:
            return np.zeros(0)
        top = np.empty(_SIM_BUMPS)
        size = 5_000
        for start in range(0, _SIM_BUMPS, size):
            x = rng.standard_normal((size, n))
            c = np.concatenate([np.zeros((size, 1)), np.cumsum(x, axis=1)], axis=1)
            inside = c[:, j] - c[:, i]
            length = j - i
            d = inside / length - (c[:, -1:] - inside) / (n - length)
            top[start : start + size] = (np.abs(d) / np.sqrt(1 / length + 1 / (n - length))).max(axis=1)
    return np.sort(top)


def bump_pairs(n: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    """The middle parts [i, j) with at least ``m`` runs inside and on each side."""
    i, j = np.triu_indices(n + 1, k=m)
    keep = (i >= m) & (j <= n - m)
    return i[keep], j[keep]


def _known_tail(kind: str, b: np.ndarray, n: int, m: int) -> np.ndarray:
    if n < SIMULATE_BELOW[kind]:
        null = _simulated(kind, n, m)
        if len(null) == 0:
            return np.zeros_like(b)
        beyond = (len(null) - np.searchsorted(null, b, side="left")) / len(null)
        analytic = _split_tail(b, n, m) if kind == "split" else _bump_tail(b, n, m)
        return np.where(beyond > 0, beyond, analytic)  # past the simulation's reach: the approximation's tail
    return _split_tail(b, n, m) if kind == "split" else _bump_tail(b, n, m)


@functools.lru_cache(maxsize=256)
def _variance_nodes(dfs: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights for averaging over V_hat / V when V_hat is the larger of independent estimates, each
    distributed as chi2_df / df (one estimate: a plain chi-square; with ``_EXACT_DF`` or more, exact)."""
    dfs = tuple(d for d in dfs if d < _EXACT_DF)
    if not dfs:
        return np.ones(1), np.ones(1)
    x, w = np.polynomial.legendre.leggauss(_NODES)
    q = (x + 1) / 2  # probabilities in (0, 1), crowded at both ends
    if len(dfs) == 1:
        return _chi2_ppf(q, dfs[0]) / dfs[0], w / 2
    # the larger of several: its distribution function is the product of theirs; invert it on a fine grid
    lo = min(float(_chi2_ppf(np.asarray(1e-9), d)) / d for d in dfs)
    hi = max(2 * float(special.gammainccinv(d / 2, 1e-9)) / d for d in dfs)
    grid = np.geomspace(max(lo, 1e-6), hi, 20_000)
    cdf = np.prod([special.gammainc(d / 2, grid * d / 2) for d in dfs], axis=0)
    return np.interp(q, cdf, grid), w / 2


def _chi2_ppf(q: np.ndarray, df: float) -> np.ndarray:
    return 2 * special.gammaincinv(df / 2, q)


def _p(kind: str, b: float, n: int, m: int, dfs: tuple[float, ...]) -> float:
    if not math.isfinite(b) or b <= 0:
        return 1.0 if b <= 0 else 0.0
    ratio, weight = _variance_nodes(tuple(max(1, round(d)) for d in dfs))
    tails = _known_tail(kind, b * np.sqrt(ratio), n, m)
    return float(min(1.0, max(float(np.dot(weight, tails)), 0.0)))


def split_p(b: float, n: int, m: int, dfs: tuple[float, ...] = ()) -> float:
    """P(max_k |Z_k| >= b) over a segment of ``n`` runs, splits ``m`` .. ``n - m``, the run variance being the
    larger of independent estimates with ``dfs`` degrees of freedom (none: known)."""
    return _p("split", b, n, m, dfs)


def bump_p(b: float, n: int, m: int, dfs: tuple[float, ...] = ()) -> float:
    """P(max_ij |Z_ij| >= b) over the middle parts of a segment of ``n`` runs (see ``bump_pairs``)."""
    return _p("bump", b, n, m, dfs)
