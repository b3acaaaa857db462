"""Sweep points as metrics (``latency_ms[batch_size=4,dtype=bfloat16]``) and gates on ``metric[*]``."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from gatekeeper.contract.metric_points import SKIPPED, pattern_error, point_label, point_name, points_of, split_point
from gatekeeper.contract.stage_report import Metric
from gatekeeper.contract.verdict import Outcome, Verdict
from gatekeeper.core.errors import InputError
from gatekeeper.evaluate.decide import Inputs, evaluate
from gatekeeper.evaluate.gates import parse_gates
from gatekeeper.evaluate.outputs import to_junit, to_markdown, to_metrics_txt
from gatekeeper.evaluate.point_gates import split_results, sweep_tables
from tests.support.builders import report

TODAY = dt.date(2026, 12, 2)
POINTS = [{"batch_size": b, "dtype": d} for b in ("1", "16") for d in ("float32", "bfloat16")]


# ---------------------------------------------------------------- names


def test_point_names_sort_keys_and_read_back():
    name = point_name("latency_ms", {"dtype": "bfloat16", "batch_size": 4})
    assert name == "latency_ms[batch_size=4,dtype=bfloat16]"
    assert split_point(name) == ("latency_ms", {"batch_size": "4", "dtype": "bfloat16"}, "")
    assert split_point(name + ".p99") == ("latency_ms", {"batch_size": "4", "dtype": "bfloat16"}, ".p99")
    assert split_point("latency_ms") is None
    assert split_point("latency_ms[batch_size]") is None
    assert split_point("latency_ms[a=1,a=2]") is None
    assert point_label({}) == ""
    for bad in ({"Batch": 1}, {"dtype": "a,b"}, {"dtype": "x]"}, {"k": "a=b"}):
        with pytest.raises(ValueError, match="point"):
            point_label(bad)


def test_points_of_a_pattern_in_natural_order():
    names = [point_name("latency_ms", p) for p in POINTS] + ["latency_ms", "throughput[batch_size=1,dtype=float32]"]
    names += [point_name("latency_ms", POINTS[0], ".p99")]
    got = points_of("latency_ms[*]", names)
    assert [label for _, label in got] == [
        "[batch_size=1,dtype=bfloat16]",
        "[batch_size=1,dtype=float32]",
        "[batch_size=16,dtype=bfloat16]",  # 16 after 1 and, as a number, after 2 had it been there
        "[batch_size=16,dtype=float32]",
    ]
    assert got[0][0] == "latency_ms[batch_size=1,dtype=bfloat16]"
    assert points_of("latency_ms[*].p99", names)[0][0] == "latency_ms[batch_size=1,dtype=bfloat16].p99"
    assert [n for n, _ in points_of("x[*]", ["x[batch_size=2]", "x[batch_size=10]"])] == [
        "x[batch_size=2]",
        "x[batch_size=10]",
    ]


@pytest.mark.parametrize(
    ("metric", "ok"),
    [
        ("performance_baseline.latency_ms[*]", True),
        ("performance_baseline.latency_ms[*].p99", True),
        ("performance_baseline.latency_ms[batch_size=4]", True),
        ("performance_baseline.latency_ms", True),
        ("performance_baseline.latency_ms[*][*]", False),
        ("performance_baseline.[*]", False),
        ("performance_baseline.latency_ms[*]x", False),
        ("performance_baseline.latency_ms[batch_size]", False),
        ("performance_baseline.latency_ms[4", False),
    ],
)
def test_gate_metric_patterns_are_checked_when_gates_load(metric, ok):
    assert (pattern_error(metric) is None) is ok
    doc = {"version": 1, "gates": {"g": {"metric": metric, "pass": "<= 5"}}}
    if ok:
        assert parse_gates(doc).gates[0].metric == metric
    else:
        with pytest.raises(InputError, match=r"gates\.g\.metric"):
            parse_gates(doc)


# ---------------------------------------------------------------- evaluate


def perf(values: dict[str, float], samples: dict[str, list[list[float]]] | None = None, extra=None):
    metrics: dict[str, Metric] = {}
    for label, value in values.items():
        metrics[f"latency_ms{label}"] = Metric.of(value, "ms", "lower", (samples or {}).get(label))
    metrics.update(extra or {})
    return report("performance_baseline", metrics)


def labels():
    return [point_label(p) for p in POINTS]


def run(gates: dict, cand, base=None, channel="stable", waivers=None):
    g = parse_gates({"version": 1, "gates": gates, **({"waivers": waivers} if waivers else {})})
    return evaluate(
        Inputs(
            gates=g,
            reports={"performance_baseline": cand},
            baselines={"performance_baseline": base} if base is not None else {},
            channel=channel,
            today=TODAY,
        )
    )


def test_a_2x2_sweep_gives_four_points_and_a_star_gate_judges_each():
    values = dict(zip(labels(), (5.0, 4.0, 30.0, 41.0), strict=True))  # [16,bfloat16] too slow
    v = run({"sweep-latency": {"metric": "performance_baseline.latency_ms[*]", "pass": "<= 40"}}, perf(values))
    assert [g.name for g in v.gates] == [f"sweep-latency{label}" for label in sorted(labels(), key=_natural)]
    by_name = {g.name: g for g in v.gates}
    bad = by_name["sweep-latency[batch_size=16,dtype=bfloat16]"]
    assert bad.outcome is Outcome.FAIL
    assert bad.metric == "performance_baseline.latency_ms[batch_size=16,dtype=bfloat16]"
    assert "41" in bad.reason
    assert sum(g.outcome is Outcome.PASS for g in v.gates) == 3
    assert v.result == "blocked"
    assert "sweep-latency[batch_size=16,dtype=bfloat16]" in v.summary


def _natural(label: str):
    return (int(split_point("x" + label)[1]["batch_size"]), split_point("x" + label)[1]["dtype"])


def runs(seed: int, shift: float = 1.0, processes: int = 6):
    rng = np.random.default_rng(seed)
    return [
        [float(x) for x in 10.0 * shift * np.exp(rng.normal(0, 0.01) + rng.normal(0, 0.01, 60))]
        for _ in range(processes)
    ]


def test_baseline_star_gate_uses_the_judge_per_point_with_holm_across_points():
    base_samples = {label: runs(i) for i, label in enumerate(labels())}
    cand_samples = {label: runs(10 + i, shift=1.3 if i == 2 else 1.0) for i, label in enumerate(labels())}

    def med(s):
        return float(np.median([np.median(p) for p in s]))

    base = perf({k: med(s) for k, s in base_samples.items()}, base_samples)
    cand = perf({k: med(s) for k, s in cand_samples.items()}, cand_samples)
    gate = {"metric": "performance_baseline.latency_ms[*]", "compare": "baseline", "pass": "<= +3%", "warn": "<= +10%"}
    v = run({"sweep-latency": gate}, cand, base)
    assert len(v.gates) == 4
    slow = next(g for g in v.gates if g.name == f"sweep-latency{labels()[2]}")
    assert slow.outcome is Outcome.FAIL
    assert slow.comparison["kind"] == "body"
    for g in v.gates:
        assert g.comparison is not None
        assert "p_value_holm" in g.comparison  # Holm ran across the four points
    assert all(g.outcome is Outcome.PASS for g in v.gates if g is not slow)


def test_a_point_the_baseline_had_and_this_run_lacks_is_missing_not_dropped():
    base = perf(dict(zip(labels(), (5.0, 4.0, 40.0, 30.0), strict=True)))
    cand = perf(dict(zip(labels()[:3], (5.0, 4.0, 40.0), strict=True)))
    gate = {"metric": "performance_baseline.latency_ms[*]", "compare": "baseline", "pass": "<= +3%"}
    v = run({"sweep-latency": gate}, cand, base)
    missing = {g.name: g for g in v.gates}[f"sweep-latency{labels()[3]}"]
    assert missing.outcome is Outcome.FAIL  # on_missing defaults to fail
    assert "reported no metric" in missing.reason


def test_a_skipped_point_says_why():
    why = "int8: dynamic quantization has CPU kernels only; this device is rocm"
    skipped = Metric.of(None, "ms", "lower", description=f"{SKIPPED}{why}")
    cand = perf({labels()[0]: 5.0}, extra={"latency_ms[batch_size=1,dtype=int8]": skipped})
    v = run({"s": {"metric": "performance_baseline.latency_ms[*]", "pass": "<= 40", "on_missing": "warn"}}, cand)
    r = {g.name: g for g in v.gates}["s[batch_size=1,dtype=int8]"]
    assert r.outcome is Outcome.WARN
    assert why in r.reason


def test_no_sweep_in_the_run_follows_on_missing_and_says_so():
    cand = report("performance_baseline", {"latency_ms": (5.0, "ms", "lower")})
    v = run({"s": {"metric": "performance_baseline.latency_ms[*]", "pass": "<= 40", "on_missing": "skip"}}, cand)
    assert [(g.name, g.outcome) for g in v.gates] == [("s", Outcome.SKIPPED)]
    assert "measured no sweep" in v.gates[0].reason
    v = run({"s": {"metric": "performance_baseline.latency_ms[*]", "pass": "<= 40"}}, cand)
    assert v.gates[0].outcome is Outcome.FAIL  # fail closed by default


def test_a_waiver_and_channel_override_of_the_star_gate_cover_every_point():
    values = dict(zip(labels(), (50.0, 50.0, 50.0, 5.0), strict=True))
    gates = {"s": {"metric": "performance_baseline.latency_ms[*]", "pass": "<= 40"}}
    waiver = [{"gate": "s", "reason": "known slow", "owner": "perf", "expires": "2027-01-01"}]
    v = run(gates, perf(values), waivers=waiver)
    assert [g.outcome for g in v.gates].count(Outcome.WAIVED) == 3
    assert v.result == "pass"
    g = parse_gates({"version": 1, "gates": gates, "channels": {"nightly": {"s": {"severity": "advisory"}}}})
    v = evaluate(Inputs(gates=g, reports={"performance_baseline": perf(values)}, channel="nightly", today=TODAY))
    assert v.result == "warn"
    assert all(r.severity == "advisory" for r in v.gates)


# ---------------------------------------------------------------- one table


def verdict_2x2() -> Verdict:
    values = dict(zip(labels(), (5.0, 4.0, 30.0, 41.0), strict=True))  # [16,bfloat16] too slow
    extra = {f"throughput{label}": Metric.of(100.0, "items/s", "higher") for label in labels()}
    gates = {
        "plain": {"metric": "performance_baseline.latency_ms[batch_size=1,dtype=float32]", "pass": "<= 40"},
        "sweep-latency": {"metric": "performance_baseline.latency_ms[*]", "pass": "<= 40"},
        "sweep-throughput": {"metric": "performance_baseline.throughput[*]", "pass": ">= 50", "severity": "advisory"},
    }
    return run(gates, perf(values, extra=extra))


def test_the_sweep_is_one_table_in_the_verdict_markdown():
    v = verdict_2x2()
    plain, points = split_results(v.gates)
    assert [g.name for g in plain] == ["plain"]
    tables = sweep_tables(points)
    assert len(tables) == 1
    assert tables[0].keys == ("batch_size", "dtype")
    assert tables[0].gates == ("sweep-latency", "sweep-throughput")
    assert len(tables[0].rows) == 4
    md = to_markdown(v)
    assert "**Sweep** (4 points of batch_size, dtype" in md
    assert "| batch_size | dtype | sweep-latency | sweep-throughput (advisory) |" in md
    assert "| 16 | bfloat16 | **❌ fail 41 ms** | ✅ pass 100 items/s |" in md
    assert "| plain |" in md
    gate_table = md.split("| gate | outcome |")[1].split("**Sweep**")[0]
    assert "sweep-latency" not in gate_table  # no per-point rows in the gate table
    assert "- `sweep-latency[batch_size=16,dtype=bfloat16]` ❌ fail:" in md
    # every point is still its own JUnit case and metrics line
    assert b'name="sweep-latency[batch_size=16,dtype=bfloat16]"' in to_junit(v)
    assert "gate_sweep_latency_batch_size_16_dtype_bfloat16_ 41" in to_metrics_txt(v)
    # and survives the verdict file round trip
    assert Verdict.from_dict(v.to_dict()).gates == v.gates


def test_a_sweep_is_compared_only_with_the_same_sweep():
    import dataclasses

    from gatekeeper.history import comparability

    single = report("performance_baseline", {"latency_ms": (5.0, "ms", "lower")})
    axes = {"batch_size": ["1", "16"], "dtype": ["float32", "bfloat16"]}
    sweep = dataclasses.replace(single, config={**single.config, "sweep": axes})
    assert comparability(single, single) is None
    assert comparability(sweep, dataclasses.replace(single, config={**single.config, "sweep": dict(axes)})) is None
    assert "sweep" in comparability(single, sweep)
    other = dataclasses.replace(single, config={**single.config, "sweep": {"batch_size": ["1"]}})
    assert "sweep" in comparability(sweep, other)


@pytest.mark.parametrize("name", ["latency_ms[dtype=float32\n]", "latency_ms[dtype=float32]\n", "latency_ms[k\n=v]"])
def test_a_point_name_with_a_final_newline_is_not_a_point(name: str) -> None:
    """Each shape is matched whole (``fullmatch``): ``$`` alone also matches before a final newline."""
    assert split_point(name) is None


@pytest.mark.parametrize(("key", "value"), [("dtype", "float32\n"), ("dtype\n", "float32")])
def test_a_point_key_or_value_with_a_final_newline_is_refused(key: str, value: str) -> None:
    with pytest.raises(ValueError, match="point"):
        point_label({key: value})
