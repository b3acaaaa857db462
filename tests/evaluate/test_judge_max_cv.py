"""The noise guard is a gate setting (gates.yaml ``max_cv``): evaluate's judge, fixed-sample and replayed
sequential, uses the gate's value, never 0.05 behind its back and never a value an artifact carries; the schema
bounds it; a merge request that raises it is named a weakening."""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from typing import Any

import pytest

from gatekeeper.contract.stage_report import Metric
from gatekeeper.contract.verdict import Outcome
from gatekeeper.core.errors import InputError
from gatekeeper.evaluate.decide import Inputs, evaluate
from gatekeeper.evaluate.gates import load_gates_text, parse_gates
from gatekeeper.evaluate.gates_diff import differences
from tests.support.builders import report

BASE = [[m] * 30 for m in (99.0, 100.0, 101.0, 100.5, 99.5, 100.2, 99.8, 100.0, 101.2, 98.8)]  # CV 0.8%
# +30%, with process medians that vary by 7.9% (CV): clear beyond noise, but above the default guard of 5%
NOISY = [[130.0 * m] * 30 for m in (0.9, 1.0, 1.1, 0.95, 1.05, 0.92, 1.08)]


def _gates(**extra: Any) -> dict[str, Any]:
    gate = {"metric": "performance_baseline.latency_ms", "compare": "baseline", "pass": "<= +3%", **extra}
    return {"version": 1, "gates": {"latency-median": gate}}


def _perf(groups: list[list[float]], sequential: dict[str, Any] | None = None):
    r = report("performance_baseline", {"latency_ms": Metric.of(100.0, "ms", "lower", groups)})
    return dataclasses.replace(r, summary={"sequential": sequential}) if sequential else r


def _judged(gates: dict[str, Any], cand, channel: str = "stable"):
    inputs = Inputs(
        gates=parse_gates(gates),
        reports={"performance_baseline": cand},
        baselines={"performance_baseline": _perf(BASE)},
        channel=channel,
        today=dt.date(2026, 12, 2),
    )
    return {r.name: r for r in evaluate(inputs).gates}["latency-median"]


def test_a_run_noisier_than_the_default_guard_is_inconclusive_and_the_reason_names_the_setting() -> None:
    r = _judged(_gates(), _perf(NOISY))
    assert r.outcome is Outcome.INCONCLUSIVE
    assert "candidate run fluctuates too much: CV of process medians 7.9% > 5% (max_cv of gate latency-median; " in (
        r.reason
    )
    assert "more processes, a quieter runner, or raise max_cv in gates.yaml)" in r.reason
    assert "\n" not in r.reason
    assert r.comparison["max_cv"] == 0.05


def test_the_gates_max_cv_decides_the_same_run() -> None:
    r = _judged(_gates(max_cv=0.10), _perf(NOISY))
    assert r.outcome is Outcome.FAIL
    assert r.comparison["verdict"] == "regression"
    assert r.comparison["max_cv"] == 0.10
    stricter = _judged(_gates(max_cv=0.02), _perf([[m[0] * 1.3] * 30 for m in BASE]))  # 0.8% < 2%: judged
    assert stricter.outcome is Outcome.FAIL


def _record(looks: list[list[int]], **plan: Any) -> dict[str, Any]:
    planned = {"max_processes": 20, "power": 0.9, **plan}
    return {"metric": "latency_ms", "sequential": True, "looks": looks, "plan": planned, "stopped": "decided"}


def test_a_replayed_sequential_run_is_judged_at_the_gates_max_cv() -> None:
    looks = [[10, 5], [10, 6], [10, 7]]
    default = _judged(_gates(), _perf(NOISY, _record(looks)))
    assert default.outcome is Outcome.INCONCLUSIVE
    assert default.comparison["sequential"] is True
    assert "max_cv of gate latency-median" in default.reason
    loose = _judged(_gates(max_cv=0.10), _perf(NOISY, _record(looks)))
    assert loose.outcome is Outcome.FAIL
    assert loose.comparison["ci_label"] == "99% always-valid CI"


def test_a_recorded_plan_cannot_loosen_the_guard_and_a_different_one_is_named() -> None:
    looks = [[10, 5], [10, 6], [10, 7]]
    # the artifact says its rounds ran under max_cv 0.5: the gate's 0.05 still decides
    r = _judged(_gates(), _perf(NOISY, _record(looks, max_cv=0.5)))
    assert r.outcome is Outcome.INCONCLUSIVE
    assert "the rounds stopped under max_cv 0.5; judged at the gate's 0.05" in r.comparison["stopped"]
    # and a stricter recorded value does not tighten a gate that allows more
    r = _judged(_gates(max_cv=0.10), _perf(NOISY, _record(looks, max_cv=0.05)))
    assert r.outcome is Outcome.FAIL
    assert "judged at the gate's 0.1" in r.comparison["stopped"]
    for hostile in ("0.5", True, None, [0.5]):  # not a number: nothing to name, nothing used
        r = _judged(_gates(), _perf(NOISY, _record(looks, max_cv=hostile)))
        assert r.outcome is Outcome.INCONCLUSIVE
        assert "rounds stopped under" not in r.comparison["stopped"]


@pytest.mark.parametrize(
    ("value", "fragment"),
    [("0", "less than or equal to the minimum of 0"), ("0.9", "greater than the maximum of 0.5"), ("x", "not of type")],
)
def test_the_schema_refuses_a_max_cv_out_of_bounds(value: str, fragment: str) -> None:
    text = (
        "version: 1\ngates:\n  latency-median:\n    metric: performance_baseline.latency_ms\n"
        f"    compare: baseline\n    pass: '<= +3%'\n    max_cv: {value}\n"
    )
    with pytest.raises(InputError) as err:
        load_gates_text(text, "gates.yaml")
    line = err.value.line()
    assert line.startswith("gates.yaml:7:13: gates.latency-median.max_cv: "), line
    assert fragment in line
    assert "\n" not in line


def test_max_cv_is_read_and_defaults_to_five_percent() -> None:
    assert parse_gates(_gates()).gates[0].max_cv == 0.05
    assert parse_gates(_gates(max_cv=0.5)).gates[0].max_cv == 0.5
    assert parse_gates(_gates(max_cv=0.15)).gates[0].max_cv == 0.15


def test_raising_max_cv_in_a_merge_request_is_a_weakening() -> None:
    base = parse_gates(_gates())
    text = "\n".join(differences(base, parse_gates(_gates(max_cv=0.15)), ref="main"))
    assert "gate latency-median: max_cv 0.05 -> 0.15 (weakened)" in text
    text = "\n".join(differences(parse_gates(_gates(max_cv=0.15)), base, ref="main"))
    assert "gate latency-median: max_cv 0.15 -> 0.05" in text
    assert "(weakened)" not in text
    assert differences(base, parse_gates(_gates(max_cv=0.05)), ref="main") == []


def test_a_channel_sets_its_own_max_cv_and_a_raise_there_is_a_weakening() -> None:
    nightly = {**_gates(), "channels": {"nightly": {"latency-median": {"max_cv": 0.10}}}}
    assert _judged(nightly, _perf(NOISY), channel="nightly").outcome is Outcome.FAIL  # judged at 10%
    assert _judged(nightly, _perf(NOISY), channel="stable").outcome is Outcome.INCONCLUSIVE  # the gate's 5%
    text = "\n".join(differences(parse_gates(_gates()), parse_gates(nightly), ref="main"))
    assert text == "channel nightly: gate latency-median: max_cv 0.05 -> 0.1 (weakened)"
    stricter = {**_gates(max_cv=0.10), "channels": {"stable": {"latency-median": {"max_cv": 0.02}}}}
    text = "\n".join(differences(parse_gates(_gates(max_cv=0.10)), parse_gates(stricter), ref="main"))
    assert text == "channel stable: gate latency-median: max_cv 0.1 -> 0.02"
    bad = "channels:\n  nightly:\n    latency-median: {max_cv: 0.9}\n"
    with pytest.raises(
        InputError, match=re.escape("channels.nightly.latency-median.max_cv: 0.9 is greater than the max")
    ):
        load_gates_text(
            "version: 1\ngates:\n  latency-median:\n    metric: performance_baseline.latency_ms\n"
            f"    compare: baseline\n    pass: '<= +3%'\n{bad}",
            "gates.yaml",
        )
