"""find_change_points: per-process sample groups per run in, each change with index, size, interval, p out."""

from __future__ import annotations

import numpy as np
import pytest

from gatekeeper.stats.changepoint import (
    find_change_points,
    median_levels,
    median_table,
    ragged_table,
    run_levels,
    run_noise,
)


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
    the scatter of the runs, larger than their processes' spread, is the variance the scan is judged by."""
    rng = np.random.default_rng(50 + seed)
    levels = list(10.0 * np.exp(rng.normal(0, 0.02, 30)))
    assert find_change_points(_runs(levels, seed=seed)) == []


def _levels(levels: list[float], *, noise: float, run_effect: float = 0.0, seed: int) -> list[list[list[float]]]:
    """As ``_runs``, with each run's level also moved as a whole (a run-level effect, sigma ``run_effect``)."""
    rng = np.random.default_rng(seed)
    moved = [level * float(np.exp(rng.normal(0, run_effect))) for level in levels]
    return _runs(moved, noise=noise, seed=seed + 10_000)


def test_a_history_whose_runs_differ_beyond_their_processes_rarely_shows_a_false_change() -> None:
    """1% process noise, and whole runs 1% apart: the within-run spread alone would call a change in almost
    every one of these histories; judged by the scatter of the runs, about 1 in 100."""
    false = sum(bool(find_change_points(_levels([10.0] * 30, noise=0.01, run_effect=0.01, seed=s))) for s in range(100))
    assert false <= 4


@pytest.mark.slow
def test_a_a_histories_of_the_issue_raise_about_alpha_false_changes() -> None:
    """200 histories at 3% process noise, nothing changed: alpha 0.01 gives about 1 (at most 5 by chance)."""
    false = sum(bool(find_change_points(_runs([10.0] * 30, noise=0.03, seed=500 + s))) for s in range(200))
    assert false <= 5


def test_the_within_run_variance_is_trusted_until_the_runs_scatter_more() -> None:
    """The F test at 5%: about 1 quiet history in 20 is judged by the runs' scatter; runs 1% apart always."""

    def extra(runs: list[list[list[float]]]) -> bool:
        x, within = run_levels(runs)
        return run_noise(x, within, np.full(len(runs), 10)).extra

    assert sum(extra(_runs([10.0] * 30, noise=0.03, seed=s)) for s in range(100)) <= 12
    assert all(extra(_levels([10.0] * 30, noise=0.01, run_effect=0.01, seed=s)) for s in range(20))


def test_a_one_percent_step_in_quiet_runs_is_found_at_its_run_and_its_span_holds_it() -> None:
    hits, held = 0, 0
    for seed in range(10):
        found = find_change_points(_runs([10.0] * 13 + [10.1] * 17, seed=200 + seed))
        near = [cp for cp in found if abs(cp.index - 13) <= 1]
        hits += bool(near)
        held += bool(near) and near[0].span is not None and near[0].span[0] <= 13 <= near[0].span[1]
    assert hits >= 9
    assert held >= 9


def test_a_clear_step_has_a_span_of_one_run() -> None:
    [cp] = find_change_points(_runs([10.0] * 14 + [10.5] * 16, seed=4))
    assert cp.span == (14, 14)
    assert cp.to_dict()["span"] == [14, 14]


def test_a_regression_that_was_fixed_later_is_found_at_both_ends() -> None:
    """Six runs 1% slower in the middle of thirty: a plain split averages them away (it finds both ends in
    about 3 histories of 10); the scan of middle parts names where the regression began and where it ended."""
    both = 0
    for seed in range(10):
        found = [cp.index for cp in find_change_points(_runs([10.0] * 12 + [10.1] * 6 + [10.0] * 12, seed=seed))]
        both += any(abs(i - 12) <= 1 for i in found) and any(abs(i - 18) <= 1 for i in found)
    assert both >= 7
    [up, down] = find_change_points(_runs([10.0] * 12 + [10.15] * 6 + [10.0] * 12, seed=7))
    assert (up.index, down.index) == (12, 18)
    assert up.change > 0 > down.change


def test_runs_of_one_process_are_judged_by_their_scatter_alone() -> None:
    rng = np.random.default_rng(9)
    flat = [list(level * np.exp(rng.normal(0, 0.01, 20))) for level in [10.0] * 15 + [10.5] * 15]
    [cp] = find_change_points(flat)  # a flat list per run: one process
    assert cp.index == 15
    quiet = [list(10.0 * np.exp(rng.normal(0, 0.01, 20))) for _ in range(30)]
    assert find_change_points(quiet) == []


def test_runs_with_different_numbers_of_processes_weigh_by_them() -> None:
    runs = _runs([10.0] * 15 + [10.2] * 15, noise=0.02, seed=11)
    runs = [run[:4] if i % 2 else run for i, run in enumerate(runs)]  # every other run on 4 GPUs, not 10
    [cp] = find_change_points(runs)
    assert abs(cp.index - 15) <= 1


def test_levels_from_medians_laid_end_to_end_are_the_tables() -> None:
    rng = np.random.default_rng(12)
    medians = [list(rng.uniform(9, 11, n)) for n in (10, 10, 4, 1, 7)]
    x, within, counts = median_table(medians)
    flat = np.concatenate([np.asarray(m) for m in medians])
    rx, rw, rc = ragged_table(flat, np.asarray([len(m) for m in medians]))
    assert np.allclose(rx, x)
    assert np.allclose(rw, within)
    assert list(rc) == list(counts) == [10, 10, 4, 1, 7]
    with pytest.raises(ValueError, match="run 2"):
        ragged_table(np.asarray([1.0, 1.0, 1.0, -1.0]), np.asarray([1, 2, 1]))
