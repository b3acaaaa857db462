"""Soak in CI (issue 17): the default throughput-decay and memory-growth gates judge a soak run."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from gatekeeper.contract.metric_points import SKIPPED
from gatekeeper.contract.stage_report import Metric
from gatekeeper.contract.verdict import Outcome
from gatekeeper.evaluate.decide import Inputs, evaluate
from gatekeeper.evaluate.gates import load_gates
from tests.support.builders import env, report

ROOT = Path(__file__).resolve().parents[2]


def judged(metrics: dict[str, Metric], device_kind: str = "rocm") -> dict[str, tuple[Outcome, str]]:
    gates = load_gates(ROOT / "gates.yaml")
    perf = report("performance_baseline", metrics, environment=env(device_kind=device_kind))
    v = evaluate(
        Inputs(gates=gates, reports={"performance_baseline": perf}, channel="stable", today=dt.date(2026, 12, 3))
    )
    return {g.name: (g.outcome, g.reason) for g in v.gates if g.name in ("throughput-decay", "memory-growth")}


@pytest.mark.parametrize(("decay", "outcome"), [(0.01, Outcome.PASS), (0.07, Outcome.WARN), (0.2, Outcome.FAIL)])
def test_throughput_decay_gate(decay: float, outcome: Outcome) -> None:
    got = judged({"throughput_decay": Metric.of(decay, "ratio", "lower")})
    assert got["throughput-decay"][0] is outcome


def test_memory_growth_gate_on_the_lower_bound_of_the_slope() -> None:
    leak = {"memory_growth_mb_per_hour.ci_low": Metric.of(80.0, "MB/h", "lower")}
    assert judged(leak)["memory-growth"][0] is Outcome.FAIL
    flat = {"memory_growth_mb_per_hour.ci_low": Metric.of(-3.0, "MB/h", "lower")}
    assert judged(flat)["memory-growth"][0] is Outcome.PASS


def test_no_soak_is_skipped_with_the_reason() -> None:
    got = judged({"latency_ms": Metric.of(5.0, "ms", "lower")})
    assert got["throughput-decay"][0] is Outcome.SKIPPED
    assert "reported no metric 'throughput_decay'" in got["throughput-decay"][1]
    short = {"throughput_decay": Metric.of(None, "ratio", "lower", description=f"{SKIPPED}only 1 soak window(s)")}
    assert "only 1 soak window(s)" in judged(short)["throughput-decay"][1]
    # on a shared CPU runner the neighbours' load reads as decay: the gate says it does not apply
    cpu = judged({"throughput_decay": Metric.of(0.2, "ratio", "lower")}, device_kind="cpu")
    assert cpu["throughput-decay"][0] is Outcome.SKIPPED
    assert "device_kind is rocm or cuda" in cpu["throughput-decay"][1]
