"""Issue 23, principles 1 and 3 for evaluate: the job's channel picks the baseline, never the artifacts;
a failed evaluation leaves no verdict of an earlier run behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gatekeeper import cli
from gatekeeper.contract.stage_report import Metric, write_stage
from gatekeeper.evaluate.run import load_baselines
from gatekeeper.history import RunInfo
from gatekeeper.history.sqlite import SqliteStore
from tests.support.builders import env, report

OUTPUTS = ("verdict.json", "verdict.md", "gates.junit.xml", "metrics.txt")  # evaluate writes these

GATES = """version: 1
gates:
  latency:
    metric: performance_baseline.latency_ms
    compare: baseline
    pass: "<= +20%"
"""


def _perf(value: float, channel: str):
    return report(
        "performance_baseline",
        metrics={"latency_ms": Metric.of(value, "ms", "lower")},
        environment=env(channel=channel),
    )


@pytest.fixture
def store(tmp_path) -> Path:
    """A stable baseline of 100 ms and a nightly one of 300 ms, both on main."""
    db = tmp_path / "h.db"
    SqliteStore(db).save(_perf(100.0, "stable"), RunInfo("main", "c0", "1", "pass", "2026-01-01T00:00:00+00:00"))
    SqliteStore(db).save(_perf(300.0, "nightly"), RunInfo("main", "c1", "2", "pass", "2026-01-02T00:00:00+00:00"))
    (tmp_path / "gates.yaml").write_text(GATES)
    return db


def _evaluate(tmp_path, db, claimed: str, *extra: str) -> int:
    arts = tmp_path / "arts"
    write_stage(_perf(300.0, claimed), arts)  # 3x slower than the stable baseline
    argv = ["evaluate", "--artifacts", str(arts), "--gates", str(tmp_path / "gates.yaml")]
    return cli.main([*argv, "--baseline", f"sqlite:{db}", *extra])


def test_stable_artifacts_are_blocked_against_the_stable_baseline(tmp_path, store, capsys):
    assert _evaluate(tmp_path, store, "stable", "--channel", "stable") == 1


@pytest.mark.parametrize(
    ("flags", "environ", "source"),
    [
        (["--channel", "stable"], {}, "--channel"),
        ([], {"GATEKEEPER_CHANNEL": "stable"}, "GATEKEEPER_CHANNEL"),
        ([], {}, "the default"),
    ],
)
def test_artifacts_claiming_another_channel_are_an_input_error(
    tmp_path, store, capsys, monkeypatch, flags, environ, source
):
    """The finding: the same 3x slower run passed (exit 0) once its artifacts said "nightly"."""
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    assert _evaluate(tmp_path, store, "nightly", *flags) == 2
    err = capsys.readouterr().err
    assert "performance_baseline.json" in err
    assert "'nightly'" in err
    assert "'stable'" in err
    assert source in err
    assert not (tmp_path / "arts" / "verdict.json").exists()


def test_the_baseline_is_looked_up_by_the_jobs_channel(store):
    """Whatever the report says, the store is asked for the job's channel (and the report's device)."""
    found = load_baselines(f"sqlite:{store}", {"performance_baseline": _perf(290.0, "nightly")}, {}, channel="stable")
    assert found.reports["performance_baseline"].metrics["latency_ms"].value == 100.0
    found = load_baselines(f"sqlite:{store}", {"performance_baseline": _perf(290.0, "stable")}, {}, channel="nightly")
    assert found.reports["performance_baseline"].metrics["latency_ms"].value == 300.0


@pytest.mark.parametrize(
    "breakage",
    [
        pytest.param(lambda d: (d / "gates.yaml").write_text("version: 1\ngates: [broken"), id="bad-gates"),
        pytest.param(lambda d: (d / "arts" / "performance_baseline.json").write_text("{"), id="bad-artifact"),
        pytest.param(lambda d: write_stage(_perf(100.0, "nightly"), d / "arts"), id="artifact-of-another-channel"),
    ],
)
def test_a_failed_evaluation_leaves_none_of_its_outputs_behind(tmp_path, capsys, breakage):
    """The finding: a verdict.json saying pass (planted, or from an earlier step) survived an exit 2."""
    (tmp_path / "gates.yaml").write_text(GATES.replace("    compare: baseline\n", "").replace("+20%", "1000"))
    arts = tmp_path / "arts"
    write_stage(_perf(100.0, "stable"), arts)
    argv = ["evaluate", "--artifacts", str(arts), "--gates", str(tmp_path / "gates.yaml"), "--channel", "stable"]
    assert cli.main(argv) == 0
    assert {p.name for p in arts.iterdir()} >= set(OUTPUTS)
    planted = json.loads((arts / "verdict.json").read_text())
    assert planted["result"] == "pass"
    breakage(tmp_path)
    assert cli.main(argv) == 2
    left = {p.name for p in arts.iterdir()} & set(OUTPUTS)
    assert left == set(), left


def test_every_output_evaluate_writes_is_one_it_owns_and_removes(tmp_path, capsys):
    (tmp_path / "gates.yaml").write_text(GATES.replace("    compare: baseline\n", "").replace("+20%", "1000"))
    arts, out = tmp_path / "arts", tmp_path / "out"
    write_stage(_perf(100.0, "stable"), arts)
    assert (
        cli.main(["evaluate", "--artifacts", str(arts), "--gates", str(tmp_path / "gates.yaml"), "--out", str(out)])
        == 0
    )
    assert {p.name for p in out.iterdir()} == set(OUTPUTS)


def test_an_output_that_cannot_be_removed_is_an_input_error(tmp_path, capsys):
    (tmp_path / "gates.yaml").write_text(GATES.replace("    compare: baseline\n", "").replace("+20%", "1000"))
    arts = tmp_path / "arts"
    write_stage(_perf(100.0, "stable"), arts)
    (arts / "verdict.json").mkdir()
    (arts / "verdict.json" / "x").write_text("{}")
    assert cli.main(["evaluate", "--artifacts", str(arts), "--gates", str(tmp_path / "gates.yaml")]) == 2
    assert "verdict.json" in capsys.readouterr().err


def test_the_pipeline_driver_decides_one_channel_for_stages_and_evaluate(monkeypatch):
    from importlib import metadata

    from gatekeeper.run.pipeline import job_channel

    monkeypatch.setattr(metadata, "version", lambda name: "2.9.0.dev20260101+cpu")
    assert job_channel(None, {}) == "nightly"  # what the stages would pick, now given to all of them
    assert job_channel(None, {"GATEKEEPER_CHANNEL": "stable"}) == "stable"
    assert job_channel("stable", {"GATEKEEPER_CHANNEL": "nightly"}) == "stable"
    monkeypatch.setattr(metadata, "version", lambda name: "2.13.0+cpu")
    assert job_channel(None, {}) == "stable"


def test_a_history_record_that_contradicts_its_row_is_ignored(tmp_path, store, capsys):
    """A row filed under the stable channel whose stored report says nightly is never the stable baseline,
    and the skip is a named warning."""
    import sqlite3

    SqliteStore(store).save(_perf(300.0, "nightly"), RunInfo("main", "c2", "3", "pass", "2026-01-03T00:00:00+00:00"))
    with sqlite3.connect(store) as conn:
        conn.execute("UPDATE results SET channel = 'stable' WHERE pipeline_id = '3'")
    found = load_baselines(f"sqlite:{store}", {"performance_baseline": _perf(290.0, "stable")}, {}, channel="stable")
    assert found.reports["performance_baseline"].metrics["latency_ms"].value == 100.0
    assert found.runs["performance_baseline"]["pipeline_id"] == "1"
    assert any("channel 'stable', its stored report says 'nightly'" in w for w in found.warnings), found.warnings
