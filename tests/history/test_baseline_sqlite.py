from __future__ import annotations

import sqlite3
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from gatekeeper.contract.stage_report import Environment, Metric, StageReport
from gatekeeper.core import proc
from gatekeeper.core.errors import InputError
from gatekeeper.history import RunInfo, open_store
from gatekeeper.history.sqlite import SqliteStore

ROOT = Path(__file__).resolve().parents[2]


def _report(value: float, *, arch: str = "gfx942", model: str = "demo", channel: str = "stable") -> StageReport:
    env = Environment("2.5.0", "3.11", "runner", channel, "rocm", rocm_version="6.3.1", gfx_arch=arch)
    metrics = {"latency_ms": Metric.of(value, "ms", "lower", [[value, value * 1.01]] * 3)}
    return StageReport("performance_baseline", "passed", "2026-01-01T00:00:00+00:00", 1.0, env, metrics,
                       config={"model": model, "batch_size": 8})  # fmt: skip


def test_latest_is_the_newest_comparable_result(tmp_path: Path) -> None:
    store = open_store(f"sqlite:{tmp_path / 'db' / 'results.db'}")
    assert isinstance(store, SqliteStore)
    like = _report(0)
    assert store.latest("performance_baseline", like) is None
    store.save(_report(10.0), RunInfo("main", "aaa", "1", "pass", "2026-01-01T00:00:00+00:00"))
    store.save(_report(11.0), RunInfo("main", "bbb", "2", "pass", "2026-01-02T00:00:00+00:00"))
    store.save(_report(99.0, arch="gfx90a"), RunInfo("main", "ccc", "3", "pass", "2026-01-03T00:00:00+00:00"))
    store.save(_report(98.0, model="other"), RunInfo("main", "ddd", "4", "pass", "2026-01-04T00:00:00+00:00"))
    got = store.latest("performance_baseline", like)
    assert got is not None
    assert got.metrics["latency_ms"].value == 11.0
    assert len(got.metrics["latency_ms"].samples) == 3  # process grouping survives the store
    assert store.latest("performance_baseline", _report(0, arch="gfx1100")) is None  # never compared silently
    assert "no passed performance_baseline result on rocm gfx1100" in store.why_missing
    assert store.latest("performance_baseline", _report(0, model="third")) is None
    assert store.why_missing == "baseline used model='other', this run model='third'"  # the newest one's reason
    assert store.latest("verify_hip", like) is None


def test_failed_runs_are_never_a_baseline(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "r.db")
    good, bad = _report(10.0), _report(50.0)
    store.save(good, RunInfo(recorded_at="2026-01-01T00:00:00+00:00"))
    store.save(StageReport(**{**bad.__dict__, "status": "failed"}), RunInfo(recorded_at="2026-01-02T00:00:00+00:00"))
    assert store.latest("performance_baseline", good).metrics["latency_ms"].value == 10.0


def test_history_newest_first_with_channel_filter(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "r.db")
    for i, channel in enumerate(["stable", "nightly", "stable"]):
        # i + 1: a 0 ms timing is not a stage result (the strict reader skips it, as test_numbers.py checks)
        store.save(_report(i + 1.0, channel=channel), RunInfo("main", f"c{i}", str(i), "pass", f"2026-01-0{i + 1}"))
    hist = store.history("performance_baseline")
    assert [info.commit for info, _ in hist] == ["c2", "c1", "c0"]
    nightly = store.history("performance_baseline", channel="nightly")
    assert [info.pipeline_id for info, _ in nightly] == ["1"]
    assert nightly[0][1].environment.channel == "nightly"
    assert len(store.history("performance_baseline", limit=1)) == 1


def test_database_is_in_wal_mode(tmp_path: Path) -> None:
    SqliteStore(tmp_path / "r.db")
    conn = sqlite3.connect(tmp_path / "r.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_not_a_database_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    path.write_text("this is not sqlite " * 100, encoding="utf-8")
    with pytest.raises(InputError, match="not a usable baseline database"):
        SqliteStore(path)


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "r.db")
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    with pytest.raises(InputError, match="newer than this gatekeeper"):
        SqliteStore(tmp_path / "r.db")


@pytest.mark.slow
def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    writer = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_baseline_sqlite import _report
        from gatekeeper.history import RunInfo
        from gatekeeper.history.sqlite import SqliteStore
        w = int(sys.argv[1])
        for i in range(25):
            SqliteStore({str(db)!r}).save(_report(i + 1.0), RunInfo(commit=f"w{{w}}-{{i}}"))
        """
    )
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda w: proc.run([sys.executable, "-c", writer, str(w)], timeout=120), range(4)))
    assert all(r.ok for r in results), [r.stderr[-500:] for r in results]
    commits = {info.commit for info, _ in SqliteStore(db).history("performance_baseline", limit=1000)}
    assert commits == {f"w{w}-{i}" for w in range(4) for i in range(25)}
