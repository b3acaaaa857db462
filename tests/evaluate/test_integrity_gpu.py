"""GPU expected means GPU verified (issue 12): a GPU job on a CPU blocks; any CPU verdict says so everywhere."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import yaml

from gatekeeper.contract.stage_report import Check
from gatekeeper.contract.verdict import Verdict
from gatekeeper.core.ci_context import PipelineContext
from gatekeeper.evaluate.decide import Inputs, evaluate
from gatekeeper.evaluate.gates import parse_gates
from gatekeeper.evaluate.outputs import banner, to_markdown
from gatekeeper.notify.alert import load_alert
from gatekeeper.notify.gitlab_note import commit_status, note_body
from gatekeeper.notify.slack_message import build_message
from tests.support.builders import env, report
from tests.support.notify_inputs import write_verdict

ROOT = Path(__file__).resolve().parents[2]
# A gates file without any device gate: the rule must not depend on gates.yaml.
GATES = parse_gates({"version": 1, "gates": {"checks": {"metric": "verify_hip.checks.failed", "pass": "== 0"}}})
NOT_GPU = "not a gpu verdict"


def _verdict(device_kind: str, require: bool) -> Verdict:
    rep = report("verify_hip", checks=[Check("smoke.matmul", "passed")], environment=env(device_kind=device_kind))
    environ = {"GATEKEEPER_REQUIRE_DEVICE": "1"} if require else {}
    return evaluate(
        Inputs(
            GATES,
            {"verify_hip": rep},
            "stable",
            dt.date(2026, 12, 1),
            context=PipelineContext.from_env(environ),
            environ=environ,
        )
    )


def test_a_gpu_job_that_ran_on_a_cpu_is_blocked_whatever_the_gates_say():
    v = _verdict("cpu", require=True)
    assert v.result == "blocked"
    assert any("GATEKEEPER_REQUIRE_DEVICE" in g.reason for g in v.blocking_gates)


def test_a_gpu_job_on_a_gpu_passes():
    v = _verdict("rocm", require=True)
    assert v.result == "pass"
    assert v.gpu_verified
    assert NOT_GPU not in banner(v).lower()
    assert NOT_GPU not in to_markdown(v).lower()


def test_a_cpu_verdict_says_so_in_banner_markdown_note_and_slack(tmp_path):
    v = _verdict("cpu", require=False)
    assert v.result == "pass"
    assert not v.gpu_verified
    assert v.to_dict()["gpu_verified"] is False
    assert NOT_GPU in banner(v).lower()
    assert NOT_GPU in to_markdown(v).lower()
    path = tmp_path / "verdict.json"
    path.write_text(__import__("json").dumps(v.to_dict()))
    alert = load_alert(path, environ={})
    assert NOT_GPU in note_body(alert).lower()
    assert NOT_GPU in commit_status(alert)["description"].lower()
    assert NOT_GPU in str(build_message(alert, kind="failure", severity="warning")).lower()


def test_a_gpu_verdict_from_the_notify_fixture_is_not_flagged(tmp_path):
    alert = load_alert(write_verdict(tmp_path), environ={})
    assert NOT_GPU not in note_body(alert).lower()


def test_template_gpu_jobs_require_a_device_by_default():
    spec = next(yaml.safe_load_all((ROOT / "ci-templates" / "gatekeeper.yml").read_text()))["spec"]["inputs"]
    assert spec["device_required"]["default"] is True
