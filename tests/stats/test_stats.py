from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gatekeeper.stats.compare import (
    Comparison,
    cluster_interval,
    compare_runs,
    harrell_davis,
    holm,
    process_cv,
    run_summary,
    theil_sen_slope,
)


def _run(rng: np.random.Generator, k: int = 10, m: int = 200, shift: float = 1.0, spike: float = 0.005) -> list:
    out = []
    for _ in range(k):
        x = 100 * shift * math.exp(rng.normal(0, 0.01)) * np.exp(rng.normal(0, 0.015, m))
        s = rng.random(m) < spike
        x[s] *= rng.uniform(2, 4, s.sum())
        out.append(x.tolist())
    return out


def test_three_percent_slowdown_is_a_regression_with_a_readable_line() -> None:
    rng = np.random.default_rng(1)
    c = compare_runs(_run(rng), _run(rng, shift=1.03), unit="ms")
    assert c.verdict == "regression"
    assert 1.02 < c.ratio < 1.04
    assert c.ci[0] < c.ratio < c.ci[1]
    assert c.p_value < 0.01
    line = c.line("latency fwd bs8")
    assert line.startswith("latency fwd bs8: median +")
    assert "[95% CI +" in line
    assert "-> regression" in line
    assert "P99 " in line
    assert line.endswith(" ms")


def test_improvement_and_better_higher() -> None:
    rng = np.random.default_rng(2)
    assert compare_runs(_run(rng), _run(rng, shift=0.9)).verdict == "improvement"
    # throughput: higher is better, so a 10% drop is a regression
    base = [[1000 * math.exp(rng.normal(0, 0.01))] * 30 for _ in range(8)]
    cand = [[900 * math.exp(rng.normal(0, 0.01))] * 30 for _ in range(8)]
    c = compare_runs(base, cand, better="higher")
    assert c.verdict == "regression"
    assert c.ratio < 0.95


def test_same_distribution_is_equivalent_not_regression() -> None:
    rng = np.random.default_rng(3)
    c = compare_runs(_run(rng), _run(rng))
    assert c.verdict == "equivalent"
    assert c.tail_verdict == "no_change"


def test_tail_regression_when_spikes_multiply_even_with_a_lower_median() -> None:
    rng = np.random.default_rng(4)
    c = compare_runs(_run(rng, spike=0.005), _run(rng, shift=0.98, spike=0.04), unit="ms")
    assert c.tail_verdict == "regression"
    assert c.tail_rate_candidate > 4 * c.tail_rate_baseline
    assert c.p99_candidate > 1.5 * c.p99_baseline
    assert c.p99_candidate_ci[0] <= c.p99_candidate <= c.p99_candidate_ci[1]
    assert "-> tail regression" in c.line()


def test_spikes_clustered_in_one_process_are_not_a_tail_regression() -> None:
    rng = np.random.default_rng(5)
    base, cand = _run(rng, spike=0.0), _run(rng, spike=0.0)
    cand[0] = [x * 3 if i % 5 == 0 else x for i, x in enumerate(cand[0])]  # one bad process: 20% spikes
    c = compare_runs(base, cand)
    assert c.tail_rate_candidate > 0.015  # pooling iterations would call this highly significant
    assert c.tail_verdict == "no_change"


def test_too_few_processes_and_noisy_runs_are_inconclusive_with_reason() -> None:
    rng = np.random.default_rng(6)
    c = compare_runs(_run(rng)[0], _run(rng, shift=1.5)[0])
    assert c.verdict == "inconclusive"
    assert c.tail_verdict == "inconclusive"
    assert "too few processes: baseline has 1" in c.reason
    noisy = [[100 * f] * 50 for f in (0.8, 1.0, 1.3, 0.9, 1.1)]
    c = compare_runs(noisy, _run(rng, shift=1.5))
    assert c.verdict == "inconclusive"
    assert c.reason.startswith("baseline run fluctuates too much: CV of process medians")
    c = compare_runs(_run(rng), _run(rng, shift=1.5), candidate_cv=0.12)
    assert c.verdict == "inconclusive"
    assert "candidate run fluctuates too much" in c.reason
    assert "(candidate run" in c.line()


def test_wide_interval_is_inconclusive() -> None:
    base = [[m] * 30 for m in (96.0, 100.0, 104.0)]
    cand = [[m] * 30 for m in (97.0, 101.5, 106.0)]
    c = compare_runs(base, cand, max_cv=0.5)
    assert c.verdict == "inconclusive"
    assert "too wide" in c.reason


def test_bad_input_raises_value_error() -> None:
    with pytest.raises(ValueError, match="positive"):
        compare_runs([[1.0, 0.0]], [[1.0]])
    with pytest.raises(ValueError, match="better"):
        compare_runs([[1.0]], [[1.0]], better="sideways")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one"):
        compare_runs([], [[1.0]])


def test_comparison_round_trips() -> None:
    rng = np.random.default_rng(8)
    c = compare_runs(_run(rng), _run(rng, shift=1.05), unit="ms")
    d = c.to_dict()
    assert isinstance(d["ci"], list)
    assert Comparison.from_dict(d) == c


def test_holm_matches_hand_computation() -> None:
    assert holm([0.01, 0.04, 0.03, None]) == pytest.approx([0.03, 0.06, 0.06, None], abs=1e-12)  # type: ignore[arg-type]
    assert holm([]) == []


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=20))
def test_holm_is_monotone_and_never_below_raw(ps: list[float]) -> None:
    adj = holm(ps)
    for p, a in zip(ps, adj, strict=True):
        assert p <= a <= 1.0
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    assert all(adj[order[i]] <= adj[order[i + 1]] for i in range(len(ps) - 1))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0.1, 1e4), min_size=2, max_size=300), st.floats(0.01, 0.99))
def test_harrell_davis_lies_within_the_sample_range(xs: list[float], q: float) -> None:
    v = harrell_davis(xs, q)
    assert min(xs) - 1e-9 <= v <= max(xs) + 1e-9


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.floats(0.5, 2000.0))
def test_verdict_does_not_depend_on_the_unit(seed: int, scale: float) -> None:
    rng = np.random.default_rng(seed)
    b, c = _run(rng, k=5, m=30), _run(rng, k=5, m=30, shift=1.04)
    one = compare_runs(b, c)
    other = compare_runs([[x * scale for x in g] for g in b], [[x * scale for x in g] for g in c])
    assert one.verdict == other.verdict
    assert one.ratio == pytest.approx(other.ratio, rel=1e-9)


def test_harrell_davis_median_of_known_sample() -> None:
    assert harrell_davis(list(range(1, 102)), 0.5) == pytest.approx(51.0, rel=1e-9)
    with pytest.raises(ValueError):
        harrell_davis([], 0.5)


def test_cluster_interval_and_summary() -> None:
    rng = np.random.default_rng(9)
    groups = _run(rng, k=6, m=100)
    iv = cluster_interval(groups, 0.99)
    assert iv.ci[0] <= iv.estimate <= iv.ci[1]
    assert cluster_interval([[1.0, 2.0, 3.0]], 0.5).ci is None
    s = run_summary(groups)
    assert s["p50"] < s["p99"] <= s["p999"]
    assert s["processes"] == 6
    assert s["cv"] == pytest.approx(process_cv(groups))


def test_theil_sen_slope_recovers_a_trend_through_outliers() -> None:
    x = np.arange(100.0)
    y = 2.0 * x + 5
    y[::10] += 500  # allocator spikes
    slope, lo, hi = theil_sen_slope(x, y)
    assert slope == pytest.approx(2.0, abs=1e-6)
    assert lo <= slope <= hi
    with pytest.raises(ValueError):
        theil_sen_slope([1.0], [1.0])


def test_tail_permutation_p_is_exact_on_a_small_case() -> None:
    from gatekeeper.stats.tail import permutation_p

    # 3 vs 3: 20 splits; the observed split is the single largest one
    assert permutation_p([5.0, 6.0, 7.0], [1.0, 2.0, 3.0]) == pytest.approx(1 / 20)
    assert permutation_p([1.0, 2.0, 3.0], [5.0, 6.0, 7.0]) == pytest.approx(1.0)
    big = permutation_p(list(np.arange(20.0, 40.0)), list(np.arange(20.0)))  # C(40,20) splits: sampled
    assert big < 1e-3


def test_field_report_lower_mean_but_tripled_p99_is_a_tail_regression() -> None:
    rng = np.random.default_rng(11)
    c = compare_runs(_run(rng, m=400), _run(rng, m=400, shift=0.97, spike=0.03), unit="ms")
    assert c.verdict != "regression"
    assert c.tail_verdict == "regression"
    assert c.tail_p_value < 0.005
