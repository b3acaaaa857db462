"""The tails that judge a change-point scan (gatekeeper.stats.changepoint_null) against simulation: the
largest standardized split and the largest middle part of a history in which nothing changed."""

from __future__ import annotations

import numpy as np
import pytest

from gatekeeper.stats import changepoint_null as null


def _split_maxima(n: int, count: int, seed: int, df: int | None = None) -> np.ndarray:
    rng = np.random.default_rng(seed)
    k = np.arange(3, n - 2)
    c = np.cumsum(rng.standard_normal((count, n)), axis=1)
    d = (c[:, -1:] - c[:, k - 1]) / (n - k) - c[:, k - 1] / k
    top = (np.abs(d) / np.sqrt(1 / k + 1 / (n - k))).max(axis=1)
    return top if df is None else top / np.sqrt(rng.chisquare(df, count) / df)


def _bump_maxima(n: int, count: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    i, j = null.bump_pairs(n, 3)
    length = j - i
    c = np.concatenate([np.zeros((count, 1)), np.cumsum(rng.standard_normal((count, n)), axis=1)], axis=1)
    inside = c[:, j] - c[:, i]
    d = inside / length - (c[:, -1:] - inside) / (n - length)
    return (np.abs(d) / np.sqrt(1 / length + 1 / (n - length))).max(axis=1)


@pytest.mark.parametrize("n", [6, 30, 200])
@pytest.mark.parametrize("p", [0.05, 0.01])
def test_the_split_tail_is_the_simulated_one(n: int, p: float) -> None:
    """6 runs: the simulated null; 30 and 200: Siegmund's approximation. Within 20% of 40,000 simulated
    histories at p = 0.05 and 0.01 (the simulation's own error there is 2-5%)."""
    top = _split_maxima(n, 40_000, seed=n)
    assert null.split_p(float(np.quantile(top, 1 - p)), n, 3) == pytest.approx(p, rel=0.2)


def test_a_long_history_sums_its_tail_over_a_grid_that_loses_nothing() -> None:
    """10,000 runs: the tail summed over a grid of about a thousand splits is the full sum's."""
    k = np.arange(3, 10_000 - 2, dtype=float)
    r = 10_000 / (2 * k * (10_000 - k))
    for b in (3.5, 4.0, 4.5):
        full = 2 * np.sum(b * null._phi(np.asarray(b)) * r * null.nu(b * np.sqrt(2 * r)))
        assert null.split_p(b, 10_000, 3) == pytest.approx(full, rel=0.002)


@pytest.mark.slow
@pytest.mark.parametrize("n", [20, 60])
def test_the_bump_tail_is_the_simulated_one(n: int) -> None:
    top = _bump_maxima(n, 20_000, seed=100 + n)
    for p in (0.05, 0.01):
        assert null.bump_p(float(np.quantile(top, 1 - p)), n, 3) == pytest.approx(p, rel=0.2)


def test_an_estimated_variance_widens_the_tail_as_a_chi_square_says() -> None:
    """The run variance learnt from 20 degrees of freedom: the maximum is heavier-tailed, and the tail
    averaged over chi2_20 / 20 is the simulated one; a nearly known variance is the known-variance tail."""
    top = _split_maxima(30, 40_000, seed=5, df=20)
    b = float(np.quantile(top, 0.99))
    assert null.split_p(b, 30, 3, (20,)) == pytest.approx(0.01, rel=0.2)
    assert null.split_p(b, 30, 3) < 0.006  # judged as if known, the same b looks far rarer
    assert null.split_p(b, 30, 3, (100_000,)) == null.split_p(b, 30, 3)


def test_the_larger_of_two_variance_estimates_is_judged_as_such() -> None:
    """V_hat = max(within, between): the statistic is smaller than with either alone, and its tail lies
    between the known-variance one and the between-run one."""
    b = 3.4
    known, between, both = null.split_p(b, 30, 3), null.split_p(b, 30, 3, (20,)), null.split_p(b, 30, 3, (270, 20))
    assert both < known < between


def test_no_statistic_no_evidence() -> None:
    assert null.split_p(0.0, 30, 3) == 1.0
    assert null.split_p(float("inf"), 30, 3) == 0.0
    assert null.split_p(50.0, 30, 3) < 1e-100
