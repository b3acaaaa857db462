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


def test_provenance_hashes_a_stage_jobs_files_bounded_and_names_what_it_left_out(tmp_path, monkeypatch):
    # 2026-12-04 audit: provenance hashed every *.json and *.xml in the artifacts whole, after an is_file() check:
    # a sparse file of a terabyte (no disk used) that a stage job left as junk.json, or a link to one, held the
    # gate job for hours, and a FIFO swapped in after the check blocked it. Now: a regular file, bounded.
    import os

    from gatekeeper.evaluate import run as run_module

    monkeypatch.setattr(run_module, "PROVENANCE_MAX_BYTES", 1 << 20)  # the same rule, at a size a test can afford
    arts = tmp_path / "arts"
    write_stage(report("performance_baseline", metrics={"latency_ms": Metric.of(10.5, "ms", "lower")}), arts)
    with (arts / "junk.json").open("wb") as fh:
        fh.truncate((1 << 20) + 1)
    (arts / "link.xml").symlink_to(arts / "junk.json")
    os.mkfifo(arts / "pipe.xml")  # a FIFO named *.json is already exit 2 (read_artifacts opens every *.json)
    gates = tmp_path / "gates.yaml"
    gates.write_text(GATES)
    run_evaluate(artifacts=arts, gates_path=gates, out=arts, baseline=None, environ={})
    prov = json.loads((arts / "verdict.json").read_text())["provenance"]
    assert sorted(prov["artifacts"]) == ["performance_baseline.json", "performance_baseline.junit.xml"]
    assert prov["not_hashed"] == {
        "junk.json": "stage artifact is larger than 1 MiB",
        "link.xml": "stage artifact is larger than 1 MiB",
        "pipe.xml": "expected a stage artifact, found a FIFO",
    }
