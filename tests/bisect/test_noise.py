"""The decision under noise, through the real engine, git provider and gates' judge, with seeded measurements.

The stage is replaced by a measurement whose true latency depends on the commit
checked out (``n.txt`` of the real worktree) and whose per-process medians
scatter with a seeded lognormal noise: reproducible, so the test cannot pass
by luck, and far cheaper than timing processes. What is under test is the
decision: an unknown comparison gets more processes, and never turns into a
wrong culprit.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from gatekeeper.bisect import BisectOptions, run_bisect
from gatekeeper.bisect.measure import Runner, summarise
from gatekeeper.contract.stage_report import Environment, Metric, StageReport
from gatekeeper.core.errors import InputError
from tests.bisect.builders import make_repo

PROCESSES = 3


def _fake_stage(latency: dict[int, float], sigma: float):
    """Runner.run replaced: the commit's true latency times seeded per-process noise (CV ``sigma``)."""

    def run(self: Runner, prepared, k: int):
        n = int((prepared.cwd / "n.txt").read_text())
        rng = np.random.default_rng([n, k])
        groups = []
        for median in latency[n] * np.exp(rng.normal(0.0, sigma, PROCESSES)):
            groups.append([float(median * (1 + 0.001 * j)) for j in range(-5, 6)])
        medians = sorted(float(np.median(g)) for g in groups)
        metrics = {
            "latency_ms": Metric.of(medians[len(medians) // 2], "ms", "lower", groups),
            "warmup_converged": Metric.of(1.0, "bool", "higher"),
        }
        env = Environment("2.13.0", "3.11", "runner", device_kind="cpu")
        report = StageReport(
            "performance_baseline", "passed", "2026-01-01T00:00:00+00:00", 1.0, env, metrics, config={"model": "m"}
        )
        record = {
            "round": k,
            "exit_code": 0,
            "outcome": "exited with code 0",
            "duration_s": 0.0,
            "processes": PROCESSES,
            "file": None,
            "sha256": None,
            "metrics": summarise(report, "latency_ms"),
            "output_tail": [],
        }
        return record, report

    return run


def _bisect(tmp_path, monkeypatch, latency: dict[int, float], *, sigma: float, max_processes: int, name: str):
    n = len(latency)
    if not (tmp_path / "repo").exists():
        make_repo(tmp_path / "repo", n, lambda i: {"n.txt": str(i)})
    monkeypatch.chdir(tmp_path / "repo")
    monkeypatch.setattr(Runner, "run", _fake_stage(latency, sigma))
    opts = BisectOptions(
        provider="git",
        good="first",
        bad="main",
        out=tmp_path / name,
        stage="performance_baseline",
        metric="latency_ms",
        max_processes=max_processes,
        bundle=False,
        repo=tmp_path / "repo",
    )
    return run_bisect(opts)


def _commit(doc, index: int) -> int:
    return int(doc["candidates"][index]["info"]["subject"].split()[-1])


def test_unknown_comparisons_get_more_processes_and_the_culprit_stays_right(tmp_path, monkeypatch):
    # 15% slower from commit 11 of 20; process medians scatter by 2%: three processes a side cannot
    # tell a good candidate within the 3% rule, nor always a bad one beyond the 10% warn rule.
    latency = {i: 10.0 * (1.15 if i >= 11 else 1.0) for i in range(1, 21)}
    result = _bisect(tmp_path, monkeypatch, latency, sigma=0.02, max_processes=15, name="noisy")
    doc = result.doc
    assert result.exit_code == 0
    assert _commit(doc, doc["result"]["first_bad"]) == 11
    assert _commit(doc, doc["result"]["last_good"]) == 10
    rounds = {_commit(doc, c["index"]): len(c["rounds"]) for c in doc["candidates"] if c["rounds"]}
    assert max(rounds.values()) > 1, rounds  # unknown led to more processes
    for c in doc["candidates"]:
        for d in c["decisions"]:
            truth = "bad" if _commit(doc, c["index"]) >= 11 else "good"
            assert d["decision"] in (truth, "unknown"), (c["label"], d)
            assert d["processes"] <= 15


def test_without_more_processes_noise_gives_no_wrong_culprit(tmp_path, monkeypatch):
    # the same range and noise with no process added: the undecided candidates are named, and the
    # true culprit is among them; nothing undecided is taken for good or bad
    latency = {i: 10.0 * (1.15 if i >= 11 else 1.0) for i in range(1, 21)}
    result = _bisect(tmp_path, monkeypatch, latency, sigma=0.035, max_processes=PROCESSES, name="capped")
    doc = result.doc
    found = doc["result"]["culprits"][0]
    assert result.exit_code == 3
    assert not found["exact"]
    assert _commit(doc, found["last_good"]) < 11 <= _commit(doc, found["first_bad"])
    assert 11 in [_commit(doc, i) for i in (*found["unresolved"], found["first_bad"])]
    assert "could not be decided" in doc["result"]["note"]
    for c in doc["candidates"]:
        for d in c["decisions"]:
            truth = "bad" if _commit(doc, c["index"]) >= 11 else "good"
            assert d["decision"] in (truth, "unknown"), (c["label"], d)


def test_two_steps_in_one_range_are_two_culprits(tmp_path, monkeypatch):
    latency = {i: 10.0 * (1.2 if i >= 6 else 1.0) * (1.2 if i >= 15 else 1.0) for i in range(1, 21)}
    result = _bisect(tmp_path, monkeypatch, latency, sigma=0.005, max_processes=9, name="two")
    doc = result.doc
    culprits = doc["result"]["culprits"]
    assert [_commit(doc, c["first_bad"]) for c in culprits] == [6, 15]
    assert [_commit(doc, c["last_good"]) for c in culprits] == [5, 14]
    assert culprits[1]["reference"] == culprits[0]["first_bad"]  # the second is judged against the first
    assert all(c["exact"] for c in culprits)


def test_one_step_is_one_culprit_within_the_decision_bound(tmp_path, monkeypatch):
    latency = {i: 10.0 * (1.3 if i >= 29 else 1.0) for i in range(1, 41)}
    result = _bisect(tmp_path, monkeypatch, latency, sigma=0.005, max_processes=9, name="one")
    doc = result.doc
    assert [_commit(doc, c["first_bad"]) for c in doc["result"]["culprits"]] == [29]
    assert doc["summary"]["run"] <= math.ceil(math.log2(40)) + 2


@pytest.mark.parametrize("sigma", [0.005])
def test_a_good_end_that_is_slower_than_the_bad_end_is_refused(tmp_path, monkeypatch, sigma):
    latency = {i: 10.0 * (0.7 if i >= 5 else 1.0) for i in range(1, 11)}  # it got faster: nothing regressed
    with pytest.raises(InputError, match="measures good"):
        _bisect(tmp_path, monkeypatch, latency, sigma=sigma, max_processes=3, name="faster")


def test_a_good_end_that_fails_a_gate_on_its_own_is_refused(tmp_path, monkeypatch):
    gates = tmp_path / "gates.yaml"
    gates.write_text(
        'version: 1\ngates:\n  latency-budget:\n    metric: performance_baseline.latency_ms\n    pass: "<= 5"\n'
    )
    latency = dict.fromkeys(range(1, 6), 10.0)  # 10 ms everywhere: over the 5 ms budget from the start
    make_repo(tmp_path / "repo", 5, lambda i: {"n.txt": str(i)})
    monkeypatch.chdir(tmp_path / "repo")
    monkeypatch.setattr(Runner, "run", _fake_stage(latency, 0.005))
    opts = BisectOptions(
        provider="git",
        good="first",
        bad="main",
        out=tmp_path / "o",
        stage="performance_baseline",
        gates=gates,
        max_processes=3,
        bundle=False,
        repo=tmp_path / "repo",
    )
    with pytest.raises(InputError, match=r"measures bad \(latency-budget fail on it alone\)"):
        run_bisect(opts)
