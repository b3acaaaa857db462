"""find_change_points: per-process sample groups per run in, each change with index, size, interval, p out."""

from __future__ import annotations

import numpy as np
import pytest

from gatekeeper.stats.changepoint import find_change_points, median_levels, run_levels


def _runs(levels: list[float], *, noise: float = 0.01, seed: int = 0) -> list[list[list[float]]]:
    rng = np.random.default_rng(seed)
    return [
        [list(level * np.exp(rng.normal(0, noise)) * np.exp(rng.normal(0, noise, 20))) for _ in range(10)]
        for level in levels
    ]


def test_a_step_is_found_at_its_run_with_its_size_interval_and_p_value() -> None:
    [cp] = find_change_points(_runs([10.0] * 14 + [10.3] * 16, seed=1))
    assert cp.index == 14  # the first run at the new level
    assert cp.change == pytest.approx(0.03, abs=0.006)
    assert cp.ci[0] < 0.03 < cp.ci[1]
    assert cp.ci[0] > 0
    assert cp.p_value <= 0.01
    assert cp.before == pytest.approx(10.0, rel=0.01)
    assert cp.after == pytest.approx(10.3, rel=0.01)
    assert cp.to_dict()["index"] == 14


def test_the_interval_covers_the_true_change_about_95_times_in_100() -> None:
    covered = []
    for seed in range(20):
        [cp] = find_change_points(_runs([10.0] * 14 + [10.3] * 16, seed=100 + seed))
        covered.append(cp.ci[0] < 0.03 < cp.ci[1])
    assert sum(covered) >= 16  # 95% intervals: fewer than 16 of 20 happens with probability < 2%


def test_two_steps_and_a_step_back_are_all_found() -> None:
    found = find_change_points(_runs([10.0] * 10 + [10.5] * 10 + [10.0] * 10, seed=1))
    assert [cp.index for cp in found] == [10, 20]
    assert found[0].change > 0 > found[1].change


@pytest.mark.parametrize("seed", range(5))
def test_an_a_a_history_has_no_change(seed: int) -> None:
    assert find_change_points(_runs([10.0] * 30, noise=0.03, seed=seed)) == []


def test_deterministic_and_too_short_histories_have_none() -> None:
    runs = _runs([10.0] * 8 + [11.0] * 8, seed=2)
    assert find_change_points(runs) == find_change_points(runs)
    assert find_change_points(runs[:5]) == []


def test_a_flat_list_is_one_process_and_medians_give_the_same_levels() -> None:
    runs = _runs([10.0, 11.0, 12.0], seed=3)
    levels, within = run_levels(runs)
    medians = [[float(np.median(p)) for p in run] for run in runs]
    assert np.allclose(median_levels(medians)[0], levels)
    assert np.allclose(median_levels(medians)[1], within)
    flat, zero = run_levels([[1.0, 2.0, 3.0], [2.0, 2.0]])
    assert np.allclose(flat, np.log([2.0, 2.0]))
    assert np.allclose(zero, 0.0)  # one process: no within-run spread


@pytest.mark.parametrize("bad", [[[]], [[1.0, -1.0, -2.0]], [[float("nan")]]])
def test_bad_samples_are_refused(bad: list[list[float]]) -> None:
    with pytest.raises(ValueError, match="run 0"):
        run_levels(bad)


@pytest.mark.parametrize("seed", range(4))
def test_runs_that_differ_from_night_to_night_are_not_a_change(seed: int) -> None:
    """A run-level effect (each night 2% up or down as a whole, beyond its processes' 1% spread) is noise:
    the permutation test judges the statistic against the same history shuffled."""
    rng = np.random.default_rng(50 + seed)
    levels = list(10.0 * np.exp(rng.normal(0, 0.02, 30)))
    assert find_change_points(_runs(levels, seed=seed)) == []
