from __future__ import annotations

import json

import pytest
from junitparser import JUnitXml

from gatekeeper.contract.stage_report import Check, Metric, read_artifacts, read_stage, write_stage
from gatekeeper.core.errors import InputError
from tests.support.builders import report


def _report():
    return report(
        "functional_test",
        metrics={"op_pass_rate": 0.97, "latency_ms": Metric.of(10.0, "ms", "lower", [[1.0, 2.0], [3.0]])},
        checks=[
            Check("a", "passed", duration_s=0.1),
            Check("b", "failed", "boom\ndetail", group="g"),
            Check("c", "skipped", "no GPU"),
        ],
    )


def test_roundtrip_json_and_junit(tmp_path):
    write_stage(_report(), tmp_path)
    back = read_stage(tmp_path / "functional_test.json")
    assert back == _report()
    assert back.metrics["latency_ms"].samples == ((1.0, 2.0), (3.0,))
    xml = JUnitXml.fromfile(str(tmp_path / "functional_test.junit.xml"))
    suite = next(iter(xml))
    assert (suite.tests, suite.failures, suite.skipped) == (3, 1, 1)
    assert {c.name for c in suite} == {"a", "b", "c"}


def test_schema_violation_is_one_line(tmp_path):
    write_stage(_report(), tmp_path)
    path = tmp_path / "functional_test.json"
    doc = json.loads(path.read_text())
    doc["status"] = "great"
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError) as err:
        read_stage(path)
    assert "status" in err.value.line()
    assert "\n" not in err.value.line()


def test_newer_schema_is_refused_with_fix(tmp_path):
    write_stage(_report(), tmp_path)
    path = tmp_path / "functional_test.json"
    doc = json.loads(path.read_text())
    doc["schema"] = "gatekeeper.stage/v2"
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError, match="upgrade gatekeeper"):
        read_stage(path)


def test_read_artifacts_ignores_other_json(tmp_path):
    write_stage(_report(), tmp_path)
    (tmp_path / "verdict.json").write_text('{"schema": "gatekeeper.verdict/v1"}')
    assert list(read_artifacts(tmp_path)) == ["functional_test"]


def test_nan_value_is_stored_as_unmeasured():
    assert Metric.of(float("nan"), "ms").value is None


def test_invalid_report_is_not_written(tmp_path):
    bad = report("functional_test", checks=[Check("", "passed")])
    with pytest.raises(InputError):
        write_stage(bad, tmp_path)
    assert list(tmp_path.iterdir()) == []
