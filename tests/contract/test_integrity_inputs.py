"""Strict input semantics (issue 12): last-one-wins, corrupt-as-missing and non-finite timings fail closed."""

from __future__ import annotations

import json

import pytest

from gatekeeper.cli import main
from gatekeeper.contract.stage_report import Metric, read_artifacts, read_stage, write_stage
from gatekeeper.core import files
from gatekeeper.core.errors import InputError
from gatekeeper.evaluate.gates import load_gates
from tests.support.builders import report


def _write(tmp_path, stage="functional_test", **kw):
    return write_stage(report(stage, metrics={"op_pass_rate": 1.0}, **kw), tmp_path)


def test_two_artifacts_for_one_stage_name_both_files(tmp_path):
    good = _write(tmp_path)
    planted = tmp_path / "copy_of_functional.json"
    planted.write_text(good.read_text())
    with pytest.raises(InputError) as err:
        read_artifacts(tmp_path)
    line = err.value.line()
    assert "copy_of_functional.json" in line
    assert "functional_test.json" in line


def test_duplicate_json_key_is_refused_with_both_lines(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{\n  "status": "failed",\n  "other": 1,\n  "status": "passed"\n}\n')
    with pytest.raises(InputError) as err:
        files.read_json(path)
    line = err.value.line()
    assert "duplicate key 'status'" in line
    # both places, line and column, as for a duplicated YAML key (issue 28)
    assert "x.json:4:3: duplicate key 'status' (first at 2:3)" in line
    assert "hint: remove one of the two" in line


def test_duplicate_key_in_a_stage_artifact_is_exit_2(tmp_path, capsys):
    path = _write(tmp_path, status="failed")
    text = path.read_text().replace('"status": "failed",', '"status": "failed", "status": "passed",', 1)
    path.write_text(text)
    rc = main(["evaluate", "--artifacts", str(tmp_path), "--out", str(tmp_path / "out")])
    assert rc == 2
    assert "duplicate key 'status'" in capsys.readouterr().err


_GATES = """version: 1
gates:
  coverage:
    metric: functional_test.op_pass_rate
    pass: ">= 0.99"
  coverage:
    metric: functional_test.op_pass_rate
    pass: ">= 0.1"
"""


def test_duplicate_gate_name_names_both_lines(tmp_path):
    path = tmp_path / "gates.yaml"
    path.write_text(_GATES)
    with pytest.raises(InputError) as err:
        load_gates(path)
    line = err.value.line()
    assert "duplicate key 'coverage'" in line
    assert ":6:3:" in line
    assert "first at 3:3" in line


def test_duplicate_rule_key_in_a_gate_is_refused(tmp_path):
    path = tmp_path / "gates.yaml"
    path.write_text(
        'version: 1\ngates:\n  coverage:\n    metric: functional_test.op_pass_rate\n    pass: ">= 0.99"\n'
        '    pass: ">= 0.1"\n'
    )
    with pytest.raises(InputError, match=r"duplicate key 'pass'.*5:5"):
        load_gates(path)


@pytest.mark.parametrize(
    "content",
    [b"", b"\xff\xfe\x00garbage", b"not json at all", b'{"schema": "gatekeeper.stage/v1", "stage": "functional_t'],
    ids=["empty", "binary", "not-json", "truncated"],
)
def test_corrupt_artifact_is_exit_2_never_missing(tmp_path, capsys, content):
    _write(tmp_path, stage="verify_hip")
    (tmp_path / "functional_test.json").write_bytes(content)
    with pytest.raises(InputError, match=r"functional_test\.json"):
        read_artifacts(tmp_path)
    rc = main(["evaluate", "--artifacts", str(tmp_path), "--out", str(tmp_path / "out")])
    assert rc == 2
    assert "functional_test.json" in capsys.readouterr().err
    assert not (tmp_path / "out" / "verdict.json").exists()


def test_a_binary_artifact_message_has_a_fix(tmp_path):
    # issue 28: "not UTF-8 text" said what was wrong, not what to do
    (tmp_path / "functional_test.json").write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    with pytest.raises(InputError) as err:
        read_artifacts(tmp_path)
    line = err.value.line()
    assert "functional_test.json:byte 0: not UTF-8 text" in line
    assert "; hint: pass the file gatekeeper wrote, or rerun the step that wrote it" in line


@pytest.mark.parametrize("bad", ["NaN", "Infinity", "-Infinity", "0", "-3.5"])
def test_bad_timing_sample_is_exit_2(tmp_path, bad):
    rep = report(
        "performance_baseline", metrics={"latency_ms": Metric.of(10.0, "ms", "lower", [[10.0, 11.0], [10.5, 9.0]])}
    )
    path = write_stage(rep, tmp_path)
    path.write_text(path.read_text().replace("11.0", bad, 1))
    with pytest.raises(InputError, match=r"latency_ms"):
        read_stage(path)


def test_non_finite_metric_value_is_refused(tmp_path):
    path = _write(tmp_path)
    doc = path.read_text().replace('"value": 1.0', '"value": NaN', 1)
    path.write_text(doc)
    with pytest.raises(InputError, match="op_pass_rate"):
        read_stage(path)


def test_zero_is_a_valid_sample_of_a_non_timing_metric(tmp_path):
    rep = report("functional_test", metrics={"rel_error": Metric.of(0.0, "ratio", "lower", [0.0, 1e-7])})
    path = write_stage(rep, tmp_path)
    assert read_stage(path).metrics["rel_error"].flat_samples == [0.0, 1e-7]


def test_json_writer_output_still_reads(tmp_path):
    path = tmp_path / "ok.json"
    files.write_json(path, {"a": {"b": 1}, "c": [{"b": 2}, {"b": 3}]})
    assert files.read_json(path) == json.loads(path.read_text())
