"""evaluate's judge on a run that sampled processes sequentially: it replays the stopping rule on the recorded
looks (a fixed-sample test on data that stopped when it looked decided would over-alarm) and the verdict
says how many processes ran and why the run stopped."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from gatekeeper.contract.stage_report import Metric
from gatekeeper.contract.verdict import Outcome
from gatekeeper.evaluate.decide import Inputs, evaluate
from gatekeeper.evaluate.gates import parse_gates
from tests.support.builders import report

GATES = {
    "latency-median": {"metric": "performance_baseline.latency_ms", "compare": "baseline", "pass": "<= +3%"},
    "p99-latency": {"metric": "performance_baseline.latency_ms.p99", "compare": "baseline", "pass": "<= +20%"},
}
BASE = [[m] * 30 for m in (99.0, 100.0, 101.0, 100.5, 99.5, 100.2, 99.8, 100.0, 101.2, 98.8)]
SPREAD = (97.0, 103.0, 100.0, 104.0, 96.0, 102.0, 98.0)


def _perf(groups: list[list[float]], sequential: dict[str, Any] | None = None):
    ms = {"latency_ms": Metric.of(100.0, "ms", "lower", groups)}
    r = report("performance_baseline", ms)
    return dataclasses.replace(r, summary={"sequential": sequential}) if sequential else r


def _record(looks: list[list[int]], stopped: str = "decided", *, sequential: bool = True) -> dict[str, Any]:
    plan = {"max_processes": 20, "min_effect": 0.03, "detect": 0.06, "power": 0.9, "alpha": 0.01}
    return {"metric": "latency_ms", "sequential": sequential, "looks": looks, "plan": plan, "stopped": stopped}


def _verdict(cand):
    inputs = Inputs(
        gates=parse_gates({"version": 1, "gates": GATES}),
        reports={"performance_baseline": cand},
        baselines={"performance_baseline": _perf(BASE)},
        channel="stable",
        today=dt.date(2026, 12, 2),
    )
    return {r.name: r for r in evaluate(inputs).gates}


def test_a_run_that_peeked_is_judged_by_the_always_valid_rule_not_the_fixed_test() -> None:
    cand = [[m * 1.06] * 30 for m in SPREAD]  # +6%: the fixed-sample Welch test calls it a regression (p=0.001)
    fixed = _verdict(_perf(cand))["latency-median"]
    assert fixed.outcome is Outcome.FAIL
    looked = _verdict(_perf(cand, _record([[10, 5], [10, 6], [10, 7]], "the budget of 20 processes ran out")))
    r = looked["latency-median"]
    assert r.outcome is Outcome.INCONCLUSIVE  # after three looks, the evidence is not enough
    c = r.comparison
    assert c["sequential"] is True
    assert c["looks"] == [[10, 5], [10, 6], [10, 7]]
    assert c["processes"] == 7
    assert c["baseline_processes"] == 10
    assert c["stopped"] == "the budget of 20 processes ran out"
    assert c["ci_label"] == "99% always-valid CI"
    assert c["p_value"] > fixed.comparison["p_value"]
    assert "99% always-valid CI" in r.reason
    assert "7 processes against 10, stopped: the budget of 20 processes ran out" in r.reason


def test_a_clear_sequential_regression_fails_and_says_when_it_stopped() -> None:
    cand = [[m * 1.12] * 30 for m in SPREAD]
    v = _verdict(_perf(cand, _record([[10, 5], [10, 6], [10, 7]])))
    r = v["latency-median"]
    assert r.outcome is Outcome.FAIL
    assert r.comparison["verdict"] == "regression"
    assert r.comparison["p_value"] < 0.005
    assert "7 processes against 10, stopped: decided" in r.reason
    assert v["p99-latency"].comparison["sequential"] is True  # the tail gate reads the same replayed body


def test_records_that_do_not_apply_or_do_not_match() -> None:
    cand = [[m * 1.06] * 30 for m in SPREAD]
    fixed_run = _verdict(_perf(cand, _record([[10, 7]], "no baseline to decide against", sequential=False)))
    r = fixed_run["latency-median"]
    assert r.outcome is Outcome.FAIL  # a fixed number of processes: the fixed-sample test is valid
    assert "sequential" not in r.comparison
    assert r.comparison["stopped"] == "no baseline to decide against"
    assert "stopped: no baseline to decide against" in r.reason
    other = dict(_record([[10, 3]]), metric="throughput")
    assert "sequential" not in _verdict(_perf(cand, other))["latency-median"].comparison
    wrong = _verdict(_perf(cand, _record([[10, 5], [10, 6]])))["latency-median"]  # 7 processes judged
    assert wrong.comparison["looks"] == [[10, 7]]
    assert "judged as a single look" in wrong.comparison["stopped"]


def test_a_baseline_that_grew_with_the_candidate_is_replayed_on_its_own_counts() -> None:
    # a bisection: both sides grew round by round, several sampled metrics at once (``metrics``)
    cand = [[m * 1.12] * 30 for m in SPREAD]
    base = BASE[:7]
    plan = {"max_processes": 15, "power": 0.9, "baseline_grows": True}
    record = {"sequential": True, "metrics": {"latency_ms": [[3, 3], [6, 6], [7, 7]]}, "plan": plan}
    inputs = Inputs(
        gates=parse_gates({"version": 1, "gates": GATES}),
        reports={"performance_baseline": _perf(cand, record)},
        baselines={"performance_baseline": _perf(base)},
        channel="stable",
        today=dt.date(2026, 12, 2),
    )
    r = {g.name: g for g in evaluate(inputs).gates}["latency-median"]
    assert r.outcome is Outcome.FAIL
    assert r.comparison["sequential"] is True
    assert r.comparison["looks"] == [[3, 3], [6, 6], [7, 7]]  # the baseline's own count at every look
    # the same samples judged at one look spend less: a smaller always-valid p-value than after three looks
    one = dict(record, metrics={"latency_ms": [[7, 7]]})
    inputs_one = dataclasses.replace(inputs, reports={"performance_baseline": _perf(cand, one)})
    single = {g.name: g for g in evaluate(inputs_one).gates}["latency-median"]
    assert single.comparison["p_value"] < r.comparison["p_value"]


def test_hostile_or_mismatched_looks_are_one_look_not_a_crash() -> None:
    cand = [[m * 1.06] * 30 for m in SPREAD]
    plan = {"max_processes": 20, "baseline_grows": True}
    for looks in (
        [[10, 5], [11, 6], [10, 7]],
        [[10, 5], [9, 7]],
        [["10", 7]],
        [[True, 7]],
        "x",
        [[10, 7, 1]],
        [[-1, 7]],
    ):
        record = {"sequential": True, "metric": "latency_ms", "looks": looks, "plan": plan}
        r = _verdict(_perf(cand, record))["latency-median"]
        assert r.comparison["looks"] == [[10, 7]], looks
        assert "judged as a single look" in r.comparison["stopped"]
