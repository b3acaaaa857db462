"""Facts are facts (issue 12): a fact is a check with status info, never a pass; hygiene problems reach the verdict."""

from __future__ import annotations

import datetime as dt
import io
from pathlib import Path

from junitparser import JUnitXml

from gatekeeper.contract.stage_report import Check, Metric, read_stage, write_stage
from gatekeeper.evaluate.decide import Inputs, evaluate
from gatekeeper.evaluate.gates import default_gates_path, load_gates
from gatekeeper.evaluate.metrics import resolve
from stages import verify_hip
from stages._stage import Recorder
from stages.device import DeviceInfo
from tests.stages.test_verify_hip import _ctx
from tests.support.builders import report


def test_info_is_neither_pass_nor_fail(tmp_path: Path) -> None:
    rep = report(
        "verify_hip",
        checks=[Check("smoke", "passed"), Check("device.memory", "info", "unknown"), Check("x", "failed", "boom")],
    )
    path = write_stage(rep, tmp_path)
    back = read_stage(path)
    assert back.counts() == {"passed": 1, "failed": 1, "error": 0, "skipped": 0, "info": 1}
    assert resolve("verify_hip.checks.pass_rate", {"verify_hip": back}).value == 0.5
    assert resolve("verify_hip.checks.failed", {"verify_hip": back}).value == 1.0
    suite = next(iter(JUnitXml.fromfile(str(tmp_path / "verify_hip.junit.xml"))))
    assert (suite.tests, suite.failures) == (3, 1)


def test_a_set_override_is_info_and_counted(monkeypatch) -> None:
    monkeypatch.setenv("HSA_OVERRIDE_GFX_VERSION", "10.3.0")
    monkeypatch.setenv("GATEKEEPER_REQUIRE_DEVICE", "1")
    ctx = _ctx(DeviceInfo("rocm", "cuda:0", "RX 6700 XT", 1, "gfx1030", arch_list=("gfx1030",)))
    verify_hip._hygiene(ctx)
    checks = {c.name: c for c in ctx.rec.checks}
    assert checks["hygiene.HSA_OVERRIDE_GFX_VERSION"].status == "info"
    assert ctx.rec.metrics["hygiene_problems"].value >= 1


def test_a_cpu_job_hiding_every_gpu_is_a_hygiene_problem(monkeypatch) -> None:
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "-1")
    monkeypatch.delenv("GATEKEEPER_REQUIRE_DEVICE", raising=False)
    ctx = _ctx(DeviceInfo("cpu", "cpu", why_cpu="torch sees no GPU"))
    verify_hip._hygiene(ctx)
    checks = {c.name: c for c in ctx.rec.checks}
    assert checks["hygiene.HIP_VISIBLE_DEVICES"].status == "info"
    assert ctx.rec.metrics["hygiene_problems"].value >= 1


def test_unknown_device_memory_is_not_a_pass() -> None:
    ctx = _ctx(DeviceInfo("rocm", "cuda:0", "MI300X", 1, "gfx942", arch_list=("gfx942",)))
    verify_hip._device(ctx)
    assert {c.name: c.status for c in ctx.rec.checks}["device.memory"] == "info"


def test_hygiene_problems_warn_in_the_default_gates() -> None:
    gates = load_gates(default_gates_path(cwd=Path("/nonexistent")))
    rep = report(
        "verify_hip",
        metrics={"hygiene_problems": Metric.of(1.0, "count", "lower"), "device_available": 1.0},
        checks=[Check("hygiene.HSA_OVERRIDE_GFX_VERSION", "info", "set")],
    )
    verdict = evaluate(Inputs(gates=gates, reports={"verify_hip": rep}, channel="stable", today=dt.date(2026, 12, 1)))
    hygiene = next(g for g in verdict.gates if g.metric == "verify_hip.hygiene_problems")
    assert hygiene.outcome.value == "warn"


def test_recorder_status_of_info_only_checks_is_not_a_pass() -> None:
    rec = Recorder("x", io.StringIO())
    rec.record("fact", "info", "a fact")
    assert rec.status() == "skipped"
