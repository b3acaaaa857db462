"""The creeping regression: a stable-channel model 2% slower every night, recorded into a sqlite store and
judged by the default gates, night after night. Against the moving baseline every night looks like +2%
(within latency-median's +3%); against the anchor the drift adds up, and latency-drift blocks it. An A/A
history of the same length is never blocked. Stage reports are synthetic (10 processes x 20 samples,
1% noise per process), everything else is the real evaluate: gates file, store, anchor, judge."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import numpy as np
import pytest

from gatekeeper.contract.stage_report import Metric, write_stage
from gatekeeper.evaluate.gates import default_gates_path
from gatekeeper.evaluate.run import run_evaluate
from gatekeeper.history.sqlite import SqliteStore
from tests.support.builders import env, report

NIGHTS = 12
OTHER_STAGES = frozenset({"verify_hip", "functional_test", "compatibility_check"})  # a nightly perf-only job
DEFAULT_GATES = default_gates_path(cwd=Path("/nonexistent-dir"))  # the packaged default gates


def _perf(level: float, rng: np.random.Generator) -> object:
    samples = [list(level * np.exp(rng.normal(0, 0.01)) * np.exp(rng.normal(0, 0.01, 20))) for _ in range(10)]
    return report(
        "performance_baseline",
        metrics={
            "latency_ms": Metric.of(float(np.median(np.concatenate(samples))), "ms", "lower", samples),
            "throughput_cv": Metric.of(0.01, "ratio", "lower"),
        },
        environment=env(channel="stable"),
    )


def _night(tmp_path: Path, db: Path, night: int, level: float, rng: np.random.Generator) -> object:
    artifacts = tmp_path / f"night-{night}"
    write_stage(_perf(level, rng), artifacts)
    environ = {
        "CI_PIPELINE_SOURCE": "schedule",
        "CI_COMMIT_REF_NAME": "main",
        "CI_DEFAULT_BRANCH": "main",
        "CI_PIPELINE_ID": str(1000 + night),
        "CI_COMMIT_SHA": f"{night:040x}",
    }
    return run_evaluate(
        artifacts=artifacts,
        gates_path=DEFAULT_GATES,
        out=artifacts,
        baseline=f"sqlite:{db}",
        record=f"sqlite:{db}",
        channel="stable",
        environ=environ,
        not_selected=OTHER_STAGES,
    )


def _gate(verdict: object, name: str) -> object:
    return next(g for g in verdict.gates if g.name == name)  # type: ignore[attr-defined]


@pytest.mark.slow
def test_a_creeping_regression_is_blocked_by_night_six(tmp_path: Path) -> None:
    db = tmp_path / "history.db"
    rng = np.random.default_rng(6)
    results = []
    for night in range(1, NIGHTS + 1):
        verdict = _night(tmp_path, db, night, 10.0 * 1.02 ** (night - 1), rng)
        results.append(verdict)
        if verdict.result == "blocked":
            break
    blocked_on = len(results)
    assert results[-1].result == "blocked", [v.result for v in results]
    assert blocked_on <= 6
    drift = _gate(results[-1], "latency-drift")
    assert drift.blocking
    # night to night the creep is within latency-median's rule: only the anchor sees it
    assert not _gate(results[-1], "latency-median").blocking
    # the verdict, verdict.md (and so the MR note) name the anchor: night 1's run, pipeline 1001
    anchor = results[-1].anchors["performance_baseline"]
    assert anchor["pipeline_id"] == "1001"
    assert anchor["source"] == "window"
    assert anchor["commit"] == f"{1:040x}"
    assert "vs the anchor: run sqlite:1, pipeline 1001" in drift.reason
    md = (tmp_path / f"night-{blocked_on}" / "verdict.md").read_text(encoding="utf-8")
    assert "`performance_baseline` anchor: run sqlite:1, pipeline 1001, ref main" in md
    saved = json.loads((tmp_path / f"night-{blocked_on}" / "verdict.json").read_text(encoding="utf-8"))
    assert saved["anchors"]["performance_baseline"]["pipeline_id"] == "1001"
    from gatekeeper.notify.alert import load_alert
    from gatekeeper.notify.gitlab_note import note_body

    note = note_body(load_alert(tmp_path / f"night-{blocked_on}" / "verdict.json", environ={}))
    assert "`performance_baseline` anchor: run sqlite:1, pipeline 1001, ref main" in note  # the MR note too
    # a blocked night is not recorded, so the anchor cannot creep along with the model
    recorded = {i.pipeline_id for i, _ in SqliteStore(db).history("performance_baseline", limit=100)}
    assert str(1000 + blocked_on) not in recorded


@pytest.mark.slow
def test_an_a_a_history_of_the_same_length_is_never_blocked(tmp_path: Path) -> None:
    db = tmp_path / "history.db"
    rng = np.random.default_rng(6)
    results = [_night(tmp_path, db, night, 10.0, rng).result for night in range(1, NIGHTS + 1)]
    assert "blocked" not in results, results


def test_the_anchor_set_by_a_release_manager_moves_it_and_nothing_else_does(tmp_path: Path) -> None:
    """Night 3 is 4% slower (a warning, recorded); a release manager accepts the new level, and drift is
    measured from night 3 on. Without that, night 4 at the same level still warns against night 1."""
    db = tmp_path / "history.db"
    rng = np.random.default_rng(1)
    for night in (1, 2, 3):
        _night(tmp_path, db, night, 10.0 * (1.04 if night == 3 else 1.0), rng)
    before = _night(tmp_path / "unpinned", db, 4, 10.4, rng)
    assert before.anchors["performance_baseline"]["pipeline_id"] == "1001"
    assert _gate(before, "latency-drift").outcome.value == "warn"
    store = SqliteStore(db)
    # set now, after night 3 was recorded (a set_at after this job's clock is never believed: sql.SqlStore.anchors)
    mark = store.set_anchor("1003", by="ann", reason="accepted: new attention kernel")
    assert mark.set_by == "ann"
    verdict = _night(tmp_path, db, 4, 10.4, rng)
    anchor = verdict.anchors["performance_baseline"]
    assert (anchor["pipeline_id"], anchor["source"], anchor["set_by"]) == ("1003", "set", "ann")
    assert _gate(verdict, "latency-drift").outcome.value == "pass"
    md = (tmp_path / "night-4" / "verdict.md").read_text(encoding="utf-8")
    assert f"set by ann on {mark.set_at}: accepted: new attention kernel" in md


def test_without_a_store_the_anchor_gate_says_why(tmp_path: Path) -> None:
    artifacts = tmp_path / "a"
    write_stage(_perf(10.0, np.random.default_rng(0)), artifacts)
    verdict = run_evaluate(
        artifacts=artifacts, gates_path=DEFAULT_GATES, out=artifacts, environ={}, not_selected=OTHER_STAGES,
        today=dt.date(2026, 12, 1),
    )  # fmt: skip
    drift = _gate(verdict, "latency-drift")
    assert drift.outcome.value == "skipped"
    assert "no anchor: no history store was given (--baseline)" in drift.reason
