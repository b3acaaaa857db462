"""The regression judge's numbers and words, exactly (written against surviving mutants of
gatekeeper.stats.compare: a changed test statistic, bound, default or message must fail a test).

The Welch test is checked against scipy's own ``ttest_ind(equal_var=False)`` on the logs of the
process medians, an implementation independent of ours."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from scipy import stats as sps

from gatekeeper.stats import compare
from gatekeeper.stats.compare import Comparison, _body_reason, _num, _p, _pct, compare_runs, process_cv, theil_sen_slope

BASE = [[100.0], [101.0], [99.0], [100.5], [99.5]]  # one sample per process: the process median is the sample


def _cmp(**kw: object) -> Comparison:
    fields: dict[str, object] = {
        "verdict": "regression",
        "ratio": 1.031,
        "ci": (1.019, 1.044),
        "p_value": 4e-4,
        "tail_verdict": "regression",
        "tail_rate_baseline": 0.01,
        "tail_rate_candidate": 0.05,
        "tail_p_value": 0.001,
        "p99_baseline": 148.5,
        "p99_candidate": 512.0,
        "p99_baseline_ci": None,
        "p99_candidate_ci": None,
        "reason": "r",
        "unit": "ms",
    }
    fields.update(kw)
    return Comparison(**fields)  # type: ignore[arg-type]


def test_line_exactly() -> None:
    full = (
        "median +3.1% [95% CI +1.9, +4.4], p=4e-4 -> regression; "
        "tail >1.5x median 1.0% -> 5.0% (p=0.001) -> tail regression; P99 148.5 -> 512 ms"
    )
    assert _cmp().line("lat") == f"lat: {full}"
    assert _cmp().line() == full
    assert _cmp().line(unit="s").endswith("P99 148.5 -> 512 s")
    assert _cmp(unit="").line().endswith("P99 148.5 -> 512")
    assert _cmp(better="higher", tail_factor=2.0).line().split("; ")[1].startswith("tail <1/2x median 1.0% -> 5.0%")
    assert _cmp(tail_p_value=None, tail_verdict="no_change").line().split("; ")[1] == "tail >1.5x median 1.0% -> 5.0%"
    assert _cmp(tail_rate_baseline=None).line() == (
        "median +3.1% [95% CI +1.9, +4.4], p=4e-4 -> regression; P99 148.5 -> 512 ms"
    )
    assert _cmp(p99_candidate=None).line() == full.split("; P99", maxsplit=1)[0]
    assert _cmp(p99_baseline=None).line() == full.split("; P99", maxsplit=1)[0]


def test_line_of_an_inconclusive_answer_says_why() -> None:
    c = _cmp(verdict="inconclusive", ratio=None, tail_rate_baseline=None, p99_baseline=None, reason="too few")
    assert c.line("x") == "x: -> inconclusive (too few)"
    c = _cmp(verdict="inconclusive", ci=None, tail_rate_baseline=None, p99_baseline=None, reason="a; b")
    assert c.line() == "-> inconclusive (a; b)"
    assert _cmp(verdict="equivalent", reason="not shown").line().startswith("median +3.1% [95% CI +1.9, +4.4]")
    assert "not shown" not in _cmp(verdict="equivalent", reason="not shown").line()
    # a sequential run stopped for the reason the rule gives: said once in the line, not twice
    why = "the budget ran out after 3 processes: the runs fluctuate"
    c = _cmp(verdict="inconclusive", ci=None, tail_rate_baseline=None, p99_baseline=None, reason=why, stopped=why,
             processes=3, baseline_processes=3)  # fmt: skip
    assert c.line() == f"-> inconclusive ({why}); 3 processes against 3"
    c = _cmp(stopped="decided", processes=7, baseline_processes=10)
    assert c.line().endswith("; 7 processes against 10, stopped: decided")


@pytest.mark.parametrize(
    ("p", "text"),
    [
        (None, "n/a"),
        (1.0, "1"),
        (0.5, "0.5"),
        (0.999, "0.999"),
        (0.9996, "1"),
        (0.1, "0.1"),
        (0.001, "0.001"),
        (9e-4, "9e-4"),
    ],
)
def test_p_value_format(p: float | None, text: str) -> None:
    assert _p(p) == text


@pytest.mark.parametrize(("v", "text"), [(148.5, "148.5"), (0.0123456, "0.01235"), (12345.6, "12346"), (-2.5, "-2.5")])
def test_number_format(v: float, text: str) -> None:
    assert _num(v) == text


def test_percent_format() -> None:
    assert (_pct(1.031), _pct(0.95), _pct(1.031, sign_only=True)) == ("+3.1%", "-5.0%", "+3.1")


def test_body_reasons_exactly() -> None:
    ci = (0.99, 1.05)
    assert _body_reason("regression", ci, 0.02) == "significantly worse, by more than 2%"
    assert _body_reason("improvement", ci, 0.05) == "significantly better, by more than 5%"
    assert _body_reason("equivalent", ci, 0.02) == "the 95% interval excludes a change worse than 2%"
    assert _body_reason("inconclusive", ci, 0.02) == (
        "the 95% interval -1.0%..+5.0% is too wide to exclude a 2% change"
    )


@pytest.mark.parametrize("better", ["lower", "higher"])
def test_body_is_welchs_test_on_log_process_medians(better: str) -> None:
    # unequal sizes and variances (candidate noisier), so every term of the Welch formula matters
    cand = [[104.0], [108.0], [101.0], [106.5], [103.0], [109.0], [102.0]]
    got = compare_runs(BASE, cand, better=better, max_cv=1.0)  # type: ignore[arg-type]
    lb, lc = np.log([g[0] for g in BASE]), np.log([g[0] for g in cand])
    ref = sps.ttest_ind(lc, lb, equal_var=False, alternative="greater" if better == "lower" else "less")
    assert got.p_value == pytest.approx(ref.pvalue, rel=1e-9)
    low, high = sps.ttest_ind(lc, lb, equal_var=False).confidence_interval(0.95)
    assert got.ci == pytest.approx((math.exp(low), math.exp(high)), rel=1e-9)
    assert got.ratio == pytest.approx(math.exp(lc.mean() - lb.mean()), rel=1e-12)
    assert got.verdict == ("regression" if better == "lower" else "improvement")


def test_body_with_a_noisier_baseline() -> None:
    base = [[96.0], [104.0], [99.0], [103.0], [97.0], [101.0]]
    cand = [[100.0], [100.4], [99.8], [100.2]]
    got = compare_runs(base, cand, max_cv=1.0)
    ref = sps.ttest_ind(np.log([g[0] for g in cand]), np.log([g[0] for g in base]), equal_var=False)
    assert got.ci == pytest.approx(tuple(math.exp(x) for x in ref.confidence_interval(0.95)), rel=1e-9)


@pytest.mark.parametrize(
    ("better", "shift", "verdict", "p_value"),
    [
        ("lower", 1.1, "regression", 0.0),
        ("lower", 0.9, "improvement", 1.0),
        ("lower", 1.0, "equivalent", 1.0),
        ("lower", 1.01, "equivalent", 0.0),  # surely worse, but surely by less than min_effect
        ("higher", 1.1, "improvement", 1.0),
        ("higher", 0.9, "regression", 0.0),
        ("higher", 1.0, "equivalent", 1.0),
    ],
)
def test_identical_process_medians_are_exact(better: str, shift: float, verdict: str, p_value: float) -> None:
    base = [[10.0, 10.0, 10.0]] * 4
    got = compare_runs(base, [[10.0 * shift] * 3] * 4, better=better, resamples=0)  # type: ignore[arg-type]
    assert (got.verdict, got.p_value) == (verdict, p_value)
    assert got.reason == _body_reason(verdict, got.ci, 0.02)
    assert got.ratio == pytest.approx(shift, rel=1e-12)
    assert got.ci == pytest.approx((shift, shift), rel=1e-12)


def test_higher_is_better_bounds_the_worse_side_of_the_interval() -> None:
    # alpha so small that nothing is significant: the verdict comes from the interval alone
    clearly_up = [[105.0], [106.0], [104.0], [105.5], [104.5]]
    got = compare_runs(BASE, clearly_up, better="higher", alpha=1e-12)
    assert got.verdict == "equivalent"  # +5% throughput: the interval excludes being 2% worse
    assert got.ci[0] > 1.03
    wide = [[96.0], [104.0], [100.0], [97.0], [103.0]]
    got = compare_runs(BASE, wide, better="higher", alpha=1e-12, max_cv=1.0)
    assert got.ci[0] < 1 / 1.02 < 1.02 < got.ci[1]
    assert got.verdict == "inconclusive"


def test_a_big_but_not_significant_change_is_not_an_improvement() -> None:
    faster = [[90.0], [92.0], [89.0], [91.0], [90.5]]
    got = compare_runs(BASE, faster, alpha=1e-12)
    assert got.ratio < 0.92
    assert got.verdict == "equivalent"


def test_defaults_and_shared_fields_reach_every_answer() -> None:
    got = compare_runs(BASE, BASE)
    assert (got.better, got.min_effect, got.tail_factor, got.unit) == ("lower", 0.02, 1.5, "")
    one = compare_runs([[5.0, 6.0]], BASE, better="higher", min_effect=0.1, tail_factor=3.0, unit="img/s")
    assert (one.better, one.min_effect, one.tail_factor, one.unit) == ("higher", 0.1, 3.0, "img/s")
    assert one.verdict == "inconclusive"
    assert (one.ratio, one.ci, one.p_value) == (None, None, None)
    assert one.reason == "too few processes: baseline has 1, need at least 3"


def test_every_validity_problem_is_named() -> None:
    got = compare_runs([[5.0]], [[6.0]])
    assert got.reason == (
        "too few processes: baseline has 1, need at least 3; too few processes: candidate has 1, need at least 3"
    )
    got = compare_runs([[5.0], [5.1]], BASE, baseline_cv=0.2)
    assert got.reason.startswith("too few processes: baseline has 2, need at least 3")
    got = compare_runs(BASE, [[1.0], [1.5], [2.0]], baseline_cv=0.2)
    assert got.reason == (
        "baseline run fluctuates too much: CV of process medians 20.0% > 5%; "
        "candidate run fluctuates too much: CV of process medians 33.3% > 5% "
        "(max_cv; more processes, a quieter runner, or a higher max_cv)"
    )
    hinted = compare_runs(BASE, [[1.0], [1.5], [2.0]], max_cv=0.075, noise_hint="--max-cv of the test")
    assert (
        hinted.reason == "candidate run fluctuates too much: CV of process medians 33.3% > 7.5% (--max-cv of the test)"
    )
    at_the_bound = compare_runs(BASE, BASE, baseline_cv=0.05, candidate_cv=0.05, max_cv=0.05)
    assert at_the_bound.verdict == "equivalent"


def test_two_processes_each_give_an_interval_but_too_few_for_a_verdict() -> None:
    got = compare_runs([[100.0], [101.0]], [[110.0], [111.0]])
    assert got.verdict == "inconclusive"
    assert got.ratio is not None
    assert got.ci is not None
    for base, cand in (([[100.0]], BASE), (BASE, [[100.0]])):
        one = compare_runs(base, cand)
        assert (one.ratio, one.ci) == (None, None)


def test_body_and_tail_each_get_half_of_alpha(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, float] = {}
    body, tail = compare._body, compare.tail_test

    def spy_body(b, c, better, alpha, min_effect):  # type: ignore[no-untyped-def]
        seen["body"] = alpha
        return body(b, c, better, alpha, min_effect)

    def spy_tail(b, c, **kw):  # type: ignore[no-untyped-def]
        seen["tail"] = kw["alpha"]
        return tail(b, c, **kw)

    monkeypatch.setattr(compare, "_body", spy_body)
    monkeypatch.setattr(compare, "tail_test", spy_tail)
    compare_runs(BASE, BASE, alpha=0.01)
    assert seen == {"body": 0.005, "tail": 0.005}


def test_input_errors_exactly() -> None:
    with pytest.raises(ValueError, match=r"^baseline and candidate need at least one non-empty process each$"):
        compare_runs([], BASE)
    with pytest.raises(ValueError, match="^" + re.escape("samples must be positive (times, rates, sizes)") + "$"):
        compare_runs(BASE, [[1.0], [0.0]])
    small = compare_runs([[0.5], [0.51], [0.49]], [[0.5], [0.5], [0.5]])  # below 1 is fine
    assert small.verdict in ("equivalent", "inconclusive")


def test_p99_intervals_follow_resamples() -> None:
    runs = [[float(x) for x in range(1, 101)]] * 4
    none = compare_runs(runs, runs, resamples=0)
    assert (none.p99_baseline_ci, none.p99_candidate_ci) == (None, None)
    some = compare_runs(runs, runs, resamples=200)
    assert some.p99_baseline_ci is not None
    assert some.p99_candidate_ci is not None


def test_process_cv_exactly() -> None:
    assert process_cv([[5.0, 6.0, 7.0]]) == 0.0
    assert process_cv([[1.0], [3.0]]) == pytest.approx(math.sqrt(2) / 2)
    assert process_cv([[1.0], [3.0], [2.0]]) == pytest.approx(0.5)


def test_theil_sen_exactly() -> None:
    assert theil_sen_slope([0, 1, 2], [0, 2, 4])[0] == pytest.approx(2.0)
    with pytest.raises(ValueError, match=r"^theil_sen_slope needs at least 3 paired points$"):
        theil_sen_slope([0, 1], [0, 2])
    with pytest.raises(ValueError, match=r"^theil_sen_slope needs at least 3 paired points$"):
        theil_sen_slope([0, 1, 2], [0, 2])
    x, y = [0.0, 1.0, 5.0, 6.0, 9.0, 10.0], [0.0, 2.5, 9.0, 13.0, 17.0, 21.0]
    ref = sps.theilslopes(y, x, alpha=0.5)
    assert theil_sen_slope(x, y, confidence=0.5) == pytest.approx((ref.slope, ref.low_slope, ref.high_slope))
    default = sps.theilslopes(y, x, alpha=0.95)
    assert theil_sen_slope(x, y) == pytest.approx((default.slope, default.low_slope, default.high_slope))
