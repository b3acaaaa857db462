"""gatekeeper evaluate through cli.main: exit codes, outputs, and one-line errors on bad input."""

from __future__ import annotations

import json
import textwrap

import pytest

from gatekeeper import cli
from gatekeeper.contract.stage_report import Check, write_stage
from tests.support.builders import report

GATES = """\
version: 1
gates:
  operator-coverage:
    metric: functional_test.op_pass_rate
    pass: ">= 0.95"
    warn: ">= 0.90"
  smoke:
    metric: verify_hip.checks.failed
    pass: "== 0"
"""


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "gates.yaml").write_text(GATES)
    art = tmp_path / "artifacts"
    write_stage(report("verify_hip", {"device_available": 1.0}, checks=[Check("smoke.matmul", "passed")]), art)
    return tmp_path


def evaluate(workdir, capsys, *extra):
    code = cli.main(
        ["evaluate", "--artifacts", str(workdir / "artifacts"), "--gates", str(workdir / "gates.yaml"), *extra]
    )
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(("rate", "code", "result"), [(0.99, 0, "pass"), (0.92, 3, "warn"), (0.5, 1, "blocked")])
def test_exit_codes_and_outputs(workdir, capsys, rate, code, result):
    write_stage(report("functional_test", {"op_pass_rate": rate}), workdir / "artifacts")
    got, _out, err = evaluate(workdir, capsys)
    assert got == code
    art = workdir / "artifacts"
    doc = json.loads((art / "verdict.json").read_text())
    assert doc["schema"] == "gatekeeper.verdict/v1"
    assert doc["result"] == result
    assert doc["exit_code"] == code
    for name in ("verdict.md", "gates.junit.xml", "metrics.txt"):
        assert (art / name).stat().st_size > 0
    if code == 1:
        assert "BLOCKED" in err
        assert "operator-coverage" in err
    if code == 3:
        assert "PASSED WITH WARNINGS" in err


def _assert_input_error(workdir, capsys, fragment, *extra):
    code, _out, err = evaluate(workdir, capsys, *extra)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("gatekeeper: ")
    assert fragment in lines[0]
    assert "Traceback" not in err
    assert not (workdir / "artifacts" / "verdict.json").exists()


def test_bad_gates_yaml(workdir, capsys):
    (workdir / "gates.yaml").write_text(GATES.replace('">= 0.95"', '"95"'))
    _assert_input_error(workdir, capsys, "gates.yaml:5:11: gates.operator-coverage.pass")


def test_gates_yaml_syntax_error(workdir, capsys):
    (workdir / "gates.yaml").write_text(GATES + "  broken: [\n")
    _assert_input_error(workdir, capsys, "invalid YAML")


def test_truncated_stage_artifact(workdir, capsys):
    write_stage(report("functional_test", {"op_pass_rate": 0.99}), workdir / "artifacts")
    path = workdir / "artifacts" / "functional_test.json"
    path.write_text(path.read_text()[:300])
    _assert_input_error(workdir, capsys, "functional_test.json:")


def test_missing_artifacts_dir(workdir, capsys):
    code = cli.main(["evaluate", "--artifacts", str(workdir / "nope"), "--gates", str(workdir / "gates.yaml")])
    err = capsys.readouterr().err
    assert code == 2
    assert "artifacts directory not found" in err


def test_hostile_junit(workdir, capsys, monkeypatch):
    monkeypatch.chdir(workdir)
    (workdir / "reports").mkdir()
    (workdir / "reports" / "x.xml").write_text(
        '<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;">]><testsuite><testcase name="&b;"/></testsuite>'
    )
    (workdir / "gates.yaml").write_text(
        GATES + textwrap.indent('unit:\n  junit: "reports/*.xml"\n  metric: pass_rate\n  pass: ">= 1"\n', "  ")
    )
    _assert_input_error(workdir, capsys, "refused unsafe XML")


def test_unknown_baseline_store(workdir, capsys):
    _assert_input_error(workdir, capsys, "unknown baseline store 'nosuch'", "--baseline", "nosuch:x")


def test_usage_error_is_exit_2(capsys):
    assert cli.main(["evaluate", "--channel", "weekly"]) == 2
    assert cli.main([]) == 2


def test_baseline_directory(workdir, capsys):
    write_stage(report("functional_test", {"op_pass_rate": 0.99}), workdir / "artifacts")
    base = workdir / "base"
    write_stage(report("functional_test", {"op_pass_rate": 0.99}), base)
    (workdir / "gates.yaml").write_text(
        GATES + '  drift:\n    metric: functional_test.op_pass_rate\n    compare: baseline\n    pass: ">= -1%"\n'
    )
    code, _out, _err = evaluate(workdir, capsys, "--baseline", str(base))
    assert code == 0
    doc = json.loads((workdir / "artifacts" / "verdict.json").read_text())
    drift = next(g for g in doc["gates"] if g["name"] == "drift")
    assert drift["baseline_value"] == 0.99
    assert drift["change"] == 0.0


def test_evaluate_never_imports_torch(workdir):
    import subprocess
    import sys

    code = (
        "import sys; from gatekeeper import cli; "
        f"rc = cli.main(['evaluate', '--artifacts', {str(workdir / 'artifacts')!r}, '--gates', {str(workdir / 'gates.yaml')!r}]); "
        "assert 'torch' not in sys.modules, 'torch was imported'; print('rc', rc)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert "rc " in r.stdout, r.stderr


def test_record_keeps_the_run_in_a_store(workdir, capsys):
    write_stage(report("functional_test", {"op_pass_rate": 0.99}), workdir / "artifacts")
    store = workdir / "history"
    code, _out, _err = evaluate(workdir, capsys, "--record", str(store))
    assert code == 0
    assert sorted(p.name for p in store.glob("*.json")) == ["functional_test.json", "verify_hip.json"]


def test_a_bug_is_one_line_and_a_saved_traceback(monkeypatch, capsys, tmp_path):
    import gatekeeper.evaluate.run

    def boom(**_kw):
        raise RuntimeError("unexpected state\nsecond line")

    monkeypatch.setattr(gatekeeper.evaluate.run, "run_evaluate", boom)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    code = cli.main(["evaluate"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 70
    assert len(err) == 1
    assert err[0].startswith("gatekeeper: internal error: RuntimeError: unexpected state (traceback saved in ")
    saved = list(tmp_path.glob("gatekeeper-crash-*.log"))
    assert "Traceback" in saved[0].read_text()
