"""The contract every SQL history store keeps, run against sqlite: and against a real PostgreSQL server
(tests/support/postgres.py): the same records, baselines, anchors, series, schema versions, migrations,
export and import, and no record lost under concurrent writers."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import sqlite3
import struct
import sys
import textwrap
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from gatekeeper.contract.stage_report import Environment, Metric, StageReport
from gatekeeper.core import proc
from gatekeeper.core.errors import InputError
from gatekeeper.history import RunInfo, open_store
from gatekeeper.history.sql import SqlStore
from gatekeeper.history.transfer import export_records, import_records
from tests.support.postgres import PASSWORD, Server, new_database

ROOT = Path(__file__).resolve().parents[2]
KINDS = ["sqlite", "postgresql"]


def _report(value: float, *, arch: str = "gfx942", model: str = "demo", channel: str = "stable") -> StageReport:
    env = Environment("2.5.0", "3.11", "runner", channel, "rocm", rocm_version="6.3.1", gfx_arch=arch)
    metrics = {"latency_ms": Metric.of(value, "ms", "lower", [[value, value * 1.01]] * 3)}
    return StageReport("performance_baseline", "passed", "2026-01-01T00:00:00+00:00", 1.0, env, metrics,
                       config={"model": model, "batch_size": 8})  # fmt: skip


@pytest.fixture
def spec_of(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], str]:
    """kind -> the spec of a new, empty store of that kind."""

    def make(kind: str) -> str:
        if kind == "sqlite":
            return f"sqlite:{tmp_path / f'{len(list(tmp_path.iterdir()))}' / 'history.db'}"
        server: Server = request.getfixturevalue("postgres_server")
        monkeypatch.setenv("PGPASSWORD", PASSWORD)  # as a CI job gets it: a masked variable, not in the spec
        return server.url(new_database(server))

    return make


@pytest.fixture(params=KINDS)
def spec(request: pytest.FixtureRequest, spec_of: Callable[[str], str]) -> str:
    return spec_of(request.param)


def _open(spec: str) -> SqlStore:
    store = open_store(spec, create=True)
    assert isinstance(store, SqlStore)
    return store


def _execute(spec: str, sql: str, args: list[object] | None = None) -> None:
    """Change the database behind the store's back (a corrupt row, an old or newer schema)."""
    if spec.startswith("sqlite:"):
        conn = sqlite3.connect(spec.removeprefix("sqlite:"))
        conn.execute(sql, args or [])
        conn.commit()
        conn.close()
        return
    import psycopg

    with psycopg.connect(spec, autocommit=True) as conn:
        conn.execute(sql.replace("?", "%s"), args or [])


def test_latest_is_the_newest_comparable_result(spec: str) -> None:
    store = _open(spec)
    like = _report(1.0)
    assert store.latest("performance_baseline", like) is None
    store.save(_report(10.0), RunInfo("main", "aaa", "1", "pass", "2026-01-01T00:00:00+00:00"))
    store.save(_report(11.0), RunInfo("main", "bbb", "2", "pass", "2026-01-02T00:00:00+00:00"))
    store.save(_report(99.0, arch="gfx90a"), RunInfo("main", "ccc", "3", "pass", "2026-01-03T00:00:00+00:00"))
    store.save(_report(98.0, model="other"), RunInfo("main", "ddd", "4", "pass", "2026-01-04T00:00:00+00:00"))
    store.save(_report(97.0), RunInfo("main", "eee", "5", "blocked", "2026-01-05T00:00:00+00:00"))
    got = store.latest_record("performance_baseline", like)
    assert got is not None
    assert got[1].metrics["latency_ms"].value == 11.0
    assert got[0].commit == "bbb"
    assert got[0].run_id.startswith(f"{spec.split(':', maxsplit=1)[0]}:")
    assert len(got[1].metrics["latency_ms"].samples) == 3  # process grouping survives the store
    assert store.latest("performance_baseline", _report(1.0, arch="gfx1100")) is None  # never compared silently
    assert "no passed performance_baseline result on rocm gfx1100" in store.why_missing
    assert store.latest("performance_baseline", _report(1.0, model="third")) is None
    assert store.why_missing == "baseline used model='other', this run model='third'"  # the newest one's reason
    assert store.latest_record("performance_baseline", like, branch="feature") is None


def test_failed_runs_are_never_a_baseline(spec: str) -> None:
    store = _open(spec)
    good, bad = _report(10.0), _report(50.0)
    store.save(good, RunInfo(recorded_at="2026-01-01T00:00:00+00:00"))
    store.save(StageReport(**{**bad.__dict__, "status": "failed"}), RunInfo(recorded_at="2026-01-02T00:00:00+00:00"))
    assert store.latest("performance_baseline", good).metrics["latency_ms"].value == 10.0


def test_history_newest_first_with_channel_filter(spec: str) -> None:
    store = _open(spec)
    for i, channel in enumerate(["stable", "nightly", "stable"]):
        info = RunInfo("main", f"c{i}", str(i), "pass", f"2026-01-0{i + 1}", tag="v1.0" if i == 2 else None)
        store.save(_report(float(i + 1), channel=channel), info)
    hist = store.history("performance_baseline")
    assert [info.commit for info, _ in hist] == ["c2", "c1", "c0"]
    assert hist[0][0].tag == "v1.0"
    nightly = store.history("performance_baseline", channel="nightly")
    assert [info.pipeline_id for info, _ in nightly] == ["1"]
    assert nightly[0][1].environment.channel == "nightly"
    assert len(store.history("performance_baseline", limit=1)) == 1


def test_a_record_that_does_not_parse_is_skipped_with_a_warning(spec: str) -> None:
    store = _open(spec)
    store.save(_report(10.0), RunInfo("main", "good", "1", "pass", "2026-01-01T00:00:00+00:00"))
    store.save(_report(12.0), RunInfo("main", "bad", "2", "pass", "2026-01-02T00:00:00+00:00"))
    _execute(spec, "UPDATE results SET report = ? WHERE commit_sha = ?", ['{"stage": "perf", "metr', "bad"])
    got = store.latest_record("performance_baseline", _report(1.0))
    assert got is not None
    assert got[0].commit == "good"
    assert len(store.skipped) == 1
    assert "commit bad" in store.skipped[0]
    assert "invalid JSON" in store.skipped[0]
    assert [i.commit for i, _ in store.history("performance_baseline")] == ["good"]


def test_anchors_are_recorded_with_who_and_why_and_need_a_run(spec: str) -> None:
    store = _open(spec)
    store.save(_report(10.0), RunInfo("main", "aaa", "41", "pass", "2026-01-01T00:00:00+00:00"))
    with pytest.raises(InputError, match="no run '42'"):
        store.set_anchor("42", by="ann", reason="x")
    with pytest.raises(InputError, match="needs who sets it and why"):
        store.set_anchor("41", by="", reason="x")
    mark = store.set_anchor("41", by="ann", reason="new kernel accepted", at="2026-01-02T00:00:00+00:00")
    assert (mark.run, mark.channel, mark.device_kind, mark.arch) == ("41", "stable", "rocm", "gfx942")
    assert [(a.set_by, a.reason) for a in store.anchors()] == [("ann", "new kernel accepted")]
    assert [r.stage for _, r in store.anchor_records(mark)] == ["performance_baseline"]


def test_series_keeps_per_process_medians_and_the_stack(spec: str) -> None:
    store = _open(spec)
    info = RunInfo("main", "aaa", "1", "pass", "2026-01-01T00:00:00+00:00", stack={"gatekeeper": "1.2", "image": "i"})
    store.save(_report(10.0), info)
    [row] = store.series(stage="performance_baseline")
    assert row.points["latency_ms"] == pytest.approx([10.05, 10.05, 10.05])
    assert row.stack == {"gatekeeper": "1.2", "image": "i"}
    assert row.config == {"batch_size": 8, "model": "demo"}
    assert row.environment["torch_version"] == "2.5.0"
    assert store.series(channel="nightly") == []
    assert store.series(since="2026-02-01") == []


@pytest.mark.parametrize(("source", "target"), [("sqlite", "postgresql"), ("postgresql", "sqlite")])
def test_export_and_import_move_every_record_and_anchor(
    source: str, target: str, spec_of: Callable[[str], str], tmp_path: Path
) -> None:
    src = spec_of(source)
    store = _open(src)
    for i in range(3):
        info = RunInfo("main", f"c{i}", str(i), "pass", f"2026-01-0{i + 1}T00:00:00+00:00", tag="v1" if i else None)
        store.save(_report(10.0 + i), info)
    store.set_anchor("1", by="ann", reason="why", at="2026-01-05T00:00:00+00:00")
    done = export_records(src, tmp_path / "out.jsonl")
    assert (done.records, done.anchors) == (3, 1)
    dst = spec_of(target)
    assert import_records(str(tmp_path / "out.jsonl"), dst).records == 3
    copied = _open(dst)
    assert [(i.commit, i.tag) for i, _ in copied.history("performance_baseline")] == [
        ("c2", "v1"), ("c1", "v1"), ("c0", None),
    ]  # fmt: skip
    assert [(a.run, a.set_by, a.set_at) for a in copied.anchors()] == [("1", "ann", "2026-01-05T00:00:00+00:00")]
    straight = spec_of(target)
    assert import_records(src, straight).records == 3  # store to store, no file between
    assert len(_open(straight).history("performance_baseline")) == 3


def test_an_import_file_with_a_bad_line_imports_nothing(spec: str, tmp_path: Path) -> None:
    good = _open(spec)
    good.save(_report(10.0), RunInfo("main", "c0", "1", "pass", "2026-01-01T00:00:00+00:00"))
    export_records(spec, tmp_path / "ok.jsonl")
    lines = (tmp_path / "ok.jsonl").read_text(encoding="utf-8").splitlines()
    (tmp_path / "bad.jsonl").write_text("\n".join([*lines, lines[0][:40]]) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"bad\.jsonl:line 2, at its end: not a JSON record: invalid JSON: "):
        import_records(str(tmp_path / "bad.jsonl"), spec)
    newer = json.loads(lines[0]) | {"schema": "gatekeeper.history-record/v9"}
    (tmp_path / "newer.jsonl").write_text(json.dumps(newer) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"line 1: written by a newer gatekeeper .*upgrade gatekeeper"):
        import_records(str(tmp_path / "newer.jsonl"), spec)
    assert len(good.history("performance_baseline")) == 1  # nothing half imported


def test_a_schema_from_a_newer_gatekeeper_is_refused(spec: str) -> None:
    _open(spec)
    if spec.startswith("sqlite:"):
        _execute(spec, "PRAGMA user_version = 99")
    else:
        _execute(spec, "UPDATE gatekeeper_schema SET version = 99")
    with pytest.raises(
        InputError, match=r"store schema version 99 is newer than this gatekeeper's 2.*upgrade gatekeeper"
    ):
        open_store(spec)


_V1_SQLITE = """
CREATE TABLE results (id INTEGER PRIMARY KEY AUTOINCREMENT, stage TEXT NOT NULL, status TEXT NOT NULL, channel TEXT,
 device_kind TEXT, arch TEXT, rocm_version TEXT, torch_version TEXT, model TEXT, ref TEXT, commit_sha TEXT,
 pipeline_id TEXT, verdict TEXT, recorded_at TEXT NOT NULL, fingerprint TEXT NOT NULL, report TEXT NOT NULL)
"""


def test_a_version_1_database_is_migrated_and_keeps_its_records(spec: str) -> None:
    """What gatekeeper wrote before schema 2 (no points, config, stack, tag, anchors) still reads, and the
    first open upgrades it in place."""
    old = _report(10.0)
    row = ["performance_baseline", "passed", "stable", "rocm", "gfx942", "6.3.1", "2.5.0", "demo", "main", "old",
           "7", "pass", "2026-01-01T00:00:00+00:00", json.dumps(old.environment.to_dict()), json.dumps(old.to_dict())]  # fmt: skip
    insert = (
        "INSERT INTO results (stage, status, channel, device_kind, arch, rocm_version, torch_version, model, ref, "
        "commit_sha, pipeline_id, verdict, recorded_at, fingerprint, report) VALUES "
        "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    )
    if spec.startswith("sqlite:"):
        path = Path(spec.removeprefix("sqlite:"))
        path.parent.mkdir(parents=True)
        conn = sqlite3.connect(path)
        conn.execute(_V1_SQLITE)
        conn.execute("PRAGMA user_version = 1")
        conn.execute(insert, row)
        conn.commit()
        conn.close()
    else:
        _execute(spec, _V1_SQLITE.replace("INTEGER PRIMARY KEY AUTOINCREMENT", "BIGSERIAL PRIMARY KEY"))
        _execute(spec, "CREATE TABLE gatekeeper_schema (version INTEGER NOT NULL)")
        _execute(spec, "INSERT INTO gatekeeper_schema (version) VALUES (1)")
        _execute(spec, insert, row)
    store = open_store(spec)
    assert isinstance(store, SqlStore)
    got = store.latest_record("performance_baseline", _report(1.0))
    assert got is not None
    assert got[0].commit == "old"
    [series] = store.series()
    assert series.points["latency_ms"] == pytest.approx([10.05] * 3)  # read from the old report
    store.save(_report(11.0), RunInfo("main", "new", "8", "pass", "2026-01-02T00:00:00+00:00", tag="v2"))
    assert [i.tag for i, _ in store.history("performance_baseline")] == ["v2", None]


@pytest.mark.slow
def test_eight_concurrent_writers_lose_no_record(spec: str) -> None:
    writer = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        from tests.history.test_store_contract import _report
        from gatekeeper.history import RunInfo, open_store
        w = int(sys.argv[1])
        for i in range(25):
            open_store(sys.argv[2], create=True).save(_report(float(i + 1)), RunInfo(commit=f"w{{w}}-{{i}}"))
        """
    )
    with ThreadPoolExecutor(8) as pool:
        results = list(
            pool.map(lambda w: proc.run([sys.executable, "-c", writer, str(w), spec], timeout=300), range(8))
        )
    assert all(r.ok for r in results), [r.stderr[-800:] for r in results]
    commits = {info.commit for info, _ in _open(spec).history("performance_baseline", limit=1000)}
    assert commits == {f"w{w}-{i}" for w in range(8) for i in range(25)}


def test_one_shared_store_keeps_each_repositorys_runs_apart(spec: str) -> None:
    """Two model repositories record the same model name into one database: neither is the other's
    baseline, anchor or series; a reader outside CI (no project) sees both."""
    a = open_store(spec, {"CI_PROJECT_PATH": "team/a"}, create=True)
    b = open_store(spec, {"CI_PROJECT_PATH": "team/b"}, create=True)
    assert isinstance(a, SqlStore)
    assert isinstance(b, SqlStore)
    a.save(_report(10.0), RunInfo("main", "a1", "1", "pass", "2026-01-01T00:00:00+00:00", stack={"project": "team/a"}))
    b.save(_report(50.0), RunInfo("main", "b1", "2", "pass", "2026-01-02T00:00:00+00:00", stack={"project": "team/b"}))
    assert a.latest("performance_baseline", _report(1.0)).metrics["latency_ms"].value == 10.0
    assert b.latest("performance_baseline", _report(1.0)).metrics["latency_ms"].value == 50.0
    assert [r.commit for r in a.series()] == ["a1"]
    assert a.run("2") == []  # team/b's pipeline is not team/a's to anchor on
    a.set_anchor("1", by="ann", reason="a's")
    assert b.anchors() == []
    everyone = _open(spec)
    assert {i.commit for i, _ in everyone.history("performance_baseline")} == {"a1", "b1"}


def test_a_record_whose_report_contradicts_its_row_is_never_the_baseline(spec: str) -> None:
    store = _open(spec)
    store.save(_report(10.0), RunInfo("main", "good", "1", "pass", "2026-01-01T00:00:00+00:00"))
    store.save(_report(99.0, channel="nightly"), RunInfo("main", "moved", "2", "pass", "2026-01-02T00:00:00+00:00"))
    _execute(spec, "UPDATE results SET channel = ? WHERE commit_sha = ?", ["stable", "moved"])
    got = store.latest_record("performance_baseline", _report(1.0))
    assert got is not None
    assert got[0].commit == "good"
    assert any("channel 'stable', its stored report says 'nightly'" in line for line in store.skipped)


def _from_now(**delta: float) -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc) + dt.timedelta(**delta)


# What a row may claim of itself that sorts it first (ORDER BY recorded_at DESC) though it was never recorded then:
# far ahead (the query leaves it out and names it), a word (sorts after every digit), a few hours ahead (read,
# then refused), and a few hours ahead written at UTC-11 (as text, 8 hours in the past).
_FUTURE = {
    "year 9999": lambda: "9999-12-31T23:59:59+00:00",
    "a word": lambda: "zzz",
    "3 hours ahead": lambda: _from_now(hours=3).isoformat(timespec="seconds"),
    "3 hours ahead at UTC-11": lambda: (
        _from_now(hours=3).astimezone(dt.timezone(dt.timedelta(hours=-11))).isoformat(timespec="seconds")
    ),
}


@pytest.mark.parametrize("claim", list(_FUTURE))
def test_a_record_claiming_a_time_after_the_clock_is_never_the_newest_run_baseline_or_anchor(
    spec: str, claim: str
) -> None:
    """2026-12-04 audit, second pass: the stores order by the time a row says of itself; only the import side
    bounded it. A row planted behind the store's back with a time after the reading job's clock (beyond the
    skew ``budgets.aware_utc`` allows) is skipped with a warning naming it, as an unreadable row is."""
    from gatekeeper.history.anchor import find_anchor

    store = _open(spec)
    yesterday = _from_now(days=-1).isoformat(timespec="seconds")
    store.save(_report(10.0), RunInfo("main", "good", "1", "pass", yesterday))
    store.save(_report(99.0), RunInfo("main", "planted", "2", "pass", yesterday, tag="v9"))
    _execute(spec, "UPDATE results SET recorded_at = ? WHERE commit_sha = ?", [_FUTURE[claim](), "planted"])
    like = _report(1.0)

    got = store.latest_record("performance_baseline", like)
    assert got is not None
    assert got[0].commit == "good"
    assert any("sqlite:2" in line or "postgresql:2" in line for line in store.skipped), store.skipped
    assert [i.commit for i, _ in store.history("performance_baseline")] == ["good"]
    assert any("later than this job's clock" in line or "not an ISO 8601 time" in line for line in store.skipped)
    assert [r.commit for r in store.series()] == ["good"]
    assert [r.commit for r in store.series(summaries=True, newest=1)] == ["good"]
    assert [i.commit for i, _ in store.records()] == ["good"]
    anchor, _why = find_anchor(store, "performance_baseline", like, now=_from_now())
    assert anchor is not None
    assert anchor.info.commit == "good"


@pytest.mark.parametrize("claim", ["year 9999", "3 hours ahead"])
def test_a_flood_of_rows_dated_after_the_clock_pushes_no_real_run_out_of_a_read(spec: str, claim: str) -> None:
    """More planted rows than a read examines (``_SCAN``, a ``limit``, ``newest``): far-future ones are left out by
    the query itself, those a few hours ahead are asked for on top of the number the read wants."""
    from gatekeeper.history.sql_schema import COLUMNS

    store = _open(spec)
    yesterday = _from_now(days=-1).isoformat(timespec="seconds")
    store.save(_report(10.0), RunInfo("main", "good", "1", "pass", yesterday))
    store.save(_report(99.0), RunInfo("main", "planted", "2", "pass", yesterday))
    _execute(spec, "UPDATE results SET recorded_at = ? WHERE commit_sha = ?", [_FUTURE[claim](), "planted"])
    cols = ", ".join(COLUMNS)
    _execute(spec, f"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 600) "
             f"INSERT INTO results ({cols}) SELECT {cols} FROM results, n WHERE commit_sha = 'planted'")  # fmt: skip
    got = store.latest_record("performance_baseline", _report(1.0))
    assert got is not None
    assert got[0].commit == "good"
    assert [i.commit for i, _ in store.history("performance_baseline", limit=1)] == ["good"]
    assert [r.commit for r in store.series(newest=1)] == ["good"]


def test_a_record_within_the_clock_skew_is_still_the_newest(spec: str) -> None:
    """The bound is the reading job's clock plus ``budgets.CLOCK_SKEW``: a runner whose clock is a few minutes
    ahead still records the baseline."""
    store = _open(spec)
    store.save(_report(10.0), RunInfo("main", "older", "1", "pass", _from_now(days=-1).isoformat()))
    store.save(_report(11.0), RunInfo("main", "ahead", "2", "pass", _from_now(minutes=5).isoformat()))
    got = store.latest_record("performance_baseline", _report(1.0))
    assert got is not None
    assert got[0].commit == "ahead"
    assert store.skipped == []


def test_an_anchor_set_after_the_clock_is_never_the_anchor(spec: str) -> None:
    """The newest anchor mark wins; one planted with ``set_at`` in the future would win for ever."""
    from gatekeeper.history.anchor import find_anchor

    store = _open(spec)
    store.save(_report(10.0), RunInfo("main", "aaa", "41", "pass", _from_now(days=-3).isoformat()))
    store.save(_report(11.0), RunInfo("main", "bbb", "42", "pass", _from_now(days=-2).isoformat()))
    store.set_anchor("41", by="ann", reason="accepted", at=_from_now(days=-1).isoformat(timespec="seconds"))
    store.set_anchor("42", by="eve", reason="planted", at=_from_now(days=-1).isoformat(timespec="seconds"))
    _execute(spec, "UPDATE anchors SET set_at = ? WHERE set_by = ?", ["9999-01-01T00:00:00+00:00", "eve"])
    _execute(spec, "INSERT INTO anchors (run, channel, device_kind, arch, set_by, reason, set_at) VALUES "
             "('42', 'stable', 'rocm', 'gfx942', 'mallory', 'planted', ?)", [_from_now(hours=2).isoformat()])  # fmt: skip
    store.skipped = []
    assert [a.set_by for a in store.anchors()] == ["ann"]
    assert len([line for line in store.skipped if "set_at" in line]) == 2, store.skipped
    anchor, _why = find_anchor(store, "performance_baseline", _report(1.0), now=_from_now())
    assert anchor is not None
    assert (anchor.source, anchor.set_by) == ("set", "ann")


def _sampled(value: float, spread: float = 0.02) -> StageReport:
    """A report whose latency has 4 processes of 5 samples each, and a metric without samples."""
    samples = [[value * (1 + spread * p) * (1 + 0.001 * s) for s in range(5)] for p in range(4)]
    base = _report(value)
    metrics = {"latency_ms": Metric.of(value, "ms", "lower", samples), "memory_gb": Metric.of(3.5, "GB", "lower")}
    return StageReport(base.stage, base.status, base.started_at, 1.0, base.environment, metrics, config=base.config)


def _changes(store: SqlStore, *, summaries: bool) -> list[dict[str, object]]:
    from gatekeeper.history.changes import find_changes

    return [c.to_dict() for c in find_changes(store.series(summaries=summaries))]


def _step_history(store: SqlStore) -> None:
    for night in range(12):
        info = RunInfo("main", f"c{night}", str(night), "pass", f"2026-01-{night + 1:02d}T00:00:00+00:00")
        store.save(_sampled(10.0 * (1.05 if night >= 6 else 1.0) * (1 + 0.002 * (night % 3))), info)


def test_history_changes_reads_each_records_summary_and_finds_what_the_points_give(spec: str) -> None:
    """Each record's metric summary (gatekeeper.history.points) is written beside it; history changes reads
    it instead of every per-process median, and finds the same change at the same run, size and p-value."""
    store = _open(spec)
    _step_history(store)
    rows = store.series(summaries=True)
    assert all(r.levels is not None and not r.points for r in rows)
    assert rows[0].levels.names == ("latency_ms", "memory_gb")
    assert rows[0].config == {"batch_size": 8, "model": "demo"}
    with_points = store.series()
    assert all(r.levels is None and r.points["latency_ms"] for r in with_points)
    fast, slow = _changes(store, summaries=True), _changes(store, summaries=False)
    assert [c["index"] for c in fast] == [6]
    assert fast[0]["metric"] == "latency_ms"
    assert fast[0]["change"] == pytest.approx(slow[0]["change"], rel=1e-9)
    assert fast[0]["p_value"] == pytest.approx(slow[0]["p_value"], rel=1e-6)
    assert [c["index"] for c in slow] == [6]


def test_history_platforms_judges_one_commit_on_two_platforms_in_every_store(spec: str) -> None:
    """The same two commits on a ROCm and a CUDA runner, one store: ROCm 10% slower at the second, CUDA not
    (``gatekeeper history platforms``, read from the records' summaries in each store)."""
    from gatekeeper.history.views import platforms_report

    store = _open(spec)
    for n, commit in enumerate(("a" * 40, "b" * 40), 1):
        info = RunInfo("main", commit, str(n), "pass", f"2026-01-0{n}T00:00:00+00:00")
        rocm = _report(10.0 * (1.1 if n == 2 else 1.0))
        store.save(rocm, info)
        cuda_env = Environment(
            "2.5.0", "3.11", "runner", "stable", "cuda", cuda_version="12.4", compute_capability="9.0"
        )
        store.save(dataclasses.replace(_report(8.0), environment=cuda_env), info)
    text, skipped = platforms_report(history=spec, commit="bbbbbbb", fmt="json")
    [finding] = json.loads(text)["findings"]
    assert skipped == []
    assert finding["call"] == "platform"
    assert [(p["platform"], p["direction"]) for p in finding["platforms"]] == [
        ("cuda sm_90", "equivalent"),
        ("rocm gfx942", "up"),
    ]


@pytest.mark.parametrize("damage", ["missing", "short", "names", "negative"])
def test_a_record_without_a_usable_summary_is_read_from_its_points(spec: str, damage: str) -> None:
    """A record an older gatekeeper wrote has no summary; a damaged one is not trusted: both are read from
    their points, and the change is found all the same."""
    store = _open(spec)
    _step_history(store)
    blob = "x'0000'" if spec.startswith("sqlite:") else "'\\x0000'::bytea"
    minus = struct.pack("<3d", 4.0, 2.3, -1.0) * 2
    sql = {
        "missing": "DELETE FROM results_series WHERE result_id IN (SELECT id FROM results WHERE commit_sha IN (?, ?))",
        "short": f"UPDATE results_series SET data = {blob} WHERE result_id IN "
        "(SELECT id FROM results WHERE commit_sha IN (?, ?))",
        "names": 'UPDATE results_series SET names = \'["a", "a"]\' WHERE result_id IN '
        "(SELECT id FROM results WHERE commit_sha IN (?, ?))",
        "negative": "UPDATE results_series SET data = ? WHERE result_id IN "
        "(SELECT id FROM results WHERE commit_sha IN (?, ?))",
    }[damage]
    _execute(spec, sql, ([minus] if damage == "negative" else []) + ["c2", "c7"])
    rows = store.series(summaries=True)
    assert [r.commit for r in rows if r.levels is None] == ["c2", "c7"]
    assert all(r.points["latency_ms"] for r in rows if r.levels is None)
    assert [c["index"] for c in _changes(store, summaries=True)] == [6]


def test_an_account_that_may_not_create_tables_still_records(
    request: pytest.FixtureRequest, spec_of: Callable[[str], str]
) -> None:
    """The summary table is made by the first writer that may; a shared database whose runners may only
    insert keeps every record, and history changes reads them from their points."""
    import psycopg

    from tests.support.postgres import USER

    spec = spec_of("postgresql")
    _open(spec)  # the owner made the schema, as a platform team would
    writer = f"gk_writer_{abs(hash(spec)) % 10**8}"
    with psycopg.connect(spec, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {writer} LOGIN PASSWORD '{PASSWORD}'")  # generated names, not input
        conn.execute(f"GRANT SELECT, INSERT ON results, anchors, gatekeeper_schema TO {writer}")
        conn.execute(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {writer}")
        conn.execute(f"REVOKE CREATE ON SCHEMA public FROM {writer}, PUBLIC")
    store = _open(spec.replace(f"//{USER}@", f"//{writer}@"))
    _step_history(store)
    rows = store.series(summaries=True)
    assert len(rows) == 12
    assert all(r.levels is None for r in rows)
    assert [c["index"] for c in _changes(store, summaries=True)] == [6]
