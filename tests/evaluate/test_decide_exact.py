"""evaluate(), exactly: every gate's outcome and reason in one rich scenario, and the verdict's fields
(written against surviving mutants: a changed reason, count, fact or field in decide.py must fail a test)."""

from __future__ import annotations

import dataclasses

import pytest

from gatekeeper.contract.stage_report import Metric
from gatekeeper.core.ci_context import PipelineContext
from gatekeeper.evaluate.decide import evaluate, fmt
from tests.evaluate._decide_scenario import scenario
from tests.support.builders import env, report

EXPECTED = [
    (
        "cov",
        "warn",
        "functional_test.op_pass_rate = 0.93 misses >= 0.95 but meets the warn rule >= 0.90",
        0.93,
        "ratio",
    ),
    (
        "cov-fail",
        "fail",
        "functional_test.op_pass_rate = 0.93 fails >= 0.99; the waiver (old) expired on 2026-11-30",
        0.93,
        "ratio",
    ),
    ("prec", "fail", "functional_test.max_rel_error = 0.0002 fails <= 1e-4", 0.0002, "ratio"),
    (
        "checks",
        "fail",
        "functional_test.checks.failed = 1 checks fails == 0; not passing: b; 1 failing checks are not waived (e.g. b)",
        1.0,
        "checks",
    ),
    (
        "waived-whole",
        "waived",
        "waived (known; owner ann, until 2026-12-31): functional_test.checks.failed = 3 checks fails == 0; "
        "not passing: a1, a2, b",
        3.0,
        "checks",
    ),
    ("lat", "pass", "performance_baseline.latency_ms = 10.4 ms (+4.0% vs baseline 10 ms) meets <= +5%", 10.4, "ms"),
    ("nobase", "warn", "no comparable baseline: the store has none (on_missing: warn)", None, ""),
    ("ju", "fail", "r/*.xml pass_rate = 0.75 fails >= 1; not passing: t1", 0.75, "ratio"),
    ("ju-tests", "pass", "q/*.xml tests = 3 tests meets >= 1", 3.0, "tests"),
    ("ju-none", "skipped", "no JUnit file matches 'none/*.xml' (on_missing: skip)", None, ""),
    ("ju-empty", "fail", "no test ran in e/a.xml (on_missing: fail)", None, ""),
    ("gfx", "skipped", "not evaluated: applies only when gfx_arch is gfx942 (this run: gfx90a)", None, ""),
    ("gfx-ok", "pass", "functional_test.op_pass_rate = 0.93 meets >= 0", 0.93, "ratio"),
    ("envc", "pass", "functional_test.op_pass_rate = 0.93 meets >= 0", 0.93, "ratio"),
    ("skipsel", "skipped", "not evaluated: stage verify_hip was not selected", None, ""),
    ("shadow", "fail", "functional_test.op_pass_rate = 0.93 fails >= 0.99", 0.93, "ratio"),
]


def test_every_gate_of_a_rich_scenario_exactly():
    v = evaluate(scenario())
    got = [(g.name, g.outcome.value, g.reason, g.value, g.unit) for g in v.gates]
    assert got == EXPECTED
    assert v.result == "blocked"
    assert v.summary == "Blocked by 4 of 13 gates: cov-fail, checks, ju, ju-empty."
    lat = next(g for g in v.gates if g.name == "lat")
    assert lat.baseline_value == 10.0
    assert lat.change == pytest.approx(0.04)
    assert [(w.stage, w.check, w.status, w.message) for w in v.waived_checks] == [
        ("functional_test", "a1", "failed", "boom 1"),
        ("functional_test", "a2", "error", "boom 2"),
    ]
    assert v.waived_checks[0].waiver["owner"] == "bob"
    assert v.expired_waivers == (
        {"gate": "cov-fail", "reason": "old", "owner": "cy", "ticket": "", "expires": "2026-11-30", "checks": [],
         "message": "waiver for cov-fail (cy) expired on 2026-11-30; it no longer applies"},
    )  # fmt: skip
    assert v.stages == {"functional_test": "passed", "performance_baseline": "passed", "compatibility_check": "passed"}
    assert v.environment["gfx_arch"] == "gfx90a:sramecc+:xnack-"
    assert v.gates_file == "gates.yaml"
    assert [g.name for g in v.blocking_gates] == ["cov-fail", "checks", "ju", "ju-empty"]
    assert {g.name for g in v.warning_gates} == {"cov", "prec", "nobase"}


def test_a_waiver_that_covers_every_failing_check_waives_the_gate():
    from gatekeeper.evaluate.gates import parse_gates

    doc = {
        "version": 1,
        "gates": {"cov": {"metric": "functional_test.op_pass_rate", "pass": ">= 0.99"}},
        "waivers": [{"gate": "cov", "checks": ["a*", "b"], "reason": "flaky", "owner": "bob", "expires": "2026-12-31"}],
    }
    v = evaluate(dataclasses.replace(scenario(), gates=parse_gates(doc)))
    g = v.gates[0]
    assert g.outcome.value == "waived"
    assert g.reason == (
        "waived: all 3 failing checks are covered (a1, ...; flaky): functional_test.op_pass_rate = 0.93 fails >= 0.99"
    )
    assert g.waiver["owner"] == "bob"
    doc["waivers"][0]["checks"] = ["a*"]
    g = evaluate(dataclasses.replace(scenario(), gates=parse_gates(doc))).gates[0]
    assert (g.outcome.value, g.reason) == (
        "fail",
        "functional_test.op_pass_rate = 0.93 fails >= 0.99; 1 failing checks are not waived (e.g. b)",
    )


def test_a_waiver_whose_condition_is_unmet_does_not_apply():
    inputs = scenario()
    v = evaluate(dataclasses.replace(inputs, environ={**inputs.environ, "NOPE": "1"}))
    assert next(g for g in v.gates if g.name == "prec").outcome.value == "waived"
    v = evaluate(dataclasses.replace(inputs, environ={"NOPE": "1"}))
    assert next(g for g in v.gates if g.name == "envc").outcome.value == "skipped"


def test_integrity_warnings_turn_a_pass_into_warn():
    inputs = scenario()
    gates = dataclasses.replace(inputs.gates, gates=tuple(g for g in inputs.gates.gates if g.name in ("lat", "gfx-ok")))
    v = evaluate(dataclasses.replace(inputs, gates=gates))
    assert (v.result, v.summary) == ("pass", "All 2 evaluated gates passed.")
    v = evaluate(dataclasses.replace(inputs, gates=gates, warnings=("w1", "w2"), provenance={"k": "v"},
                                     baseline_runs={"performance_baseline": {"ref": "main"}}))  # fmt: skip
    assert (v.result, v.summary) == ("warn", "All 2 evaluated gates passed. 2 integrity warning(s): w1")
    assert (v.warnings, dict(v.provenance), dict(v.baselines)) == (
        ("w1", "w2"),
        {"k": "v"},
        {"performance_baseline": {"ref": "main"}},
    )


def test_summary_counts_waived_and_warnings():
    inputs = scenario()
    keep = ("waived-whole", "lat")
    gates = dataclasses.replace(inputs.gates, gates=tuple(g for g in inputs.gates.gates if g.name in keep))
    assert evaluate(dataclasses.replace(inputs, gates=gates)).summary == "All 2 evaluated gates passed (1 waived)."
    gates = dataclasses.replace(
        inputs.gates, gates=tuple(g for g in inputs.gates.gates if g.name in ("cov", "lat", "ju-none"))
    )
    v = evaluate(dataclasses.replace(inputs, gates=gates))
    assert (v.result, v.summary) == ("warn", "Passed with warnings from 1 of 2 gates: cov.")


def test_the_builtin_gpu_gate_exactly():
    inputs = scenario()
    cpu = {k: dataclasses.replace(r, environment=env(device_kind="cpu")) for k, r in inputs.reports.items()}
    required = PipelineContext.from_env({"GATEKEEPER_REQUIRE_DEVICE": "1"})
    v = evaluate(dataclasses.replace(inputs, reports=cpu, context=required))
    g = v.gates[0]
    assert (g.name, g.outcome.value, g.metric, g.rule, g.severity, g.mode, g.blocking) == (
        "gpu-verified", "fail", "environment.device_kind", "in (rocm, cuda)", "blocking", "enforce", True,
    )  # fmt: skip
    assert g.reason == (
        "GATEKEEPER_REQUIRE_DEVICE=1 (a GPU job) but the stages ran on: cpu; nothing was verified on a GPU. "
        "Fix the runner (tags, device nodes) or set device_required: false for a CPU job"
    )
    assert g.description == "Built in: a job meant for a GPU must have run on one."
    mixed = {**cpu, "functional_test": inputs.reports["functional_test"]}
    assert (
        "ran on: cpu, rocm;" in evaluate(dataclasses.replace(inputs, reports=mixed, context=required)).gates[0].reason
    )
    none = evaluate(dataclasses.replace(inputs, reports={}, context=required)).gates[0]
    assert "ran on: no stage ran;" in none.reason
    cuda = {k: dataclasses.replace(r, environment=env(device_kind="cuda")) for k, r in inputs.reports.items()}
    assert evaluate(dataclasses.replace(inputs, reports=cuda, context=required)).gates[0].name != "gpu-verified"
    assert evaluate(dataclasses.replace(inputs, reports=cpu)).gates[0].name != "gpu-verified"


def test_unconverged_warmup_on_either_side_is_inconclusive():
    inputs = scenario()
    samples = [[10.0, 10.1], [10.2, 9.9], [10.0, 10.05]]
    perf = report("performance_baseline", metrics={"latency_ms": Metric.of(10.0, "ms", "lower", samples)})
    bad = report(
        "performance_baseline",
        metrics={
            "latency_ms": Metric.of(10.0, "ms", "lower", samples),
            "warmup_converged": Metric.of(0.0, "bool", "higher"),
        },
    )
    keep = dataclasses.replace(inputs.gates, gates=tuple(g for g in inputs.gates.gates if g.name == "lat"))
    for cand, base, side in ((bad, perf, "this run"), (perf, bad, "the baseline")):
        v = evaluate(dataclasses.replace(inputs, gates=keep, reports={"performance_baseline": cand},
                                         baselines={"performance_baseline": base}))  # fmt: skip
        assert v.gates[0].outcome.value == "inconclusive"
        assert v.gates[0].reason == (
            f"performance_baseline.latency_ms: warm-up did not converge in {side}, so its timings cannot be judged"
        )


def test_a_baseline_without_the_value_and_no_store():
    inputs = scenario()
    keep = dataclasses.replace(inputs.gates, gates=tuple(g for g in inputs.gates.gates if g.name == "lat"))
    empty = report("performance_baseline", metrics={"other": 1.0})
    v = evaluate(dataclasses.replace(inputs, gates=keep, baselines={"performance_baseline": empty}))
    assert v.gates[0].reason.startswith(
        "the baseline has no value: performance_baseline reported no metric 'latency_ms'"
    )
    v = evaluate(dataclasses.replace(inputs, gates=keep, baselines={}, baseline_notes={}))
    assert v.gates[0].reason == "no comparable baseline: no baseline store was given (--baseline) (on_missing: fail)"


def test_junit_gates_bound_their_skips():
    from gatekeeper.contract.junit import JUnitSummary
    from gatekeeper.evaluate.gates import parse_gates

    gates = parse_gates(
        {"version": 1, "gates": {"ju": {"metric": "tests", "junit": "r/*.xml", "pass": ">= 1", "max_skipped": 2}}}
    )
    inputs = dataclasses.replace(scenario(), gates=gates)
    for skipped, outcome in ((2, "pass"), (3, "fail")):
        junit = {"ju": JUnitSummary(("r/a.xml",), tests=5, skipped=skipped)}
        g = evaluate(dataclasses.replace(inputs, junit=junit)).gates[0]
        assert g.outcome.value == outcome
    assert g.reason.startswith(f"3 checks skipped (at most 2 allowed: {3} JUnit tests); r/*.xml tests = 5")
    assert evaluate(dataclasses.replace(inputs, junit={"ju": None})).gates[0].outcome.value == "fail"


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        (None, "", "n/a"),
        (0.0, "ms", "0 ms"),
        (0.000123, "ratio", "0.000123"),
        (12.3456, "ms", "12.35 ms"),
        (5.0, "bool", "5"),
    ],
)
def test_fmt(value, unit, text):
    assert fmt(value, unit) == text


def test_facts_reach_conditions():
    inputs = scenario()
    # gfx-ok's condition names every fact (device_kind, gfx_arch, rocm_version, torch_version, channel)
    assert next(g for g in evaluate(inputs).gates if g.name == "gfx-ok").outcome.value == "pass"
    v = evaluate(dataclasses.replace(inputs, channel="nightly"))
    assert next(g for g in v.gates if g.name == "gfx-ok").outcome.value == "skipped"
