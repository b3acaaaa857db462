"""Skip markers, upstream failures and the breaker's one-line diagnosis, exactly (written against surviving
mutants of gatekeeper.breaker.markers and policy: a changed message, bound or loop exit must fail a test)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gatekeeper.breaker.markers import (
    MARKER_SCHEMA,
    diagnosis_from_artifacts,
    file_stem,
    marker_problem,
    open_markers,
    upstream_failure,
)
from gatekeeper.breaker.policy import static_policy
from gatekeeper.contract.stage_report import Check, write_stage
from tests.support.builders import report

ENV = {"CI_PIPELINE_ID": "77"}


def _marker(directory: Path, job: str, **kw: object) -> Path:
    doc = {"schema": MARKER_SCHEMA, "channel": "nightly", "job": job, "message": f"{job} skipped", "pipeline_id": "77"}
    doc.update(kw)
    path = directory / f"{job}.breaker.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize(
    ("job", "stem"),
    [
        ("../a/b", "_a_b"),  # the separators become "_", the leading dots go: it stays inside the directory
        ("a b", "a_b"),
        (".hidden", "hidden"),
        ("x.", "x."),  # only leading dots are stripped
        ("X.y", "X.y"),
        ("...", "_"),
        ("functional_test", "functional_test"),
    ],
)
def test_file_stem_exactly(job: str, stem: str) -> None:
    assert file_stem(job) == stem


def test_upstream_failure_names_the_stage_its_status_and_counts(tmp_path: Path) -> None:
    assert upstream_failure(tmp_path, ["verify_hip"]) == (
        "verify_hip wrote no report (crashed or timed out before writing verify_hip.json)"
    )
    write_stage(report("verify_hip", status="passed"), tmp_path)
    errored = report("functional_test", status="error", checks=[Check("a", "error", "boom"), Check("b", "passed")])
    write_stage(errored, tmp_path)
    assert upstream_failure(tmp_path, ["verify_hip"]) is None
    assert upstream_failure(tmp_path, ["verify_hip", "functional_test"]) == "functional_test error (0 failed, 1 errors)"
    failed = report("functional_test", status="failed", checks=[Check("a", "failed", "x"), Check("b", "failed", "y")])
    write_stage(failed, tmp_path)
    assert upstream_failure(tmp_path, ["functional_test"]) == "functional_test failed (2 failed, 0 errors)"


def test_open_markers_reads_every_valid_marker_after_skipping_its_own_and_bad_ones(tmp_path: Path) -> None:
    # sorted order: compatibility_check (empty), functional_test (own), performance_baseline, verify_hip
    empty = tmp_path / "compatibility_check.breaker.json"
    empty.write_text("")
    _marker(tmp_path, "functional_test")
    _marker(tmp_path, "performance_baseline", channel="stable")
    _marker(tmp_path, "verify_hip")
    found, warnings = open_markers(tmp_path, "functional_test", "nightly", ENV)
    assert found == ["verify_hip: verify_hip skipped"]
    assert warnings == [
        f"marker ignored: {empty}: empty breaker marker; hint: rerun the step that wrote it",
        f"marker {tmp_path / 'performance_baseline.breaker.json'} ignored: "
        "written for the 'stable' channel, not 'nightly'",
    ]


@pytest.mark.parametrize(
    ("name", "doc", "problem"),
    [
        ("verify_hip", [1], f"not a {MARKER_SCHEMA} marker"),
        ("verify_hip", {"schema": "other"}, f"not a {MARKER_SCHEMA} marker"),
        (
            "verify_hip",
            {"schema": MARKER_SCHEMA, "job": "gate"},
            "job 'gate' is not the file's job 'verify_hip' "
            "(one of verify_hip, functional_test, performance_baseline, compatibility_check, gate)",
        ),
        (
            "evil",
            {"schema": MARKER_SCHEMA, "job": "evil"},
            "job 'evil' is not the file's job 'evil' "
            "(one of verify_hip, functional_test, performance_baseline, compatibility_check, gate)",
        ),
        (
            "gate",
            {"schema": MARKER_SCHEMA, "job": "gate", "channel": "stable"},
            "written for the 'stable' channel, not 'nightly'",
        ),
        (
            "gate",
            {"schema": MARKER_SCHEMA, "job": "gate", "channel": "nightly", "pipeline_id": "76"},
            "written by pipeline 76, not this pipeline 77",
        ),
        ("gate", {"schema": MARKER_SCHEMA, "job": "gate", "channel": "nightly", "pipeline_id": "77"}, "no message"),
        (
            "gate",
            {"schema": MARKER_SCHEMA, "job": "gate", "channel": "nightly", "pipeline_id": "77", "message": 5},
            "no message",
        ),
        (
            "gate",
            {"schema": MARKER_SCHEMA, "job": "gate", "channel": "nightly", "pipeline_id": "77", "message": ""},
            "no message",
        ),
        (
            "gate",
            {"schema": MARKER_SCHEMA, "job": "gate", "channel": "nightly", "pipeline_id": "77", "message": "m"},
            None,
        ),
    ],
)
def test_marker_problem_exactly(tmp_path: Path, name: str, doc: object, problem: str | None) -> None:
    assert marker_problem(doc, tmp_path / f"{name}.breaker.json", "nightly", "77") == problem


def _stage_with(tmp_path: Path, checks: list[Check]) -> None:
    write_stage(report("functional_test", status="failed", checks=checks), tmp_path)


def test_diagnosis_is_the_first_two_bad_checks_and_how_many_more(tmp_path: Path) -> None:
    assert diagnosis_from_artifacts(tmp_path, "functional_test") == (
        "functional_test wrote no report (crashed or timed out before writing functional_test.json)"
    )
    _stage_with(tmp_path, [Check("ok", "passed"), Check("a", "failed", "m1"), Check("s", "skipped", "why")])
    assert diagnosis_from_artifacts(tmp_path, "functional_test") == "a: m1"
    _stage_with(tmp_path, [Check("a", "failed", "m1"), Check("b", "error", "m2")])
    assert diagnosis_from_artifacts(tmp_path, "functional_test") == "a: m1; b: m2"
    _stage_with(tmp_path, [Check("a", "failed", "m1"), Check("b", "error", "m2"), Check("c", "failed", "m3")])
    assert diagnosis_from_artifacts(tmp_path, "functional_test") == "a: m1; b: m2 (+1 more)"
    bad = [Check(f"c{i}", "error", "m") for i in range(5)]
    _stage_with(tmp_path, bad)
    assert diagnosis_from_artifacts(tmp_path, "functional_test") == "c0: m; c1: m (+3 more)"
    _stage_with(tmp_path, [Check("a", "failed", "x" * 400)])
    assert diagnosis_from_artifacts(tmp_path, "functional_test") == "a: " + "x" * 297


def test_diagnosis_of_a_passing_or_unreadable_report(tmp_path: Path) -> None:
    write_stage(report("functional_test", checks=[Check("ok", "passed"), Check("i", "info", "fact")]), tmp_path)
    assert diagnosis_from_artifacts(tmp_path, "functional_test") is None
    (tmp_path / "functional_test.json").write_text("")
    got = diagnosis_from_artifacts(tmp_path, "functional_test")
    assert got == f"functional_test report unreadable ({tmp_path / 'functional_test.json'}: empty stage artifact; " + (
        "hint: rerun the step that wrote it)"
    )


def test_a_merge_request_pipeline_without_its_target_branch_blocks() -> None:
    # GitLab always sets the target of a merge-request pipeline; when it is missing, nothing is waived.
    got = static_policy({"CI_PIPELINE_SOURCE": "merge_request_event", "CI_COMMIT_REF_NAME": "feature"}, "stable")
    assert (got.allowed, got.may_fail, got.protected) == (True, False, False)
    assert got.message == "policy: stable channel allowed (merge_request_event on feature); failures block"
