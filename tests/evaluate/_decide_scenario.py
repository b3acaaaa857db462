import datetime as dt

from gatekeeper.contract.junit import JUnitSummary
from gatekeeper.contract.stage_report import Check, Metric
from gatekeeper.core.ci_context import PipelineContext
from gatekeeper.evaluate.decide import Inputs
from gatekeeper.evaluate.gates import parse_gates
from tests.support.builders import report

GATES = {
    "version": 1,
    "gates": {
        "cov": {"metric": "functional_test.op_pass_rate", "pass": ">= 0.95", "warn": ">= 0.90"},
        "cov-fail": {"metric": "functional_test.op_pass_rate", "pass": ">= 0.99"},
        "prec": {"metric": "functional_test.max_rel_error", "pass": "<= 1e-4", "severity": "advisory"},
        "checks": {"metric": "functional_test.checks.failed", "pass": "== 0"},
        "waived-whole": {"metric": "functional_test.checks.failed", "pass": "== 0"},
        "lat": {"metric": "performance_baseline.latency_ms", "compare": "baseline", "pass": "<= +5%"},
        "nobase": {"metric": "compatibility_check.x", "compare": "baseline", "pass": "<= +5%", "on_missing": "warn"},
        "ju": {"metric": "pass_rate", "junit": "r/*.xml", "pass": ">= 1"},
        "ju-tests": {"metric": "tests", "junit": "q/*.xml", "pass": ">= 1"},
        "ju-none": {"metric": "pass_rate", "junit": "none/*.xml", "pass": ">= 1", "on_missing": "skip"},
        "ju-empty": {"metric": "pass_rate", "junit": "e/*.xml", "pass": ">= 1"},
        "gfx": {"metric": "functional_test.op_pass_rate", "pass": ">= 0", "when": {"gfx_arch": "gfx942"}},
        "gfx-ok": {
            "metric": "functional_test.op_pass_rate",
            "pass": ">= 0",
            "when": {
                "gfx_arch": "gfx90a",
                "rocm_version": "6.2.4",
                "torch_version": "2.5.1+rocm6.2",
                "device_kind": "rocm",
                "channel": "stable",
            },
        },
        "envc": {"metric": "functional_test.op_pass_rate", "pass": ">= 0", "when": {"env": {"FLAG": "1"}}},
        "skipsel": {"metric": "verify_hip.device_available", "pass": ">= 1"},
        "shadow": {"metric": "functional_test.op_pass_rate", "pass": ">= 0.99", "mode": "shadow"},
    },
    "waivers": [
        {"gate": "waived-whole", "reason": "known", "owner": "ann", "expires": "2026-12-31", "ticket": "T-1"},
        {
            "gate": "checks",
            "checks": ["functional_test.a*"],
            "reason": "flaky",
            "owner": "bob",
            "expires": "2026-12-31",
        },
        {"gate": "cov-fail", "reason": "old", "owner": "cy", "expires": "2026-11-30"},
        {"gate": "prec", "reason": "envonly", "owner": "dee", "expires": "2026-12-31", "when": {"env": {"NOPE": "1"}}},
    ],
}


def scenario(**kw):
    ft = report(
        "functional_test",
        metrics={"op_pass_rate": 0.93, "max_rel_error": Metric.of(2e-4, "ratio", "lower")},
        checks=[
            Check("a1", "failed", "boom 1"),
            Check("a2", "error", "boom 2"),
            Check("b", "failed", "real"),
            Check("ok", "passed"),
        ],
    )
    perf = report("performance_baseline", metrics={"latency_ms": Metric.of(10.4, "ms", "lower")})
    base = report("performance_baseline", metrics={"latency_ms": Metric.of(10.0, "ms", "lower")})
    compat = report("compatibility_check", metrics={"x": 1.0})
    junit = {
        "ju": JUnitSummary(("r/a.xml",), tests=4, failures=1, failure_names=("t1",)),
        "ju-tests": JUnitSummary(("q/a.xml",), tests=3),
        "ju-none": None,
        "ju-empty": JUnitSummary(("e/a.xml",), tests=0),
    }
    environ = {"FLAG": "1"}
    return Inputs(
        gates=parse_gates(GATES),
        reports={"functional_test": ft, "performance_baseline": perf, "compatibility_check": compat},
        channel="stable",
        today=dt.date(2026, 12, 1),
        context=PipelineContext.from_env(environ),
        baselines={"performance_baseline": base},
        baseline_notes={"compatibility_check": "the store has none"},
        junit=junit,
        environ=environ,
        not_selected=frozenset({"verify_hip"}),
        **kw,
    )
