"""verdict.json says what it was computed from (issue 12): version, gates sha256, baseline, artifacts sha256."""

from __future__ import annotations

import hashlib
import json

import pytest

import gatekeeper
from gatekeeper.contract import schemas
from gatekeeper.contract.stage_report import Metric, write_stage
from gatekeeper.core.errors import InputError
from gatekeeper.evaluate.run import run_evaluate
from tests.support.builders import report

GATES = 'version: 1\ngates:\n  latency:\n    metric: performance_baseline.latency_ms\n    compare: baseline\n    pass: "<= +20%"\n'


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_verdict_records_version_gates_sha_baseline_and_artifact_shas(tmp_path):
    base, arts = tmp_path / "base", tmp_path / "arts"
    write_stage(report("performance_baseline", metrics={"latency_ms": Metric.of(10.0, "ms", "lower")}), base)
    write_stage(report("performance_baseline", metrics={"latency_ms": Metric.of(10.5, "ms", "lower")}), arts)
    gates = tmp_path / "gates.yaml"
    gates.write_text(GATES)
    run_evaluate(artifacts=arts, gates_path=gates, out=arts, baseline=str(base), environ={})
    doc = json.loads((arts / "verdict.json").read_text())
    prov = doc["provenance"]
    assert prov["gatekeeper_version"] == gatekeeper.__version__
    assert prov["gates_sha256"] == _sha(gates)
    assert prov["artifacts"] == {
        "performance_baseline.json": _sha(arts / "performance_baseline.json"),
        "performance_baseline.junit.xml": _sha(arts / "performance_baseline.junit.xml"),
    }
    assert doc["baselines"]["performance_baseline"]["run_id"].endswith("performance_baseline.json")
    assert doc["gpu_verified"] is True


def test_schema_refuses_a_provenance_without_a_real_digest():
    doc = {"schema": "gatekeeper.verdict/v1", "result": "pass", "exit_code": 0, "summary": "", "channel": "stable"}
    doc |= {"gates": [], "provenance": {"gates_sha256": "not-a-digest"}}
    with pytest.raises(InputError, match=r"^verdict\.json:provenance\.gates_sha256: .*'not-a-digest' does not match"):
        schemas.validate("gatekeeper.verdict/v1", doc, path="verdict.json")
    doc["provenance"]["gates_sha256"] = "0" * 64  # the same document with a real digest is valid
    schemas.validate("gatekeeper.verdict/v1", doc, path="verdict.json")
