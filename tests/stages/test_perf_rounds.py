"""performance_baseline's rounds loop (stages.perf.rounds): the stored baseline reused, one more process at a
time until the sequential rule decides or the budget ends the run. Timing children are faked (no torch)."""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from gatekeeper.contract.stage_report import Environment, Metric, StageReport, write_stage
from gatekeeper.core.errors import InputError
from stages import performance_baseline as pb
from stages._stage import CommonOptions, Recorder, StageContext
from stages.perf import measure, rounds

ENV = Environment("2.13.0+cpu", "3.11", "runner")
UNDECIDED = (97.0, 107.0, 99.0, 105.0, 96.0, 108.0)  # +2% with 4.6% between processes: 6 cannot tell
CONFIG = {"model": "stages.models:demo_model", "batch_size": 8, "input_shape": None, "sweep": None}


def _ctx(tmp_path: Path, **options: Any) -> StageContext:
    opts = pb.Options(**{"processes": 3, "iterations": 40, **options})
    device = SimpleNamespace(kind="cpu", torch_device="cpu")
    return StageContext("performance_baseline", CommonOptions(out=tmp_path), opts, device, ENV, Recorder("pb"), CONFIG)


def _store(tmp_path: Path, level: float = 100.0, processes: int = 10, converged: bool = True) -> str:
    rng = np.random.default_rng(1)
    groups = [list(level * math.exp(rng.normal(0, 0.01)) * np.exp(rng.normal(0, 0.01, 40))) for _ in range(processes)]
    metrics = {
        "latency_ms": Metric.of(level, "ms", "lower", groups),
        "warmup_converged": Metric.of(1.0 if converged else 0.0, "bool", "higher"),
    }
    report = StageReport(
        "performance_baseline", "passed", "2026-01-01T00:00:00+00:00", 1.0, ENV, metrics, config=CONFIG
    )
    store = tmp_path / "store"
    write_stage(report, store)
    return str(store)


def _fake_children(
    monkeypatch: pytest.MonkeyPatch, level: float, noise: float = 0.01, fail_every: int = 0, levels: tuple = ()
) -> list:
    """Timing children at ``level`` ms with process noise, or at the given ``levels`` in turn."""
    rng = np.random.default_rng(2)
    spread = itertools.cycle(levels) if levels else None
    calls: list[int] = []
    counter = itertools.count(1)

    def child(cfg: dict[str, Any], timeout: float) -> tuple[dict[str, Any] | None, str]:
        n = next(counter)
        calls.append(n)
        if fail_every and n % fail_every == 0:
            return None, "timing process exited with code 1"
        median = next(spread) if spread else level * math.exp(rng.normal(0, noise))
        ms = median * np.exp(rng.normal(0, 0.01, 40))
        result = {"times_s": list(ms / 1000.0), "warmup_converged": True, "warmup_iterations": 10}
        result |= {"peak_memory_mb": 50.0, "threads": 2, "memory_t_s": [0.0, 1.0], "memory_mb": [50.0, 50.0]}
        return result, ""

    monkeypatch.setattr(measure, "child", child)
    return calls


def test_a_clear_regression_stops_after_the_first_round(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _fake_children(monkeypatch, 110.0)
    ctx = _ctx(tmp_path, processes=5)
    results, _, why = rounds.measure_rounds(ctx, {}, rounds.load_baseline(ctx, _store(tmp_path)))
    assert why == ""
    assert len(results) == len(calls) == 5
    seq = ctx.rec.summary["sequential"]
    assert seq["sequential"] is True
    assert seq["verdict"] == "regression"
    assert seq["processes"] == 5
    assert seq["baseline_processes"] == 10
    assert seq["looks"] == [[10, 5]]
    assert "significantly worse" in seq["stopped"]
    info = next(c for c in ctx.rec.checks if c.name == "sequential")
    assert info.status == "info"
    assert info.message.startswith("5 processes against the baseline's 10")


def test_an_unchanged_model_adds_processes_until_equivalent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _fake_children(monkeypatch, 100.0)
    ctx = _ctx(tmp_path)
    results, _, _ = rounds.measure_rounds(ctx, {}, rounds.load_baseline(ctx, _store(tmp_path)))
    seq = ctx.rec.summary["sequential"]
    assert seq["verdict"] == "equivalent"
    assert 3 <= len(results) == len(calls) < 20
    assert seq["looks"] == [[10, n] for n in range(3, len(results) + 1)]  # no decision before 5
    assert [c.name for c in ctx.rec.checks if c.name.startswith("process.")] == [
        f"process.{i}" for i in range(1, len(results) + 1)
    ]


def test_the_budget_ends_an_undecided_run_as_inconclusive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _fake_children(monkeypatch, 0, levels=UNDECIDED)
    ctx = _ctx(tmp_path, max_processes=6, min_effect=0.01)
    results, _, _ = rounds.measure_rounds(ctx, {}, rounds.load_baseline(ctx, _store(tmp_path)))
    seq = ctx.rec.summary["sequential"]
    assert len(results) == len(calls) == 6
    assert seq["verdict"] == "inconclusive"
    assert seq["stopped"].startswith("the budget of 6 processes ran out: ")


def test_max_seconds_and_failed_processes_spend_the_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_children(monkeypatch, 0, levels=UNDECIDED)
    ctx = _ctx(tmp_path, max_seconds=1e-9, min_effect=0.01)
    rounds.measure_rounds(ctx, {}, rounds.load_baseline(ctx, _store(tmp_path)))
    seq = ctx.rec.summary["sequential"]
    assert seq["processes"] == 3
    assert "the budget ran out (--max-seconds 1e-09 spent)" in seq["stopped"]
    calls = _fake_children(monkeypatch, 0, fail_every=2, levels=UNDECIDED)
    ctx = _ctx(tmp_path, max_processes=6, min_effect=0.01)
    results, _, _ = rounds.measure_rounds(ctx, {}, rounds.load_baseline(ctx, _store(tmp_path)))
    assert len(calls) == 6  # started: the GPU time is spent whether a process succeeds or not
    assert len(results) == 3
    assert "--max-processes 6 started, 3 failed" in ctx.rec.summary["sequential"]["stopped"]


def test_the_rounds_decide_under_max_cv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    noisy = tuple(130.0 * m for m in (0.9, 1.0, 1.1, 0.95, 1.05, 0.92))  # +30%, process medians' CV near 8%
    _fake_children(monkeypatch, 0, levels=noisy)
    ctx = _ctx(tmp_path, processes=5, max_processes=6)
    rounds.measure_rounds(ctx, {}, rounds.load_baseline(ctx, _store(tmp_path)))
    seq = ctx.rec.summary["sequential"]
    assert (seq["verdict"], seq["plan"]["max_cv"]) == ("inconclusive", 0.05)
    assert "candidate run fluctuates too much: CV of process medians 7." in seq["stopped"]
    assert "> 5% (--max-cv of performance_baseline; " in seq["stopped"]
    _fake_children(monkeypatch, 0, levels=noisy)
    ctx = _ctx(tmp_path, processes=5, max_processes=6, max_cv=0.10)
    rounds.measure_rounds(ctx, {}, rounds.load_baseline(ctx, _store(tmp_path)))
    seq = ctx.rec.summary["sequential"]
    assert (seq["verdict"], seq["plan"]["max_cv"], seq["processes"]) == ("regression", 0.10, 5)


def test_without_a_usable_baseline_the_first_round_is_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _fake_children(monkeypatch, 100.0)
    ctx = _ctx(tmp_path)
    rounds.measure_rounds(ctx, {}, rounds.load_baseline(ctx, None))
    seq = ctx.rec.summary["sequential"]
    assert seq == {
        "metric": "latency_ms",
        "sequential": False,
        "processes": 3,
        "attempted": 3,
        "stopped": "no baseline to decide against (no --baseline store was given): ran the first round of 3 processes",
    }
    assert len(calls) == 3
    cold = rounds.load_baseline(ctx, _store(tmp_path / "cold", converged=False))
    assert cold.samples is None
    assert "warm-up did not converge" in cold.note
    other = _ctx(tmp_path)
    other.config = {**CONFIG, "batch_size": 16}
    assert "has no comparable performance_baseline result" in rounds.load_baseline(other, _store(tmp_path)).note
    missing = rounds.load_baseline(ctx, str(tmp_path / "nowhere"))  # a first run: the directory is not there yet
    assert missing.samples is None
    assert "has no comparable performance_baseline result" in missing.note
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "performance_baseline.json").write_text("{", encoding="utf-8")
    unread = rounds.load_baseline(ctx, str(broken))
    assert unread.samples is None
    assert "could not be read" in unread.note
    with pytest.raises(InputError):
        rounds.load_baseline(ctx, "nosuchstore:x")
    # a pipeline's first run (make demo on a fresh checkout): the store it will record into does not exist yet
    first = rounds.load_baseline(ctx, f"sqlite:{tmp_path / 'fresh' / 'history.db'}")
    assert first.samples is None
    assert first.note.startswith("no passed performance_baseline result")
    assert "(first run" in first.note
    assert not (tmp_path / "fresh").exists()  # reading never creates a store


def test_round_options_are_checked(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert pb.main(["--out", str(tmp_path), "--processes", "5", "--max-processes", "4"]) == 2
    assert "--max-processes: must be at least --processes and 3" in capsys.readouterr().err
    assert pb.main(["--out", str(tmp_path), "--max-seconds", "0"]) == 2
    assert "--max-seconds: must be positive" in capsys.readouterr().err
    assert pb.main(["--out", str(tmp_path), "--min-effect", "3"]) == 2
    assert "--min-effect: must lie between 0 and 1" in capsys.readouterr().err
    for bad in ("0", "0.9"):
        assert pb.main(["--out", str(tmp_path), "--max-cv", bad]) == 2
        assert f"--max-cv: must lie in (0, 0.5] (got {bad})" in capsys.readouterr().err


@pytest.mark.slow
def test_the_stage_rounds_against_a_stored_run_and_evaluate_replays_them(tmp_path: Path) -> None:
    """Real timing processes on the CPU: a first run is the baseline store of the second."""
    import json

    from gatekeeper.evaluate.run import run_evaluate

    argv = ["--device", "cpu", "--batch-size", "2", "--processes", "3", "--iterations", "8", "--warmup", "2"]
    assert pb.main(["--out", str(tmp_path / "base"), *argv]) == 0
    stored = tmp_path / "base" / "performance_baseline.json"
    first = json.loads(stored.read_text(encoding="utf-8"))
    assert first["summary"]["sequential"]["sequential"] is False
    # Two warm-up iterations rarely converge on a loaded 2-core runner; the rounds, not that check
    # (test_without_a_usable_baseline_the_first_round_is_the_run), are under test here.
    first["metrics"]["warmup_converged"]["value"] = 1.0
    stored.write_text(json.dumps(first), encoding="utf-8")
    assert (
        pb.main(["--out", str(tmp_path / "head"), *argv, "--baseline", str(tmp_path / "base"), "--max-processes", "6"])
        == 0
    )
    doc = json.loads((tmp_path / "head" / "performance_baseline.json").read_text(encoding="utf-8"))
    seq = doc["summary"]["sequential"]
    assert seq["sequential"] is True
    assert seq["baseline_processes"] == 3
    assert 3 <= seq["processes"] == len(doc["metrics"]["latency_ms"]["samples"]) <= 6
    assert seq["looks"][-1] == [3, seq["processes"]]
    assert seq["stopped"]  # decided, budget, or a baseline too noisy on a shared CPU: said either way
    assert any(c["name"] == "sequential" and c["status"] == "info" for c in doc["checks"])
    doc["metrics"]["warmup_converged"]["value"] = 1.0  # as above: evaluate would stop at that check first
    (tmp_path / "head" / "performance_baseline.json").write_text(json.dumps(doc), encoding="utf-8")
    gates = tmp_path / "gates.yaml"
    gates.write_text(
        "version: 1\ngates:\n  latency-median:\n    metric: performance_baseline.latency_ms\n"
        "    compare: baseline\n    pass: '<= +3%'\n    on_missing: fail\n",
        encoding="utf-8",
    )
    verdict = run_evaluate(
        artifacts=tmp_path / "head", gates_path=gates, out=tmp_path / "out", baseline=str(tmp_path / "base"), environ={}
    )
    gate = next(g for g in verdict.gates if g.name == "latency-median")
    assert gate.comparison is not None
    assert gate.comparison["sequential"] is True
    assert gate.comparison["processes"] == seq["processes"]
    assert gate.comparison["stopped"] == seq["stopped"]
    assert f"{seq['processes']} processes against 3, stopped: " in gate.reason
