"""Baseline gates over per-process samples: the statistical judge inside evaluate."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from gatekeeper.contract.stage_report import Metric
from gatekeeper.contract.verdict import Outcome
from gatekeeper.evaluate.decide import Inputs, evaluate
from gatekeeper.evaluate.gates import parse_gates
from tests.support.builders import report

GATES = {
    "latency-median": {
        "metric": "performance_baseline.latency_ms",
        "compare": "baseline",
        "pass": "<= +3%",
        "warn": "<= +10%",
    },
    "p99-latency": {"metric": "performance_baseline.latency_ms.p99", "compare": "baseline", "pass": "<= +20%"},
}


def runs(seed: int, *, shift: float = 1.0, spike_rate: float = 0.0, process_noise: float = 0.01, processes: int = 10):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(processes):
        level = 100.0 * shift * np.exp(rng.normal(0, process_noise))
        x = level * np.exp(rng.normal(0, 0.015, 400))
        spikes = rng.random(400) < spike_rate
        x[spikes] *= rng.uniform(2, 4, spikes.sum())
        out.append([float(v) for v in x])
    return out


def perf(samples, **metrics):
    ms = {"latency_ms": Metric.of(float(np.median([np.median(p) for p in samples])), "ms", "lower", samples)}
    ms.update({k: Metric.of(v, "bool", "higher") for k, v in metrics.items()})
    return report("performance_baseline", ms)


def verdict(base, cand):
    g = parse_gates({"version": 1, "gates": GATES})
    inputs = Inputs(
        gates=g,
        reports={"performance_baseline": cand},
        baselines={"performance_baseline": base},
        channel="stable",
        today=dt.date(2026, 12, 2),
    )
    return {r.name: r for r in evaluate(inputs).gates}


def test_same_stack_passes():
    v = verdict(perf(runs(1)), perf(runs(2)))
    assert v["latency-median"].outcome is Outcome.PASS
    assert v["latency-median"].comparison["verdict"] in ("equivalent", "improvement")
    assert v["p99-latency"].outcome is Outcome.PASS


def test_median_regression_fails_with_interval_in_reason():
    v = verdict(perf(runs(1)), perf(runs(2, shift=1.12)))
    r = v["latency-median"]
    assert r.outcome is Outcome.FAIL
    assert r.comparison["verdict"] == "regression"
    assert "95% CI" in r.reason
    assert r.blocking


def test_small_regression_within_warn_rule_warns():
    v = verdict(perf(runs(1)), perf(runs(2, shift=1.06)))
    assert v["latency-median"].outcome is Outcome.WARN


def test_tripled_tail_with_better_mean_is_caught():
    # the field report: the median improves a little, the tail explodes
    v = verdict(perf(runs(1, spike_rate=0.005)), perf(runs(2, shift=0.97, spike_rate=0.04)))
    assert v["latency-median"].outcome is Outcome.PASS
    tail = v["p99-latency"]
    assert tail.outcome is Outcome.FAIL
    assert tail.comparison["tail_verdict"] == "regression"


def test_noisy_run_is_inconclusive_not_failed():
    v = verdict(perf(runs(1)), perf(runs(2, shift=1.05, process_noise=0.2)))
    r = v["latency-median"]
    assert r.outcome is Outcome.INCONCLUSIVE
    assert r.comparison["reason"]


def test_unconverged_warmup_is_inconclusive():
    v = verdict(perf(runs(1)), perf(runs(2, shift=1.5), warmup_converged=0.0))
    assert v["latency-median"].outcome is Outcome.INCONCLUSIVE
    assert "warm-up did not converge in this run" in v["latency-median"].reason


def test_holm_demotes_a_marginal_regression_among_many():
    from gatekeeper.contract.verdict import GateResult
    from gatekeeper.evaluate.judge import holm_adjust

    def body(p):
        return GateResult(
            "g", Outcome.FAIL, "regression", "s.m", comparison={"kind": "body", "p_value": p, "alpha": 0.01}
        )

    out = holm_adjust([body(0.004), body(0.0001), body(0.5)])
    assert out[0].outcome is Outcome.INCONCLUSIVE  # 0.004 * 2 >= 0.005
    assert "Holm" in out[0].reason
    assert out[1].outcome is Outcome.FAIL
    assert out[1].comparison["p_value_holm"] == pytest.approx(0.0003)


def test_noisy_tail_over_the_rule_is_inconclusive_and_says_why_once():
    v = verdict(perf(runs(1, process_noise=0.2)), perf(runs(2, shift=1.4, process_noise=0.2)))
    r = v["latency-median"]
    assert r.outcome is Outcome.INCONCLUSIVE
    assert r.comparison["reason"]
    assert r.reason.count(r.comparison["reason"]) == 1
