"""The sequential stopping rule (gatekeeper.stats.sequential): its boundaries, its decisions, and its
error rates under optional stopping, by seeded simulation (vectorised, a second or two)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from gatekeeper.stats.sequential import SequentialRule, boundaries, decide, decide_batch, spending_boundaries
from gatekeeper.stats.sequential_plan import Plan, Step

FIVE = [0.2, 0.4, 0.6, 0.8, 1.0]


def test_boundaries_match_the_published_lan_demets_tables() -> None:
    # One-sided 0.025, five equally spaced looks (Jennison & Turnbull table 7.6; gsDesign sfLDOF/sfLDPocock).
    obf = [2 * sps.norm.sf(sps.norm.isf(0.0125) / math.sqrt(t)) for t in FIVE]
    assert spending_boundaries(FIVE, obf) == pytest.approx([4.877, 3.357, 2.680, 2.290, 2.031], abs=2e-3)
    pocock = [0.025 * math.log(1 + (math.e - 1) * t) for t in FIVE]
    assert spending_boundaries(FIVE, pocock) == pytest.approx([2.438, 2.427, 2.410, 2.397, 2.386], abs=2e-3)
    # one look spending everything is the fixed-sample quantile
    assert boundaries([1.0], 0.005) == pytest.approx((sps.norm.isf(0.005),))


def test_boundaries_spend_exactly_their_level_on_simulated_brownian_paths() -> None:
    t = np.array([3, 4, 5, 6, 8, 10, 13, 16, 20]) / 20
    c = np.array(boundaries(t, 0.05))
    rng = np.random.default_rng(7)
    steps = rng.normal(size=(200_000, len(t))) * np.sqrt(np.diff(t, prepend=0.0))
    z = np.cumsum(steps, axis=1) / np.sqrt(t)
    crossed = (z >= c).any(axis=1).mean()
    assert crossed == pytest.approx(0.05 * t[-1], abs=0.002)  # 0.05 +- 4 standard errors
    first4 = (z[:, :4] >= c[:4]).any(axis=1).mean()
    assert first4 == pytest.approx(0.05 * t[3], abs=0.0015)  # spent in proportion to the information


def _simulate(
    plan: Plan, shift: float, *, trials: int, naive: bool = False, seed: int = 11
) -> tuple[np.ndarray, np.ndarray]:
    """Both sides grow one process per look from 3 to plan.max_processes; log medians ~ N(shift, 1%)."""
    rng = np.random.default_rng(seed)
    n = plan.max_processes
    lb = rng.normal(0.0, 0.01, (trials, n))
    lc = rng.normal(shift, 0.01, (trials, n))
    verdict = np.zeros(trials, dtype=int)
    used = np.full(trials, n)
    looks: list[tuple[int, int]] = []
    for k in range(plan.min_processes, n + 1):
        if naive:  # the fixed-sample Welch test, consulted after every process
            b, c = lb[:, :k], lc[:, :k]
            p = sps.ttest_ind(c, b, axis=1, equal_var=False, alternative="greater").pvalue
            d = c.mean(axis=1) - b.mean(axis=1)
            code = np.where((p < plan.alpha / 2) & (d > math.log1p(plan.min_effect)), 1, 0)
        else:
            code = decide_batch(lb[:, :k], lc[:, :k], plan, looks)
        looks.append((k, k))
        new = (verdict == 0) & (code > 0)
        verdict[new], used[new] = code[new], k
    return verdict, used


def test_optional_stopping_keeps_false_regressions_within_alpha_where_naive_peeking_does_not() -> None:
    # alpha 0.1 (0.05 for the regression side) and 18 looks: a naive "stop at the first p < alpha" alarms
    # on about a fifth of A/A runs; the rule must stay within its 5% whenever it stops.
    plan = Plan(max_processes=20, alpha=0.1, min_effect=0.0, detect=0.02, baseline_grows=True, max_cv=1.0)
    bound = plan.alpha / 2
    real, used = _simulate(plan, 0.0, trials=3000)
    naive, _ = _simulate(plan, 0.0, trials=3000, naive=True)
    se = math.sqrt(bound * (1 - bound) / 3000)
    assert (real == 1).mean() <= bound + 2 * se
    assert (naive == 1).mean() > 2 * bound  # the simulation can tell the two apart
    assert (real == 0).mean() < 0.01  # and the rule does stop: inconclusive only at the budget
    assert used.mean() < 10


def test_equivalent_is_wrong_at_most_one_minus_power_of_the_time() -> None:
    # truth = exactly the change the design is built to detect: "ruled out" must be rare (<= 10%)
    plan = Plan(max_processes=20, alpha=0.01, min_effect=0.01, detect=0.02, baseline_grows=True, max_cv=1.0)
    verdict, _ = _simulate(plan, math.log1p(0.02), trials=3000, seed=12)
    assert (verdict == 3).mean() <= 0.10 + 2 * math.sqrt(0.09 / 3000)
    assert (verdict == 1).mean() >= 0.85


def test_clear_cases_stop_at_the_first_look() -> None:
    plan = Plan(max_processes=20, min_effect=0.01, baseline_grows=True)
    verdict, used = _simulate(plan, math.log1p(0.10), trials=500, seed=13)
    assert (verdict == 1).all()
    assert used.mean() < 4
    assert used.max() <= 6


def _groups(rng: np.random.Generator, k: int, level: float, noise: float = 0.01) -> list[list[float]]:
    return [list(level * math.exp(rng.normal(0, noise)) * np.exp(rng.normal(0, 0.01, 40))) for _ in range(k)]


def test_rule_asks_for_more_then_decides_and_reports_processes_and_why() -> None:
    rng = np.random.default_rng(3)
    base, cand = _groups(rng, 20, 100.0), _groups(rng, 20, 104.0)
    rule = SequentialRule(Plan(max_processes=20, min_effect=0.01, baseline_grows=True))
    steps: list[Step] = []
    for k in range(2, 21):
        steps.append(rule.look(base[:k], cand[:k]))
        if steps[-1].stop:
            break
    first, last = steps[0], steps[-1]
    assert not first.stop
    assert first.verdict == "inconclusive"
    assert "too few processes" in first.reason
    assert last.stop
    assert last.verdict == "regression"
    assert last.processes == last.baseline_processes == len(steps) + 1
    assert last.looks == tuple((k, k) for k in range(2, len(steps) + 2))
    assert "significantly worse" in last.reason
    assert f"after {last.processes} candidate processes" in last.reason
    assert last.interval is not None
    assert last.interval[0] > 1.0
    assert last.p_value is not None
    assert last.p_value < 0.005
    # the pure function replays the same look from the recorded counts
    again = decide(base[: last.processes], cand[: last.processes], rule.plan, last.looks[:-1])
    assert again == last


def test_scalar_and_batch_agree() -> None:
    rng = np.random.default_rng(4)
    plan = Plan(max_processes=12, min_effect=0.01)
    for level in (97.0, 100.0, 101.5, 103.0):
        base, cand = _groups(rng, 8, 100.0), _groups(rng, 6, level)
        step = decide(base, cand, plan, [(8, 4), (8, 5)])
        lb = np.log([[np.median(g) for g in base]])
        lc = np.log([[np.median(g) for g in cand]])
        code = decide_batch(lb, lc, plan, [(8, 4), (8, 5)])[0]
        assert step.verdict == ("inconclusive", "regression", "improvement", "equivalent")[code]


def test_budget_ends_undecided_runs_as_inconclusive_with_the_reason() -> None:
    base = [[m] * 5 for m in (97.0, 100.0, 103.0, 100.0)]
    cand = [[m] * 5 for m in (99.0, 102.0, 105.0, 101.0)]  # +1.7%, with 2.5% between processes
    plan = Plan(max_processes=4, min_effect=0.01, baseline_grows=True)
    step = decide(base, cand, plan, [(3, 3)])
    assert step.stop
    assert step.verdict == "inconclusive"
    assert step.reason.startswith("the budget of 4 processes ran out: ")
    plan = Plan(max_processes=20, min_effect=0.01, baseline_grows=True)
    running = decide(base, cand, plan, [(3, 3)])
    assert not running.stop
    spent = decide(base, cand, plan, [(3, 3), (4, 4)], budget_spent="--max-seconds 60 spent")
    assert spent.stop
    assert spent.verdict == "inconclusive"
    assert "the budget ran out (--max-seconds 60 spent)" in spent.reason
    assert spent.looks == ((3, 3), (4, 4))  # asking again with no new process is the same look


def test_a_noisy_side_never_decides_and_a_tiny_fixed_baseline_stops_at_once() -> None:
    rng = np.random.default_rng(6)
    base, cand = _groups(rng, 6, 100.0), _groups(rng, 6, 150.0, noise=0.2)
    step = decide(base, cand, Plan(max_processes=20, min_effect=0.01))
    assert not step.stop
    assert "candidate run fluctuates too much" in step.reason
    noisy_base = decide(cand, base, Plan(max_processes=20, min_effect=0.01))
    assert noisy_base.stop
    assert noisy_base.reason.startswith("the baseline fluctuates too much: more candidate processes cannot help")
    assert not decide(cand, base, Plan(max_processes=20, min_effect=0.01, baseline_grows=True)).stop
    tiny = decide(base[:2], cand, Plan(max_processes=20, min_effect=0.01))
    assert tiny.stop
    assert tiny.verdict == "inconclusive"
    assert "more candidate processes cannot help" in tiny.reason


def test_higher_is_better_and_improvements() -> None:
    rng = np.random.default_rng(8)
    base = _groups(rng, 6, 1000.0)
    slower = decide(base, _groups(rng, 6, 900.0), Plan(max_processes=20, better="higher"))
    assert slower.verdict == "regression"
    assert slower.ratio is not None
    assert slower.ratio < 0.95
    faster = decide(base, _groups(rng, 6, 1100.0), Plan(max_processes=20, better="higher"))
    assert faster.verdict == "improvement"
    same = decide(base, _groups(rng, 12, 1000.0), Plan(max_processes=20))
    assert same.verdict == "equivalent"
    assert "regression of 4% or more is ruled out" in same.reason


def test_exact_samples_decide_on_the_estimate_alone() -> None:
    base = [[10.0] * 5] * 4
    assert decide(base, [[11.0] * 5] * 5, Plan(max_processes=8)).verdict == "regression"
    assert decide(base, [[10.0] * 5] * 5, Plan(max_processes=8)).verdict == "equivalent"
    early = decide(base, [[11.0] * 5] * 4, Plan(max_processes=8))  # a reused baseline waits for 5
    assert not early.stop
    assert "too few processes: candidate has 4, need at least 5" in early.reason
    assert early.p_value is None


def test_bad_plans_and_samples_are_refused() -> None:
    with pytest.raises(ValueError, match="detect"):
        Plan(max_processes=10, min_effect=0.03, detect=0.02)
    with pytest.raises(ValueError, match="max_processes"):
        Plan(max_processes=2)
    with pytest.raises(ValueError, match="alpha"):
        Plan(max_processes=10, alpha=0.0)
    with pytest.raises(ValueError, match="better"):
        Plan(max_processes=10, better="sideways")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="positive"):
        decide([[1.0, 0.0]], [[1.0]], Plan(max_processes=10))
    with pytest.raises(ValueError, match="lose processes"):
        decide([[1.0]] * 3, [[1.0]] * 3, Plan(max_processes=10), [(3, 4)])


def test_plan_and_step_serialise() -> None:
    plan = Plan(max_processes=20, min_effect=0.03, baseline_grows=True)
    assert Plan.from_dict(plan.to_dict()) == Plan(max_processes=20, min_effect=0.03, detect=0.06, baseline_grows=True)
    rng = np.random.default_rng(9)
    d = decide(_groups(rng, 5, 100.0), _groups(rng, 5, 100.0), plan).to_dict()
    assert d["plan"]["detect"] == 0.06
    assert d["looks"] == [[5, 5]]
    assert d["processes"] == 5


def test_the_plans_max_cv_is_the_noise_guard_and_the_reason_names_its_setting() -> None:
    base = [[m] * 5 for m in (99.0, 100.0, 101.0, 100.5, 99.5, 100.2)]
    cand = [[130.0 * m] * 5 for m in (0.9, 1.0, 1.1, 0.95, 1.05)]  # +30%, process medians with a CV of 7.9%
    held = SequentialRule(Plan(max_processes=20, min_effect=0.03), noise_hint="--max-cv of the test")
    step = held.look(base, cand)
    assert not step.stop
    assert step.reason.endswith(
        "candidate run fluctuates too much: CV of process medians 7.9% > 5% (--max-cv of the test)"
    )
    assert decide(base, cand, Plan(max_processes=20, min_effect=0.03, max_cv=0.10)).verdict == "regression"
    with pytest.raises(ValueError, match="max_cv"):
        Plan(max_processes=10, max_cv=0.0)
