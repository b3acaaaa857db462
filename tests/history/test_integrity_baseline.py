"""The baseline policy (issue 12): no ratchet, no cross-channel or cross-branch baseline, no poisoned record."""

from __future__ import annotations

import json
import sqlite3

from gatekeeper.contract.stage_report import Metric, write_stage
from gatekeeper.evaluate.run import run_evaluate
from gatekeeper.history import RunInfo, baseline_branch
from gatekeeper.history.gitlab import GitLabStore
from gatekeeper.history.sqlite import SqliteStore
from tests.history.test_baseline_gitlab import JOB_TOKEN, TOKEN, FakeGitLab, _zip, gitlab  # noqa: F401
from tests.history.test_baseline_gitlab import _report as _gl_report
from tests.support.builders import env, report

GATES = """version: 1
gates:
  latency:
    metric: performance_baseline.latency_ms
    compare: baseline
    pass: "<= +20%"
"""


def _perf(value: float, channel: str = "stable", samples=None):
    return report(
        "performance_baseline",
        metrics={"latency_ms": Metric.of(value, "ms", "lower", samples)},
        environment=env(channel=channel),
    )


def _run(tmp_path, name, value, *, db, environ=None, channel="stable", record=True, record_blocked=False):
    arts = tmp_path / name
    write_stage(_perf(value, channel), arts)
    gates = tmp_path / "gates.yaml"
    gates.write_text(GATES)
    return run_evaluate(
        artifacts=arts,
        gates_path=gates,
        out=arts,
        baseline=f"sqlite:{db}",
        channel=channel,
        environ={"CI_COMMIT_REF_NAME": "main", "CI_PIPELINE_SOURCE": "push", **(environ or {})},
        record=f"sqlite:{db}" if record else None,
        record_blocked=record_blocked,
    )


def _rows(db):
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT ref, channel, verdict FROM results ORDER BY id").fetchall()


def test_a_blocked_run_is_not_recorded_so_the_baseline_does_not_ratchet(tmp_path):
    db = tmp_path / "h.db"
    SqliteStore(db, create=True).save(_perf(100.0), RunInfo("main", "c0", "1", "pass", "2026-01-01T00:00:00+00:00"))
    assert _run(tmp_path, "a", 130.0, db=db).result == "blocked"
    assert len(_rows(db)) == 1
    assert _run(tmp_path, "b", 130.0, db=db).result == "blocked"


def test_record_blocked_keeps_the_run_but_it_never_becomes_the_baseline(tmp_path):
    db = tmp_path / "h.db"
    SqliteStore(db, create=True).save(_perf(100.0), RunInfo("main", "c0", "1", "pass", "2026-01-01T00:00:00+00:00"))
    assert _run(tmp_path, "a", 130.0, db=db, record_blocked=True).result == "blocked"
    assert [r[2] for r in _rows(db)] == ["pass", "blocked"]
    assert _run(tmp_path, "b", 130.0, db=db).result == "blocked"


def test_a_nightly_result_is_never_the_stable_baseline(tmp_path):
    db = tmp_path / "h.db"
    SqliteStore(db, create=True).save(_perf(100.0), RunInfo("main", "c0", "1", "pass", "2026-01-01T00:00:00+00:00"))
    SqliteStore(db, create=True).save(
        _perf(300.0, channel="nightly"), RunInfo("main", "c1", "2", "pass", "2026-01-02T00:00:00+00:00")
    )
    verdict = _run(tmp_path, "a", 290.0, db=db)
    assert verdict.result == "blocked"
    assert verdict.gates[0].baseline_value == 100.0


def test_a_merge_request_compares_with_its_target_branch(tmp_path):
    db = tmp_path / "h.db"
    SqliteStore(db, create=True).save(_perf(100.0), RunInfo("main", "c0", "1", "pass", "2026-01-01T00:00:00+00:00"))
    SqliteStore(db, create=True).save(_perf(300.0), RunInfo("feature", "c1", "2", "pass", "2026-01-02T00:00:00+00:00"))
    mr = {
        "CI_PIPELINE_SOURCE": "merge_request_event",
        "CI_COMMIT_REF_NAME": "feature",
        "CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "main",
    }
    verdict = _run(tmp_path, "a", 290.0, db=db, environ=mr, record=False)
    assert verdict.result == "blocked"
    used = verdict.baselines["performance_baseline"]
    assert (used["ref"], used["commit"], used["pipeline_id"]) == ("main", "c0", "1")
    assert used["recorded_at"].startswith("2026-01-01")
    assert "run_id" in used


def test_the_branch_a_baseline_comes_from():
    assert baseline_branch({"CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "rel", "CI_PIPELINE_SOURCE": "merge_request_event"})
    assert (
        baseline_branch({"CI_PIPELINE_SOURCE": "merge_request_event", "CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "rel"})
        == "rel"
    )
    assert baseline_branch({"GATEKEEPER_PROTECTED_BRANCH": "trunk", "CI_DEFAULT_BRANCH": "main"}) == "trunk"
    assert baseline_branch({"CI_DEFAULT_BRANCH": "main"}) == "main"
    assert baseline_branch({}) is None  # a local run: any branch


def test_a_record_holding_nan_is_skipped_with_a_warning(tmp_path):
    db = tmp_path / "h.db"
    store = SqliteStore(db, create=True)
    good = _perf(100.0, samples=[[100.0, 101.0], [99.0, 100.5], [100.2, 99.8]])
    store.save(good, RunInfo("main", "c0", "1", "pass", "2026-01-01T00:00:00+00:00"))
    poisoned = _perf(100.0, samples=[[float("nan"), 101.0], [99.0, 100.5], [100.2, 99.8]])
    store.save(poisoned, RunInfo("main", "c1", "2", "pass", "2026-01-02T00:00:00+00:00"))
    verdict = _run(tmp_path, "a", 100.0, db=db, record=False)
    assert verdict.result in ("pass", "warn")
    assert verdict.baselines["performance_baseline"]["commit"] == "c0"
    assert any("skipped" in w and "c1" in w and "latency_ms" in w for w in verdict.warnings)


def test_gitlab_store_in_a_merge_request_reads_the_target_and_names_the_pipeline(gitlab):  # noqa: F811
    fake, api = gitlab
    fake.pipelines = [
        {"id": 9, "ref": "main", "status": "success", "sha": "abc123", "updated_at": "2026-02-01T00:00:00Z"},
        {"id": 12, "ref": "feature", "status": "success", "sha": "fff", "updated_at": "2026-02-02T00:00:00Z"},
    ]
    nightly = _gl_report(2.0)
    nightly_doc = nightly.to_dict()
    nightly_doc["environment"]["channel"] = "nightly"
    fake.jobs = {
        9: [
            {"id": 90, "name": "gatekeeper:performance_baseline: [nightly]", "artifacts_file": {"size": 10}},
            {"id": 91, "name": "gatekeeper:performance_baseline: [stable]", "artifacts_file": {"size": 10}},
        ]
    }
    fake.files["jobs/90/artifacts"] = _zip("artifacts/nightly/performance_baseline.json", nightly_doc)
    fake.files["jobs/91/artifacts"] = _zip("artifacts/stable/performance_baseline.json", _gl_report(7.0).to_dict())
    environ = {
        "CI_API_V4_URL": api,
        "CI_PROJECT_ID": "42",
        "CI_PIPELINE_SOURCE": "merge_request_event",
        "CI_COMMIT_REF_NAME": "feature",
        "CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "main",
        "GATEKEEPER_GITLAB_TOKEN": TOKEN,
    }
    store = GitLabStore.from_env("", environ)
    found = store.latest_record("performance_baseline", _gl_report(0.0), branch=baseline_branch(environ))
    assert found is not None
    info, got = found
    assert got.metrics["latency_ms"].value == 7.0  # the nightly artifact came first and was refused
    assert (info.ref, info.pipeline_id, info.commit) == ("main", "9", "abc123")
    assert [r[1].get("ref") for r in fake.requests if r[0].endswith("/pipelines")] == [["main"]]
    assert json.dumps(info.__dict__)
