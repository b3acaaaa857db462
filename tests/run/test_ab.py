from __future__ import annotations

import json
from pathlib import Path

import git
import pytest

from gatekeeper import cli
from gatekeeper.contract.stage_report import Environment, Metric, StageReport
from gatekeeper.core.errors import InputError
from gatekeeper.core.exitcodes import ExitCode
from gatekeeper.run.ab import exit_code, judge, run_ab

# The model advances a virtual clock that the stage's timer reads (time.perf_counter, patched in the timing process
# that imports this file), by DELAY_S per forward with a 2% jitter. So the verdict and the ratio follow from the code
# ab runs, never from how loaded the machine is: this test checks ab's protocol (a worktree for the base, base and
# head alternated, samples pooled, judged, summarised); the timer itself is measured in benchmarks/.
MODEL = """
import os
import random
import time

import torch

DELAY_S = {delay}
_NOW = [1000.0]
_JITTER = random.Random(os.getpid())
time.perf_counter = lambda: _NOW[0]


class Slow(torch.nn.Module):
    def forward(self, x):
        _NOW[0] += DELAY_S * (1 + 0.02 * _JITTER.uniform(-1, 1))
        return x * 2

    def example_input(self, batch_size=8):
        return torch.ones(batch_size, 4)


def build():
    return Slow()
"""


def _report(medians: list[float], converged: bool = True) -> StageReport:
    env = Environment("2.5.0", "3.11", "runner")
    metrics = {
        "latency_ms": Metric.of(sum(medians) / len(medians), "ms", "lower", [[m] * 30 for m in medians]),
        "warmup_converged": Metric.of(1.0 if converged else 0.0, "bool", "higher"),
    }
    return StageReport("performance_baseline", "passed", "2026-01-01T00:00:00+00:00", 1.0, env, metrics)


def test_judge_pools_rounds_and_maps_exit_codes() -> None:
    base = [_report([10.0, 10.1, 9.9]), _report([10.05, 9.95, 10.0])]
    slow = [_report([11.0, 11.1, 10.9]), _report([11.05, 10.95, 11.0])]
    c = judge(base, slow, "latency_ms")
    assert c.verdict == "regression"
    assert exit_code(c) == ExitCode.BLOCKED
    same = judge(base, base, "latency_ms")
    assert same.verdict == "equivalent"
    assert exit_code(same) == ExitCode.PASS
    cold = judge(base, [_report([11.0, 11.1, 10.9], converged=False)] * 2, "latency_ms")
    assert cold.verdict == "inconclusive"
    assert cold.reason.startswith("warm-up did not converge in the head run")
    assert exit_code(cold) == ExitCode.WARN
    with pytest.raises(InputError, match="no samples of 'throughput'"):
        judge(base, slow, "throughput")


def test_bad_base_and_not_a_repo_are_input_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(InputError, match="not inside a git repository"):
        run_ab(base="main", out=tmp_path / "o", repo=tmp_path)
    repo = git.Repo.init(tmp_path / "r")
    (tmp_path / "r" / "a.txt").write_text("a", encoding="utf-8")
    repo.index.add(["a.txt"])
    repo.index.commit("a")
    with pytest.raises(InputError, match="'nope' is not a commit here"):
        run_ab(base="nope", out=tmp_path / "o", repo=tmp_path / "r")
    assert cli.main(["ab", "--base", "main", "--out", str(tmp_path / "o"), "--rounds", "0"]) == 2
    assert "--rounds: must be at least 1" in capsys.readouterr().err


@pytest.mark.slow
def test_ab_catches_a_slower_head_in_a_tiny_repo(tmp_path: Path) -> None:
    work = tmp_path / "modelrepo"
    repo = git.Repo.init(work, initial_branch="main")
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "t")
        cw.set_value("user", "email", "t@example.invalid")
    (work / "slowmodel.py").write_text(MODEL.format(delay=0.003), encoding="utf-8")
    repo.index.add(["slowmodel.py"])
    repo.index.commit("fast model")
    (work / "slowmodel.py").write_text(MODEL.format(delay=0.015), encoding="utf-8")  # uncommitted: head 5x slower
    lines: list[str] = []
    stage_args = ["--device", "cpu", "--model", "slowmodel:build", "--batch-size", "2"]
    stage_args += ["--processes", "3", "--iterations", "15", "--warmup", "2"]
    # a shared 2-core runner fluctuates more than 5% between processes; a 2x slowdown still stands out
    code = run_ab(
        base="main", out=tmp_path / "ab", rounds=1, max_cv=0.5, stage_args=stage_args, repo=work, log=lines.append
    )
    text = "\n".join(lines)
    assert code == ExitCode.BLOCKED, text
    assert "-> regression" in text
    summary = json.loads((tmp_path / "ab" / "ab.json").read_text(encoding="utf-8"))
    assert summary["verdict"] == "regression"
    assert 4.8 < summary["ratio"] < 5.2  # 15 ms against 3 ms of virtual time, each within 2%
    assert (tmp_path / "ab" / "base" / "round1" / "performance_baseline.json").exists()
    assert repo.git.worktree("list").count("\n") == 0  # the temporary worktree is gone


def _tiny_repo(tmp_path: Path) -> Path:
    repo = git.Repo.init(tmp_path / "r", initial_branch="main")
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "t")
        cw.set_value("user", "email", "t@example.invalid")
    (tmp_path / "r" / "a.txt").write_text("a", encoding="utf-8")
    repo.index.add(["a.txt"])
    repo.index.commit("a")
    return tmp_path / "r"


def _fake_stage(monkeypatch: pytest.MonkeyPatch, levels: dict[str, list[float]]) -> list[str]:
    """Each stage run writes a report whose process medians are the next three of its side's levels."""
    from gatekeeper.contract.stage_report import write_stage
    from gatekeeper.run import ab

    order: list[str] = []
    taken = {"base": 0, "head": 0}

    def run_stage(tree: Path, stage: str, out: Path, **_kw: object) -> None:
        side = out.parent.name
        order.append(f"{side}/{out.name}")
        i = taken[side]
        taken[side] += 3
        medians = [levels[side][(i + k) % len(levels[side])] for k in range(3)]
        write_stage(_report(medians), out)

    monkeypatch.setattr(ab, "_run_stage", run_stage)
    return order


def test_ab_adds_interleaved_rounds_until_the_judge_decides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    same = [100.0, 103.0, 97.0, 102.0, 98.0, 100.0]
    order = _fake_stage(monkeypatch, {"base": same, "head": same[::-1]})
    log: list[str] = []
    code = run_ab(base="main", out=tmp_path / "ab", repo=_tiny_repo(tmp_path), log=log.append)
    summary = json.loads((tmp_path / "ab" / "ab.json").read_text(encoding="utf-8"))
    assert code == ExitCode.PASS
    assert summary["verdict"] == "equivalent"
    rounds = summary["rounds"]
    assert rounds >= 2  # three processes a side cannot rule out +6%; the rounds went on
    assert order == [f"{side}/round{r}" for r in range(1, rounds + 1) for side in ("base", "head")]
    assert summary["looks"] == [[3 * r, 3 * r] for r in range(1, rounds + 1)]
    assert summary["processes"] == summary["baseline_processes"] == 3 * rounds
    assert "ruled out" in summary["stopped"]
    assert f"round {rounds}: {3 * rounds} + {3 * rounds} processes -> " in "\n".join(log)
    assert f"{3 * rounds} processes against {3 * rounds}, stopped: " in "\n".join(log)


def test_ab_stops_at_once_on_a_clear_regression_and_at_the_budget_when_unsure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = [100.0, 100.5, 99.5]
    _fake_stage(monkeypatch, {"base": base, "head": [110.0, 110.4, 109.6]})
    assert run_ab(base="main", out=tmp_path / "ab1", repo=_tiny_repo(tmp_path), log=lambda _line: None) == 1
    assert json.loads((tmp_path / "ab1" / "ab.json").read_text(encoding="utf-8"))["rounds"] == 1
    _fake_stage(monkeypatch, {"base": base, "head": [97.0, 107.0, 102.0, 105.0, 96.0, 108.0]})
    log = []
    code = run_ab(base="main", out=tmp_path / "ab2", repo=tmp_path / "r", max_processes=7, log=log.append)
    summary = json.loads((tmp_path / "ab2" / "ab.json").read_text(encoding="utf-8"))
    assert code == ExitCode.WARN
    assert summary["verdict"] == "inconclusive"
    assert summary["rounds"] == 2  # whole rounds of 3 within 7 processes a side
    assert summary["stopped"].startswith("the budget of 6 processes ran out")
    _fake_stage(monkeypatch, {"base": base, "head": [97.0, 107.0, 102.0, 105.0, 96.0, 108.0]})
    run_ab(base="main", out=tmp_path / "ab3", repo=tmp_path / "r", max_seconds=1e-9, log=lambda _line: None)
    summary = json.loads((tmp_path / "ab3" / "ab.json").read_text(encoding="utf-8"))
    assert summary["rounds"] == 1
    assert "the budget ran out (--max-seconds 1e-09 spent)" in summary["stopped"]


def test_ab_judges_at_its_max_cv_and_names_it_when_a_side_is_too_noisy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # ab's noise guard is its --max-cv: the same +30% with noisy head processes is inconclusive at 5%, decided at 10%
    base = [100.0, 100.5, 99.5]
    head = [130.0 * m for m in (0.9, 1.0, 1.1, 0.95, 1.05, 0.92)]  # +30%, process medians with a CV near 8%
    repo = _tiny_repo(tmp_path)
    _fake_stage(monkeypatch, {"base": base, "head": head})
    log: list[str] = []
    code = run_ab(base="main", out=tmp_path / "ab1", repo=repo, max_processes=6, log=log.append)
    summary = json.loads((tmp_path / "ab1" / "ab.json").read_text(encoding="utf-8"))
    assert code == ExitCode.WARN
    assert summary["verdict"] == "inconclusive"
    assert summary["plan"]["max_cv"] == 0.05
    assert (
        "candidate run fluctuates too much: CV of process medians 7.9% > 5% (--max-cv of gatekeeper ab; "
        in (summary["reason"])
    )
    _fake_stage(monkeypatch, {"base": base, "head": head})
    code = run_ab(base="main", out=tmp_path / "ab2", repo=repo, max_processes=6, max_cv=0.10, log=log.append)
    summary = json.loads((tmp_path / "ab2" / "ab.json").read_text(encoding="utf-8"))
    assert (code, summary["verdict"], summary["plan"]["max_cv"]) == (ExitCode.BLOCKED, "regression", 0.10)
    for bad in (0.0, 0.9):
        with pytest.raises(InputError, match=r"--max-cv.*must lie in \(0, 0.5\]"):
            run_ab(base="main", out=tmp_path / "o", repo=repo, max_cv=bad)
    assert cli.main(["ab", "--base", "main", "--out", str(tmp_path / "o"), "--max-cv", "0.9"]) == 2
    err = capsys.readouterr().err
    assert "--max-cv: must lie in (0, 0.5] (got 0.9)" in err
    assert err.count("\n") == 1
