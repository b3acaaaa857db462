"""A count gate that does not pass names what did not pass: "functional_test.checks.failed = 7 checks fails == 0;
not passing: a, b, c, d, e and 2 more", and a junit: gate the failing tests' classname.name. The names come from
the code under test: each is cut to 120 characters, and every output escapes it (verdict.md, the terminal)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from gatekeeper.cli import main
from gatekeeper.contract.junit import summarize
from gatekeeper.contract.stage_report import Check, write_stage
from gatekeeper.evaluate.decide import evaluate
from gatekeeper.evaluate.gates import parse_gates
from tests.evaluate._decide_scenario import scenario
from tests.support.builders import report

FAILED = [Check(f"ops.c{i}", "failed", "mismatch") for i in range(6)] + [Check("ops.e0", "error", "crashed")]
PASSED = [Check("ops.ok", "passed"), Check("ops.skip", "skipped", "no GPU")]


def _one(gate: dict, **inputs: object) -> tuple[str, str]:
    v = evaluate(dataclasses.replace(scenario(), gates=parse_gates({"version": 1, "gates": {"g": gate}}), **inputs))
    [g] = v.gates
    return g.outcome.value, g.reason


def test_a_failed_count_names_the_first_five_checks_that_did_not_pass_and_counts_the_rest() -> None:
    stage = report("functional_test", checks=[*PASSED, *FAILED])
    got = _one({"metric": "functional_test.checks.failed", "pass": "== 0"}, reports={"functional_test": stage})
    assert got == (
        "fail",
        "functional_test.checks.failed = 7 checks fails == 0; not passing: ops.c0, ops.c1, ops.c2, ops.c3, ops.c4 "
        "and 2 more",
    )


def test_an_errors_count_names_only_the_checks_that_errored() -> None:
    stage = report("functional_test", checks=[*PASSED, *FAILED])
    got = _one({"metric": "functional_test.checks.errors", "pass": "== 0"}, reports={"functional_test": stage})
    assert got == ("fail", "functional_test.checks.errors = 1 checks fails == 0; not passing: ops.e0")


def test_a_warned_pass_rate_names_them_too_and_a_passing_gate_does_not() -> None:
    stage = report("functional_test", checks=[*[Check(f"ok{i}", "passed") for i in range(9)], FAILED[0]])
    gate = {"metric": "functional_test.checks.pass_rate", "pass": ">= 0.95", "warn": ">= 0.8"}
    assert _one(gate, reports={"functional_test": stage}) == (
        "warn",
        "functional_test.checks.pass_rate = 0.9 misses >= 0.95 but meets the warn rule >= 0.8; not passing: ops.c0",
    )
    tolerated = {"metric": "functional_test.checks.failed", "pass": "<= 1"}
    assert _one(tolerated, reports={"functional_test": stage}) == (
        "pass",
        "functional_test.checks.failed = 1 checks meets <= 1",
    )


def test_a_waived_check_is_not_named_as_not_passing() -> None:
    stage = report("functional_test", checks=[*PASSED, FAILED[0], FAILED[1]])
    doc = {
        "version": 1,
        "gates": {"g": {"metric": "functional_test.checks.failed", "pass": "== 0"}},
        "waivers": [{"gate": "g", "checks": ["ops.c0"], "reason": "known", "owner": "ann", "expires": "2099-12-31"}],
    }
    [g] = evaluate(dataclasses.replace(scenario(), gates=parse_gates(doc), reports={"functional_test": stage})).gates
    assert "not passing: ops.c1;" in g.reason
    assert "ops.c0" not in g.reason.split(";")[1]


JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4" failures="1" errors="1" skipped="0">
<testcase classname="tests.test_ops" name="test_add" time="0.1"/>
<testcase classname="tests.test_ops" name="test_matmul[bf16]" time="0.1"><failure message="drift">x</failure></testcase>
<testcase classname="tests.test_ops" name="test_conv" time="0.1"><error message="crash">y</error></testcase>
<testcase classname="tests.test_ops" name="test_sub" time="0.1"/>
</testsuite></testsuites>
"""


@pytest.mark.parametrize(
    ("metric", "rule", "named"),
    [
        ("failures", "== 0", "tests.test_ops.test_matmul[bf16]"),
        ("errors", "== 0", "tests.test_ops.test_conv"),
        ("pass_rate", ">= 1", "tests.test_ops.test_matmul[bf16], tests.test_ops.test_conv"),
    ],
)
def test_a_junit_gate_names_the_tests_behind_its_count(tmp_path: Path, metric: str, rule: str, named: str) -> None:
    (tmp_path / "r.xml").write_text(JUNIT, encoding="utf-8")
    gate = {"metric": metric, "junit": str(tmp_path / "r.xml"), "pass": rule}
    outcome, reason = _one(gate, junit={"g": summarize([tmp_path / "r.xml"])})
    assert outcome == "fail"
    assert reason.endswith(f"; not passing: {named}")
    assert _one({**gate, "metric": "tests", "pass": ">= 1"}, junit={"g": summarize([tmp_path / "r.xml"])}) == (
        "pass",
        f"{tmp_path / 'r.xml'} tests = 4 tests meets >= 1",
    )


HOSTILE = "x\x1b[2J<script>alert(1)</script>| *bold* [link](https://evil.example) @channel " + "A" * 10_000


def test_a_hostile_test_name_is_cut_and_escaped_in_every_output(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    art = tmp_path / "artifacts"
    write_stage(report("functional_test", checks=[Check("ok", "passed"), Check(HOSTILE, "failed", "boom")]), art)
    gates = tmp_path / "gates.yaml"
    doc = {"version": 1, "gates": {"g": {"metric": "functional_test.checks.failed", "pass": "== 0"}}}
    gates.write_text(json.dumps(doc), encoding="utf-8")
    code = main(["evaluate", "--artifacts", str(art), "--gates", str(gates), "--out", str(tmp_path / "out")])
    out = capsys.readouterr()
    assert code == 1
    verdict = json.loads((tmp_path / "out" / "verdict.json").read_text(encoding="utf-8"))
    [g] = verdict["gates"]
    shown = g["reason"].split("not passing: ", 1)[1]
    assert len(shown) == 120
    assert shown.endswith("…")
    page = (tmp_path / "out" / "verdict.md").read_text(encoding="utf-8")
    assert "not passing: x" in page
    for raw in ("\x1b", "<script>", "](https://"):
        assert raw not in page, raw  # markdown: markup escaped
    assert "\x1b" not in out.out + out.err
    assert "\\x1b" in out.out + out.err
    assert "A" * 121 not in page + out.out + out.err
