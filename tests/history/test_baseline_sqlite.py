"""What only the sqlite store does: the file, WAL mode, a file that is not a database. What every SQL store
does (baselines, history, anchors, schema versions, migrations, concurrent writers) is in
test_store_contract.py, run against sqlite and PostgreSQL alike."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from gatekeeper.core.errors import InputError
from gatekeeper.history import open_store
from gatekeeper.history.sqlite import SqliteStore


def test_the_registry_opens_sqlite_and_creates_it_only_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "db" / "results.db"
    with pytest.raises(InputError, match="no such history store"):
        open_store(f"sqlite:{path}")
    assert not path.parent.exists()
    empty = open_store(f"sqlite:{path}", missing_ok=True)
    assert isinstance(empty, SqliteStore)
    assert empty.history("performance_baseline") == []
    assert not path.parent.exists()  # an empty store that stays on no disk
    assert isinstance(open_store(f"sqlite:{path}", create=True), SqliteStore)
    assert path.is_file()


def test_database_is_in_wal_mode(tmp_path: Path) -> None:
    SqliteStore(tmp_path / "r.db", create=True)
    conn = sqlite3.connect(tmp_path / "r.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 2
    conn.close()


class _RefusedOnce(sqlite3.Connection):
    """Answers the first switch to WAL as SQLite does when another job is switching the same new file."""

    refused = 0

    def execute(self, sql: str, *args: object) -> sqlite3.Cursor:  # type: ignore[override]
        if sql.strip().upper() == "PRAGMA JOURNAL_MODE = WAL" and _RefusedOnce.refused < 2:
            _RefusedOnce.refused += 1
            raise sqlite3.OperationalError("database is locked")
        return super().execute(sql, *args)


def test_a_new_store_waits_its_turn_to_switch_to_wal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    connect = sqlite3.connect
    monkeypatch.setattr(sqlite3, "connect", lambda *a, **k: connect(*a, factory=_RefusedOnce, **k))
    _RefusedOnce.refused = 0
    SqliteStore(tmp_path / "h.db", create=True)  # refused twice, then switched: no error
    assert _RefusedOnce.refused == 2
    conn = connect(tmp_path / "h.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_not_a_database_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    path.write_text("this is not sqlite " * 100, encoding="utf-8")
    with pytest.raises(InputError, match="not a usable history database"):
        SqliteStore(path)
