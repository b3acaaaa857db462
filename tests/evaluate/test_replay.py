"""gatekeeper history alarms (gatekeeper.evaluate.replay): the baseline gates replayed over a real sqlite history,
each run against the one before it where nothing is known to have changed; how often each gate fails there."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import numpy as np
import pytest

from gatekeeper.cli import main
from gatekeeper.contract.stage_report import Metric, StageReport
from gatekeeper.evaluate.gates import default_gates_path, load_gates
from gatekeeper.evaluate.replay import replay
from gatekeeper.history import RunInfo
from gatekeeper.history.sqlite import SqliteStore
from tests.support.builders import env, report

GATES = load_gates(default_gates_path(cwd=Path("/nonexistent-dir")))
TODAY = dt.date(2026, 12, 4)


def _perf(level: float, rng: np.random.Generator, run_noise: float, torch: str = "2.5.1+rocm6.2") -> StageReport:
    """10 processes x 20 samples; each process its own 1% offset; the run its own ``run_noise`` offset."""
    run = level * np.exp(rng.normal(0, run_noise))
    samples = [list(run * np.exp(rng.normal(0, 0.01)) * np.exp(rng.normal(0, 0.01, 20))) for _ in range(10)]
    pooled = np.concatenate(samples)
    return report(
        "performance_baseline",
        metrics={
            "latency_ms": Metric.of(float(np.median([np.median(s) for s in samples])), "ms", "lower", samples),
            "latency_ms.p99": Metric.of(float(np.quantile(pooled, 0.99)), "ms", "lower"),
        },
        environment=env(torch_version=torch),
    )


def _store(
    tmp_path: Path, name: str, nights: int, run_noise: float, step_at: int | None = None, pipeline: str = "10"
) -> Path:
    db = tmp_path / f"{name}.db"
    store = SqliteStore(db, create=True)
    rng = np.random.default_rng(7)
    for night in range(1, nights + 1):
        stepped = step_at is not None and night >= step_at
        perf = _perf(11.0 if stepped else 10.0, rng, run_noise, "2.6.0+rocm6.2" if stepped else "2.5.1+rocm6.2")
        info = RunInfo("main", f"{night:040x}", f"{pipeline}{night:02d}", "pass", f"2026-11-{night:02d}T02:00:00+00:00")
        store.save(perf, info)
    return db


def _gate(done, name: str):  # type: ignore[no-untyped-def]
    return next(g for g in done.gates if g.gate == name)


def test_a_quiet_runner_fails_the_median_gate_about_as_often_as_its_alpha(tmp_path: Path) -> None:
    db = _store(tmp_path, "quiet", 30, run_noise=0.0)
    done = replay(SqliteStore(db), GATES, today=TODAY)
    median = _gate(done, "latency-median")
    assert (done.runs, done.series, done.pairs) == (30, 1, 29)
    assert median.judged == 29
    assert (median.failed, median.warned) == (0, 0)
    assert median.alpha == 0.01
    assert _gate(done, "p99-latency").judged == 29


def test_a_runner_whose_runs_differ_more_than_their_processes_cries_wolf(tmp_path: Path) -> None:
    # 3% between runs that the 10 processes of a run cannot see: the Welch test takes it for a regression
    db = _store(tmp_path, "noisy", 30, run_noise=0.03)
    done = replay(SqliteStore(db), GATES, today=TODAY)
    median = _gate(done, "latency-median")
    assert median.judged >= 20  # a few pairs may sit on a change point the scan calls (the runs are noisy)
    assert median.rate is not None
    assert median.rate > 0.15
    low, _high = median.interval() or (0.0, 0.0)
    assert low > 0.01  # even the interval's low end is above alpha: the rate is the runner's, not bad luck
    assert median.first_alarms
    assert median.first_alarms[0].startswith("pipeline 10")
    assert median.first_alarms[0].endswith(("(warn)", "(fail)"))


def test_a_real_step_with_a_stack_change_is_left_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = _store(tmp_path, "step", 20, run_noise=0.0, step_at=11)  # +10% with torch 2.6 from night 11
    done = replay(SqliteStore(db), GATES, today=TODAY)
    assert done.pairs == 18
    assert done.left_out == {"a change point between them": 1}  # named first; the stack changed there too
    assert _gate(done, "latency-median").alarms == 0  # the step is not counted as an alarm
    assert main(["history", "alarms", "--history", f"sqlite:{db}"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("18 pairs of consecutive runs with nothing known to have changed between them (20 runs")
    assert "left out: 1 with a change point between them" in out
    assert "latency-median" in out
    assert main(["history", "alarms", "--history", f"sqlite:{db}", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["pairs"] == 18
    assert {g["gate"] for g in data["gates"]} >= {"latency-median", "p99-latency", "sweep-latency"}
    assert main(["history", "alarms", "--history", f"sqlite:{db}", "--format", "md"]) == 0
    assert "| gate | metric | judged | failed | warned | alarm rate |" in capsys.readouterr().out


def test_a_hostile_pipeline_id_reaches_no_terminal_or_table_raw(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = _store(tmp_path, "hostile", 30, run_noise=0.03, pipeline="\x1b[2J\n| x | y |")
    assert main(["history", "alarms", "--history", f"sqlite:{db}"]) == 0
    out = capsys.readouterr().out
    assert "alarms at: pipeline \\x1b[2J\\x0a| x | y |" in out  # one line, the escape shown, not run
    assert "\x1b" not in out
    assert main(["history", "alarms", "--history", f"sqlite:{db}", "--format", "md"]) == 0
    md = capsys.readouterr().out
    assert "\x1b" not in md
    assert "\\| x \\| y \\|" in md  # no extra table columns


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = _store(tmp_path, "few", 3, run_noise=0.0)
    assert main(["history", "alarms", "--history", f"sqlite:{db}", "--limit", "1"]) == 2
    assert "--limit: 1 runs make no pair" in capsys.readouterr().err
    assert main(["history", "alarms", "--history", f"sqlite:{tmp_path / 'none.db'}"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    bad = tmp_path / "gates.yaml"
    bad.write_text("version: 1\ngates: [\n", encoding="utf-8")
    assert main(["history", "alarms", "--history", f"sqlite:{db}", "--gates", str(bad)]) == 2
    assert str(bad) in capsys.readouterr().err
