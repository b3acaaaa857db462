"""find_change_points over many histories of issue 24's benchmark model: how often it cries wolf, how many
weak steps it finds, and that it names a step's very run (benchmarks/README.md, "Change points (issue 24)").

Each history: 30 runs of 10 processes x 20 samples, every process its own level (log-normal, sigma = the
noise) and its samples scattered around it by the same sigma; a step at a run drawn from 8..22. The
histories are drawn with fixed seeds, so every count below is the same on every run of the test; the bounds
sit between what the method gets and what the weakened variants named in each test get.
"""

from __future__ import annotations

import numpy as np
import pytest

from gatekeeper.stats.changepoint import level_changes, median_table


def _histories(
    seed: int, count: int, *, step: float = 0.0, noise: float, run_effect: float = 0.0
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, int | None]]:
    """(levels, within-run variances, processes, the step's first run) of ``count`` histories."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        at = int(rng.integers(8, 23)) if step else None
        level = np.full(30, np.log(10.0))
        if at is not None:
            level[at:] += np.log1p(step)
        level += rng.normal(0, run_effect, 30) if run_effect else 0.0
        logs = (level[:, None] + rng.normal(0, noise, (30, 10)))[:, :, None] + rng.normal(0, noise, (30, 10, 20))
        out.append((*median_table(np.exp(np.median(logs, axis=2)).tolist()), at))
    return out


def _found(histories: list[tuple[np.ndarray, np.ndarray, np.ndarray, int | None]]) -> list[list[int]]:
    return [[cp.index for cp in level_changes(x, within, counts=counts)] for x, within, counts, _ in histories]


@pytest.mark.slow
def test_a_a_histories_at_the_issues_two_noises_show_a_change_in_about_one_in_a_hundred() -> None:
    """800 histories with nothing changed (400 at each noise): 8 show a change at alpha 0.01 (the split at
    0.01, the change-and-change-back scan at a quarter of it), about what alpha promises; alpha 0.018 gives 14
    here (1.8%, inside the issue's 1 in 40 but not 1 in 100)."""
    false = sum(
        bool(found) for noise, seed in ((0.01, 1), (0.03, 2)) for found in _found(_histories(seed, 400, noise=noise))
    )
    assert false <= 12


@pytest.mark.slow
def test_runs_that_differ_as_a_whole_by_their_own_spread_rarely_show_a_change() -> None:
    """Whole runs 0.33% apart on 1% process noise (the run-level effect as large as a run's own spread, which
    30 runs cannot reliably tell from none): 15 of 800 histories show a change here; trusting the within-run
    spread whenever the F test does not reject (no larger-of-the-two with the runs' scatter) gives 37."""
    false = sum(bool(found) for found in _found(_histories(3, 800, noise=0.01, run_effect=0.0033)))
    assert false <= 30


@pytest.mark.slow
def test_a_one_percent_step_in_three_percent_noise_is_found_about_one_time_in_five() -> None:
    """The hardest cell of the issue's benchmark, near what any scan can do (a likelihood-ratio scan that
    knows the run variance: 0.19 at this false-alarm rate). Judged by the scatter of the runs alone (not
    the within-run spread) it would be about 0.1: 198 and 98 of these 1,000."""
    histories = _histories(4, 1000, step=0.01, noise=0.03)
    hits = sum(
        any(abs(i - at) <= 1 for i in found) for found, (*_, at) in zip(_found(histories), histories, strict=True)
    )
    assert hits >= 160


def test_a_step_that_is_found_is_named_at_its_very_run() -> None:
    """A 1% step in 1% noise (3 standard deviations of a run): of the steps found within one run, about 90%
    at their very run (maximum likelihood: 176 of 195 here), the run whose stack changes `history changes`
    names. Placing a change where three runs hold the most likelihood finds slightly more within one run but
    fewer at the run itself (129 of 197)."""
    histories = _histories(5, 200, step=0.01, noise=0.01)
    near = exact = 0
    for found, (*_, at) in zip(_found(histories), histories, strict=True):
        near += any(abs(i - at) <= 1 for i in found)
        exact += at in found
    assert near >= 190
    assert exact >= 0.8 * near
