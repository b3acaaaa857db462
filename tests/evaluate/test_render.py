from __future__ import annotations

import datetime as dt

from junitparser import JUnitXml

from gatekeeper.evaluate.decide import Inputs, evaluate
from gatekeeper.evaluate.gates import parse_gates
from gatekeeper.evaluate.outputs import banner, to_junit, to_markdown, to_metrics_txt
from tests.support.builders import report


def _verdict(value: float = 0.8):
    g = parse_gates(
        {
            "version": 1,
            "gates": {
                "cov": {"metric": "functional_test.op_pass_rate", "pass": ">= 0.95"},
                "prec": {"metric": "functional_test.max_rel_error", "pass": "<= 1%", "severity": "advisory"},
                "gone": {"metric": "compatibility_check.x", "pass": ">= 1", "on_missing": "skip"},
            },
        }
    )
    r = report("functional_test", {"op_pass_rate": value, "max_rel_error": 0.5})
    return evaluate(Inputs(gates=g, reports={"functional_test": r}, channel="stable", today=dt.date(2026, 12, 2)))


def test_markdown_leads_with_the_result_and_blocking_gate_first():
    md = to_markdown(_verdict())
    lines = md.splitlines()
    assert lines[0] == "## gatekeeper: ⛔ BLOCKED"
    rows = [row for row in lines if row.startswith("| ") and "---" not in row][1:]
    assert rows[0].startswith("| **cov** | ❌ fail | 0.8 |")
    assert "(advisory)" in rows[1]


def test_junit_one_case_per_gate(tmp_path):
    path = tmp_path / "gates.junit.xml"
    path.write_bytes(to_junit(_verdict()))
    suite = next(iter(JUnitXml.fromfile(str(path))))
    assert (suite.tests, suite.failures, suite.skipped) == (3, 1, 2)


def _junitparser_reference(v) -> bytes:
    """The same file built with junitparser (how evaluate wrote it before it stopped importing junitparser)."""
    from junitparser import Failure, Skipped, TestCase, TestSuite

    from gatekeeper.contract.stage_report import junit_bytes
    from gatekeeper.contract.verdict import Outcome
    from gatekeeper.core.escape import xml_text as x
    from gatekeeper.evaluate.outputs import _waiver_text

    suite = TestSuite("gatekeeper.gates")
    suite.timestamp = x(v.generated_at)
    for g in v.gates:
        case = TestCase(x(g.name), classname="gatekeeper.gates")
        if g.blocking:
            case.result = [Failure(x(g.reason[:500]), "gate")]
        elif g.outcome is not Outcome.PASS:
            label = "advisory fail" if g.outcome is Outcome.FAIL else g.outcome.value
            label = _waiver_text(g.waiver) if g.outcome is Outcome.WAIVED and g.waiver else label
            case.result = [Skipped(x(f"{label}: {g.reason}"[:1000]))]
        case.system_out = x(f"{g.reason}\nmetric: {g.metric}\nrule: {g.rule}\nseverity: {g.severity}, mode: {g.mode}")
        suite.add_testcase(case)
    for w in v.waived_checks:
        case = TestCase(x(f"{w.stage}.{w.check}"), classname="gatekeeper.waived")
        case.result = [Skipped(x(_waiver_text(w.waiver)))]
        case.system_out = x(w.message)
        suite.add_testcase(case)
    suite.update_statistics()
    xml = JUnitXml()
    xml.add_testsuite(suite)
    return junit_bytes(xml)


def test_junit_is_the_file_junitparser_writes():
    from tests.security import hostile

    for v in (_verdict(), _verdict(0.99), hostile.verdict()):
        assert to_junit(v) == _junitparser_reference(v)


def test_metrics_txt_format():
    text = to_metrics_txt(_verdict())
    assert text.splitlines()[0] == "gatekeeper_result 1"
    assert "gate_cov 0.8" in text.splitlines()
    for line in text.splitlines():
        name, value = line.split(" ")
        float(value)
        assert name.replace("_", "").isalnum()


def test_banner_names_blocking_gates():
    text = banner(_verdict())
    assert "BLOCKED" in text
    assert "  - cov:" in text
    assert "prec" not in text.split("\n", 2)[2]
    warned = banner(_verdict(0.99))
    assert "gatekeeper: PASSED WITH WARNINGS" in warned
    assert "  - prec:" in warned
