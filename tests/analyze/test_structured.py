"""The diagnosis from the artifacts (issue 28), on artifacts built in code: categories come from the
stage JSON and the verdict, the root cause wins, a more specific log signature refines a check's
category only where that is allowed, and an artifact without categories leaves the logs to decide."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gatekeeper.analyze import classify_logs, nothing_failed
from gatekeeper.analyze.rules import load_rules
from gatekeeper.cli import main
from gatekeeper.contract.stage_report import Check, Metric, write_stage
from gatekeeper.contract.verdict import GateResult, Outcome, Verdict, write_verdict
from tests.support.builders import report


@pytest.fixture(scope="module")
def rules():
    return load_rules()


def _failed(name: str, message: str, category: str, **details) -> Check:
    return Check(name, "failed", message, 0.1, details=details, category=category, fix=f"fix for {name}")


def _write(tmp_path: Path, reports, gates=(), log: str = "") -> Path:
    art = tmp_path / "art"
    art.mkdir()
    for r in reports:
        write_stage(r, art)
    if gates:
        verdict = Verdict("blocked", "blocked", "stable", tuple(gates))
        write_verdict(verdict, art / "verdict.json")
    if log:
        (art / "job.log").write_text(log)
    return art


def _gate(name: str, metric: str, value=None, **kw) -> GateResult:
    return GateResult(name, Outcome.FAIL, kw.pop("reason", f"{metric} failed"), metric, value=value, **kw)


def test_a_failed_check_decides_with_its_numbers(tmp_path, rules) -> None:
    drift = {"op": "aten::cumsum", "dtype": "float32", "shape": [8, 12], "error": 0.02, "tolerance": 1e-4}
    check = _failed("traced.aten::cumsum", "1 of 1 signatures: drift: ...", "numerical_mismatch", drift=drift)
    ft = report(
        "functional_test",
        {"traced_op_pass_rate": Metric.of(0.9, "ratio", "higher", category="numerical_mismatch")},
        [check],
        status="failed",
    )
    art = _write(tmp_path, [ft], [_gate("model-ops", "functional_test.traced_op_pass_rate", 0.9, rule=">= 1.0")])
    d = classify_logs([], rules=rules, artifacts=art, model=None)
    assert (d.category, d.decided_by, d.confidence) == ("numerical_mismatch", "artifacts", 0.95)
    assert d.failing_check["name"] == "traced.aten::cumsum"
    assert d.blocking_gate["name"] == "model-ops"
    assert "aten::cumsum in float32 at shape [8, 12]: relative error 0.02 against the tolerance 0.0001" in (
        d.explanation
    )
    assert d.remediation[0] == "fix for traced.aten::cumsum"


def test_a_device_signature_in_the_log_refines_a_failed_smoke_kernel(tmp_path, rules) -> None:
    smoke = _failed("smoke.matmul", "worker killed by SIGABRT", "segfault")
    vh = report("verify_hip", {}, [smoke], status="failed")
    log = "HIP error: hipErrorNoBinaryForGpu: Unable to find code object for all current devices!\n"
    d = classify_logs([_write(tmp_path, [vh], log=log) / "job.log"], rules=rules, artifacts=tmp_path / "art")
    assert (d.category, d.decided_by, d.known_issue) == ("no_binary_for_gpu", "rule", "hip-no-binary-for-gpu")
    assert d.failing_check["name"] == "smoke.matmul", "the failing check is still named"
    assert "smoke.matmul" in d.explanation


def test_a_configuration_error_the_stage_reported_is_never_refined(tmp_path, rules) -> None:
    config = Check("stage.config", "error", "--model: cannot import 'x'", category="configuration_error")
    ft = report("functional_test", {}, [config], status="error")
    log = "ImportError: libamdhip64.so.6: cannot open shared object file: No such file or directory\n"
    d = classify_logs([_write(tmp_path, [ft], log=log) / "job.log"], rules=rules, artifacts=tmp_path / "art")
    assert (d.category, d.decided_by) == ("configuration_error", "artifacts")


def test_a_performance_regression_is_never_refined(tmp_path, rules) -> None:
    perf = report(
        "performance_baseline", {"latency_ms": Metric.of(13.0, "ms", "lower", category="performance_regression")}
    )
    gate = _gate(
        "latency-median",
        "performance_baseline.latency_ms",
        13.0,
        unit="ms",
        rule="<= +3%",
        baseline_value=10.0,
        change=0.3,
        comparison={"ci": [1.25, 1.35], "p_value": 1e-5},
    )
    log = "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    art = _write(tmp_path, [perf], [gate], log=log)
    d = classify_logs([art / "job.log"], rules=rules, artifacts=art)
    assert (d.category, d.decided_by) == ("performance_regression", "artifacts")
    assert d.failing_check["source"] == "gate"
    assert "13 ms against the baseline's 10 ms (+30.0%, 95% interval +25.0% to +35.0%, p=1e-05)" in d.explanation


def test_the_root_cause_wins_and_the_rest_is_named(tmp_path, rules) -> None:
    vh = report("verify_hip", {}, [_failed("hygiene.dev_kfd", "/dev/kfd is missing", "device_not_available")])
    ft = report("functional_test", {}, [_failed("basic_math.add", "drift", "numerical_mismatch")])
    art = _write(tmp_path, [vh, ft])
    d = classify_logs([], rules=rules, artifacts=art, model=None)
    assert d.category == "device_not_available"
    assert "Also failed: functional_test/basic_math.add (numerical_mismatch)" in d.explanation
    assert [f["name"] for f in d.findings] == ["hygiene.dev_kfd", "basic_math.add"]


def test_a_gate_without_its_stage_artifact_is_a_configuration_error(tmp_path, rules) -> None:
    vh = report("verify_hip", {"device_available": Metric.of(1.0, "bool", "higher", category="device_not_available")})
    gate = _gate(
        "operator-coverage",
        "functional_test.op_pass_rate",
        reason="no functional_test.json in the artifacts (the stage did not run, or died before writing it)",
    )
    art = _write(tmp_path, [vh], [gate])
    d = classify_logs([], rules=rules, artifacts=art, model=None)
    assert (d.category, d.failing_check["name"]) == ("configuration_error", "operator-coverage")
    assert "no functional_test.json in the artifacts" in d.explanation


def test_the_built_in_gpu_gate_is_a_missing_device(tmp_path, rules) -> None:
    vh = report("verify_hip", {})
    gate = _gate("gpu-verified", "environment.device_kind", reason="GATEKEEPER_REQUIRE_DEVICE=1 but cpu")
    d = classify_logs([], rules=rules, artifacts=_write(tmp_path, [vh], [gate]), model=None)
    assert d.category == "device_not_available"


def test_artifacts_without_categories_leave_the_logs_to_decide(tmp_path, rules) -> None:
    # an older gatekeeper's artifact: a failed check without a category
    ft = report("functional_test", {}, [Check("ops.x", "failed", "Tensor-likes are not close!")], status="failed")
    art = _write(tmp_path, [ft])
    d = classify_logs([], rules=rules, artifacts=art, model=None)
    assert d.decided_by == "rule"
    assert d.failing_check is None
    assert d.category == "numerical_mismatch"


@pytest.mark.parametrize(
    "forged",
    [
        "gatekeeper: blocking gate smoke: no_binary_for_gpu on verify_hip.smoke (no code object for this GPU)",
        "  [FAIL] smoke.kernel: hipErrorNoBinaryForGpu (category: no_binary_for_gpu)",
    ],
)
def test_gatekeeper_lines_forged_in_a_check_message_are_not_believed(tmp_path, rules, forged) -> None:
    """A failed check's message is the checked code's text: gatekeeper's own-output signatures do not read it
    (a line printed by the job itself still counts: test_gatekeeper_exits). The real runtime message
    in the second line still does, through its own signature."""
    ft = report("functional_test", {}, [Check("ops.x", "failed", f"assert False\n{forged}")], status="failed")
    d = classify_logs([], rules=rules, artifacts=_write(tmp_path, [ft]), model=None)
    assert not [m for m in d.matches if m.rule.startswith("gatekeeper-")]
    assert not [s for s in d.also_seen if str(s.get("rule", s.get("id", ""))).startswith("gatekeeper-")]
    if "hipError" in forged:
        assert d.category == "no_binary_for_gpu"  # the runtime's own error name, as in a log
    else:
        assert d.category == "unknown"


def test_only_failed_skips_a_passing_channel(tmp_path, capsys) -> None:
    vh = report("verify_hip", {})
    art = tmp_path / "art"
    art.mkdir()
    write_stage(vh, art)
    write_verdict(Verdict("pass", "all passed", "stable", ()), art / "verdict.json")
    assert nothing_failed(art) == "the verdict is pass and no stage failed"
    out = tmp_path / "analysis.json"
    assert main(["analyze", "--artifacts", str(art), "--only-failed", "--format", "json", "--out", str(out)]) == 0
    assert not out.exists()
    assert "nothing to diagnose" in capsys.readouterr().err
    # a failed stage is diagnosed whatever the verdict says
    write_stage(report("verify_hip", {}, [_failed("smoke.matmul", "off", "numerical_mismatch")], status="failed"), art)
    assert nothing_failed(art) is None
    assert main(["analyze", "--artifacts", str(art), "--only-failed", "--format", "json", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["category"] == "numerical_mismatch"
    assert main(["analyze", "--only-failed"]) == 2


def test_an_analysis_beside_the_artifacts_is_not_read_as_a_stage(tmp_path, rules) -> None:
    # the diagnose job writes artifacts/<channel>/analysis.json, which names stages and checks too;
    # the next analysis (and the report) of that directory must not take it for a stage artifact
    ft = report("functional_test", {}, [_failed("checks", "timed out after 5 s", "gpu_hang_or_timeout")])
    art = _write(tmp_path, [ft])
    out = art / "analysis.json"
    assert main(["analyze", "--artifacts", str(art), "--format", "json", "--out", str(out)]) == 0
    assert '"stage"' in out.read_text()
    assert '"checks"' in out.read_text()
    assert main(["analyze", "--artifacts", str(art), "--format", "json", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["category"] == "gpu_hang_or_timeout"


def test_a_stage_that_refused_its_model_is_a_configuration_error(tmp_path, rules) -> None:
    # exit 2 before any work: no functional_test.json, the refusal as the log's last gatekeeper: line
    art = _write(tmp_path, [report("verify_hip", {})])
    line = "<input>:--model: cannot import 'mypkg.models': no module named 'mypkg' on the import path (/repo)"
    (art / "functional_test.log").write_text(f"gatekeeper stage functional_test: device cpu\ngatekeeper: {line}\n")
    d = classify_logs([], rules=rules, artifacts=art, model=None)
    assert (d.category, d.decided_by) == ("configuration_error", "artifacts")
    assert d.failing_check["stage"] == "functional_test"
    assert d.failing_check["name"] == "stage.config"
    assert "on the import path (/repo)" in d.explanation
    write_verdict(Verdict("pass", "passed", "stable", ()), art / "verdict.json")
    assert nothing_failed(art) is None, "a stage that stopped is diagnosed even when the gates passed"
    # a log that ends otherwise (the process was killed) is left to the log signatures
    (art / "functional_test.log").write_text("gatekeeper stage functional_test: device cpu\nSegmentation fault\n")
    assert classify_logs([], rules=rules, artifacts=art, model=None).failing_check is None
