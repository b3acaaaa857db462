from __future__ import annotations

import subprocess
from pathlib import Path

import git
import pytest

from gatekeeper.contract.stage_report import Environment, Metric, StageReport
from gatekeeper.core.errors import InputError
from gatekeeper.history import RunInfo, open_store
from gatekeeper.history.git import GitStore


def _report(value: float, *, arch: str = "gfx942", channel: str = "stable") -> StageReport:
    env = Environment("2.5.0", "3.11", "runner", channel, "rocm", rocm_version="6.3.1", gfx_arch=arch)
    metrics = {"latency_ms": Metric.of(value, "ms", "lower", [[value, value]] * 3)}
    return StageReport("performance_baseline", "passed", "2026-01-01T00:00:00+00:00", 1.0, env, metrics,
                       config={"model": "demo", "batch_size": 8})  # fmt: skip


@pytest.fixture
def repo(tmp_path: Path) -> git.Repo:
    r = git.Repo.init(tmp_path / "work", initial_branch="main")
    with r.config_writer() as cw:
        cw.set_value("user", "name", "t")
        cw.set_value("user", "email", "t@example.invalid")
    (tmp_path / "work" / "model.py").write_text("x = 1\n", encoding="utf-8")
    r.index.add(["model.py"])
    r.index.commit("init")
    return r


def test_save_commits_to_the_data_branch_without_touching_the_worktree(repo: git.Repo) -> None:
    work = Path(repo.working_tree_dir)
    (work / "model.py").write_text("x = 2  # uncommitted edit\n", encoding="utf-8")
    (work / "staged.py").write_text("y = 1\n", encoding="utf-8")
    repo.index.add(["staged.py"])
    head, status_before = repo.head.commit.hexsha, repo.git.status("--porcelain")
    store = GitStore("gatekeeper-results", work)
    assert store.latest("performance_baseline", _report(0)) is None
    store.save(_report(10.0), RunInfo("main", "a" * 40, "1", "pass", "2026-01-01T00:00:00+00:00"))
    store.save(_report(12.0), RunInfo("main", "b" * 40, "2", "pass", "2026-01-02T00:00:00+00:00"))
    store.save(_report(50.0, arch="gfx90a"), RunInfo("main", "c" * 40, "3", "pass", "2026-01-03T00:00:00+00:00"))
    assert repo.head.commit.hexsha == head
    assert repo.active_branch.name == "main"
    assert repo.git.status("--porcelain") == status_before
    assert (work / "model.py").read_text(encoding="utf-8") == "x = 2  # uncommitted edit\n"
    assert len(list(repo.iter_commits("gatekeeper-results"))) == 3
    got = store.latest("performance_baseline", _report(0))
    assert got.metrics["latency_ms"].value == 12.0
    assert store.latest("performance_baseline", _report(0, arch="gfx1100")) is None
    # every store names the newest rejected candidate's reason (pipeline 3, gfx90a), not the oldest's
    assert store.why_missing == "baseline ran on arch gfx90a, this run on gfx1100"
    hist = store.history("performance_baseline")
    assert [info.pipeline_id for info, _ in hist] == ["3", "2", "1"]
    assert [info.pipeline_id for info, _ in store.history("performance_baseline", limit=1)] == ["3"]


def test_channel_filter_and_registry(repo: git.Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(repo.working_tree_dir)
    store = open_store("git:results")
    assert isinstance(store, GitStore)
    store.save(_report(1.0, channel="nightly"), RunInfo(pipeline_id="n"))
    store.save(_report(2.0), RunInfo(pipeline_id="s"))
    assert [i.pipeline_id for i, _ in store.history("performance_baseline", channel="nightly")] == ["n"]


def test_push_and_fetch_through_a_remote(repo: git.Repo, tmp_path: Path) -> None:
    bare = tmp_path / "remote.git"
    subprocess.run(["git", "init", "--bare", "-q", str(bare)], check=True, timeout=30)
    GitStore("data", repo.working_tree_dir, remote=str(bare)).save(_report(5.0), RunInfo(pipeline_id="1"))
    assert "data" in {r.name for r in git.Repo(bare).heads}  # pushed
    other = git.Repo.clone_from(str(bare), tmp_path / "other")
    store = GitStore("data", other.working_tree_dir, remote=str(bare))
    assert store.latest("performance_baseline", _report(0)).metrics["latency_ms"].value == 5.0
    store.save(_report(6.0), RunInfo(pipeline_id="2"))
    first = GitStore("data", repo.working_tree_dir, remote=str(bare))
    assert [i.pipeline_id for i, _ in first.history("performance_baseline")] == ["2", "1"]


def test_open_store_reads_the_remote_from_environ(repo: git.Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(repo.working_tree_dir)
    store = open_store("git:data", {"GATEKEEPER_GIT_REMOTE": "origin"})
    assert isinstance(store, GitStore)
    assert store.remote == "origin"
    assert open_store("git:data", {}).remote is None


def test_bad_locations_are_input_errors(tmp_path: Path, repo: git.Repo) -> None:
    (tmp_path / "nowhere").mkdir()
    with pytest.raises(InputError, match="not inside a git repository"):
        GitStore("results", tmp_path / "nowhere")
    with pytest.raises(InputError, match="not a valid branch name"):
        GitStore("bad..name", repo.working_tree_dir)
    with pytest.raises(InputError, match="no branch"):
        GitStore("", repo.working_tree_dir)


def test_a_record_named_or_dated_after_the_clock_is_never_the_baseline(repo: git.Repo) -> None:
    """2026-12-04 audit, second pass: the git store orders its records by file name (the time first) and each
    says when it was recorded; a record named or dated after the reading job's clock (beyond
    ``budgets.CLOCK_SKEW``) sorted first for ever. Each is skipped with a warning naming it."""
    import json

    store = GitStore("gatekeeper-results", Path(repo.working_tree_dir))
    store.save(_report(10.0), RunInfo("main", "a" * 40, "1", "pass", "2026-01-01T00:00:00+00:00"))
    store.save(_report(77.0), RunInfo("main", "f" * 40, "2", "pass", "9999-01-01T00:00:00+00:00"))
    record = {"info": {"ref": "main", "commit": "e" * 40, "pipeline_id": "3", "verdict": "pass",
                       "recorded_at": "2026-01-02T00:00:00+00:00"}, "report": _report(88.0).to_dict()}  # fmt: skip
    for name in ("99990101T000000000000Z-eeee-1.json", "zzz.json"):
        tip = store._commit(store._tip(), f"results/performance_baseline/{name}", json.dumps(record).encode(), "x")
        repo.git.update_ref(store.ref, tip)
    dated = {**record, "info": {**record["info"], "recorded_at": "9998-01-01T00:00:00+00:00"}}
    tip = store._commit(store._tip(), "results/performance_baseline/20260103T000000000000Z-dddd-1.json",
                        json.dumps(dated).encode(), "x")  # fmt: skip
    repo.git.update_ref(store.ref, tip)
    got = store.latest_record("performance_baseline", _report(0))
    assert got is not None
    assert got[1].metrics["latency_ms"].value == 10.0
    assert len(store.skipped) == 4, store.skipped
    assert any("99990101T000000000000Z-eeee-1.json skipped: name" in s and "later than this job's clock" in s
               for s in store.skipped)  # fmt: skip
    assert any("zzz.json skipped: its name does not start with a time" in s for s in store.skipped)
    assert any("'9999-01-01T00:00:00+00:00' is later than this job's clock" in s for s in store.skipped)
    assert any("dddd-1.json" in s and "'9998-01-01T00:00:00+00:00' is later" in s for s in store.skipped)
    assert [info.pipeline_id for info, _ in store.history("performance_baseline")] == ["1"]
