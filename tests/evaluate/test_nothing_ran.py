"""Fail closed on counts: "0 failures" where nothing ran is no data, not a pass. A junit: gate on an empty
report (or one whose every case was skipped), or a stage.checks.failed gate on a stage whose every check was
skipped, follows the gate's on_missing (default: fail); a count of tests stays a result."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gatekeeper.contract.junit import JUnitSummary, summarize
from gatekeeper.contract.stage_report import Check
from gatekeeper.evaluate.decide import evaluate
from gatekeeper.evaluate.gates import parse_gates
from tests.evaluate._decide_scenario import scenario
from tests.support.builders import report


def _one(gate: dict, **inputs: object) -> tuple[str, str]:
    v = evaluate(dataclasses.replace(scenario(), gates=parse_gates({"version": 1, "gates": {"g": gate}}), **inputs))
    [g] = v.gates
    return g.outcome.value, g.reason


@pytest.mark.parametrize("metric", ["failures", "errors"])
def test_a_junit_count_of_failures_over_no_test_that_ran_is_missing_data(tmp_path: Path, metric: str) -> None:
    (tmp_path / "empty.xml").write_text("<testsuites/>", encoding="utf-8")
    gate = {"metric": metric, "junit": str(tmp_path / "empty.xml"), "pass": "== 0"}
    empty = summarize([tmp_path / "empty.xml"])
    assert _one(gate, junit={"g": empty}) == ("fail", f"no test ran in {tmp_path / 'empty.xml'} (on_missing: fail)")
    skipped = JUnitSummary(("s.xml",), tests=3, skipped=3)
    assert _one({**gate, "on_missing": "warn"}, junit={"g": skipped}) == (
        "warn",
        "no test ran in s.xml (on_missing: warn)",
    )
    ran = JUnitSummary(("r.xml",), tests=3, skipped=2)  # one ran and passed: 0 is a result
    assert _one(gate, junit={"g": ran})[0] == "pass"


def test_a_junit_count_of_skipped_cases_needs_a_case_and_a_count_of_tests_is_always_a_result() -> None:
    none = JUnitSummary(("e.xml",), tests=0)
    assert _one({"metric": "skipped", "junit": "e.xml", "pass": "<= 1"}, junit={"g": none}) == (
        "fail",
        "no test case in e.xml (on_missing: fail)",
    )
    all_skipped = JUnitSummary(("s.xml",), tests=2, skipped=2)
    assert _one({"metric": "skipped", "junit": "s.xml", "pass": "<= 1"}, junit={"g": all_skipped})[0] == "fail"
    assert _one({"metric": "tests", "junit": "e.xml", "pass": ">= 1"}, junit={"g": none}) == (
        "fail",
        "e.xml tests = 0 tests fails >= 1",
    )


@pytest.mark.parametrize("what", ["failed", "errors"])
def test_a_stage_whose_every_check_was_skipped_has_no_failed_count(what: str) -> None:
    skipped = report("functional_test", checks=[Check("a", "skipped", "no GPU"), Check("b", "info", "a fact")])
    gate = {"metric": f"functional_test.checks.{what}", "pass": "== 0"}
    assert _one(gate, reports={"functional_test": skipped}) == (
        "fail",
        "no functional_test check ran (on_missing: fail)",
    )
    one_ran = report("functional_test", checks=[Check("a", "skipped", "no GPU"), Check("b", "passed")])
    assert _one(gate, reports={"functional_test": one_ran})[0] == "pass"


def test_a_stage_whose_only_checks_failed_and_are_waived_is_decided_by_the_waiver() -> None:
    failed = report("functional_test", checks=[Check("a", "failed", "boom")])
    doc = {
        "version": 1,
        "gates": {"g": {"metric": "functional_test.checks.failed", "pass": "== 0"}},
        "waivers": [{"gate": "g", "checks": ["a"], "reason": "known", "owner": "ann", "expires": "2099-12-31"}],
    }
    inputs = dataclasses.replace(scenario(), gates=parse_gates(doc), reports={"functional_test": failed})
    [g] = evaluate(inputs).gates
    assert (g.outcome.value, g.reason) == ("pass", "functional_test.checks.failed = 0 checks meets == 0")
