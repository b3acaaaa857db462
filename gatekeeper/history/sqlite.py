"""SqliteStore (``sqlite:PATH``): every stage result with its fingerprint, ref, commit, channel and time.

The embedded default: history, report and breaker read it. Several jobs on one
runner may write at once, so the database runs in WAL mode with a busy timeout
and each save is one short ``BEGIN IMMEDIATE`` transaction. The records and queries
are the SQL stores' own (``gatekeeper.history.sql``); this file adds the file, the
pragmas and the migrations (``PRAGMA user_version``: 1 the first schema, 2 added
points, config, stack, tag and the anchors table; a version-1 file is upgraded in
place the first time a gatekeeper that knows 2 opens it, and keeps every record).
The first save also makes ``results_series`` (each record's metric summaries for
``history changes``; not a schema version: ``gatekeeper.history.sql``).

Reading never creates a database: through ``open_store`` a path that does not exist
is an input error naming it (``create=True`` only where a run is recorded), or an
empty store (``missing_ok=True``: evaluate's ``--baseline`` on a first run).
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gatekeeper.core.errors import InputError
from gatekeeper.history.sql import SCHEMA_VERSION, SqlStore
from gatekeeper.history.sql_schema import SERIES_TABLE, results_table

__all__ = ["SCHEMA_VERSION", "SqliteStore"]

_BUSY_MS = 30_000

_V1 = results_table("INTEGER PRIMARY KEY AUTOINCREMENT")
_V2 = """
ALTER TABLE results ADD COLUMN tag TEXT;
ALTER TABLE results ADD COLUMN stack TEXT;
ALTER TABLE results ADD COLUMN points TEXT;
ALTER TABLE results ADD COLUMN config TEXT;
ALTER TABLE results ADD COLUMN project TEXT;
CREATE INDEX IF NOT EXISTS results_baseline ON results (stage, channel, device_kind, arch, project, recorded_at, id);
CREATE INDEX IF NOT EXISTS results_pipeline ON results (pipeline_id);
CREATE TABLE IF NOT EXISTS anchors (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run TEXT NOT NULL,
    channel TEXT,
    device_kind TEXT,
    arch TEXT,
    set_by TEXT NOT NULL,
    reason TEXT NOT NULL,
    set_at TEXT NOT NULL,
    project TEXT
)
"""
MIGRATIONS = {1: _V1, 2: _V2}  # version -> what takes the schema from version - 1 to it
# not a schema version: derived data an older gatekeeper ignores (gatekeeper.history.sql)
_SERIES_TABLE = f"""
CREATE TABLE IF NOT EXISTS {SERIES_TABLE} (
    result_id INTEGER PRIMARY KEY,
    stack TEXT,
    config TEXT,
    names TEXT NOT NULL,
    data BLOB NOT NULL
)
"""


class SqliteStore(SqlStore):
    label = "sqlite"

    def __init__(
        self, path: str | Path, *, create: bool = True, missing_ok: bool = False, project: str | None = None
    ) -> None:
        """``create``: make the file when it does not exist (the default for a store named in code; every
        command opens stores through ``gatekeeper.history.open_store``, which creates only to record)."""
        self.project = project
        if not str(path):
            raise InputError(None, "--baseline", "sqlite store needs a path", "e.g. sqlite:.gatekeeper/results.db")
        self.path = Path(path)
        self.why_missing = ""
        self.skipped: list[str] = []
        self.missing = _missing(self.path)
        if self.missing and not create and not missing_ok:
            raise InputError(
                self.path, "", "no such history store",
                "check the path (a store is created only by a run that records: evaluate --record, history import)",
            )  # fmt: skip
        if self.missing and not create:
            return  # an empty store that stays on no disk
        self.missing = False
        with self._connect() as conn:
            self._migrate(conn)

    def where(self) -> str:
        return str(self.path)

    def _insert_id(self, conn: Any, insert: str, row: Any) -> int:
        return int(conn.execute(insert, row).lastrowid)

    def _series_table(self, conn: Any, *, create: bool) -> bool:
        if create:  # inside BEGIN IMMEDIATE: one writer at a time
            conn.execute(_SERIES_TABLE)
            return True
        found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", [SERIES_TABLE])
        return found.fetchone() is not None

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        if self.missing and self.path.exists():
            self.missing = False
        try:
            if not self.missing:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(
                ":memory:" if self.missing else self.path, timeout=_BUSY_MS / 1000, isolation_level=None
            )
        except (OSError, sqlite3.Error) as err:
            raise InputError(self.path, "", f"cannot open the history database: {err}", "check the path") from None
        try:
            conn.execute(f"PRAGMA busy_timeout = {_BUSY_MS}")
            if self.missing:  # an empty store: the tables exist, nothing is in them, nothing is written to disk
                _apply(conn, 0)
            yield conn
        except sqlite3.DatabaseError as err:
            raise InputError(
                self.path, "", f"not a usable history database: {err}", "point sqlite: at a gatekeeper store"
            ) from None
        finally:
            conn.close()

    @contextlib.contextmanager
    def _transaction(self, conn: Any) -> Iterator[None]:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def _migrate(self, conn: sqlite3.Connection) -> None:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise InputError(
                self.path, "", f"store schema version {version} is newer than this gatekeeper's {SCHEMA_VERSION}",
                "upgrade gatekeeper (pip install -U gatekeeper-rocm) in this job",
            )  # fmt: skip
        if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
            _use_wal(conn)
        if version == SCHEMA_VERSION:
            return
        with self._transaction(conn):
            _apply(conn, conn.execute("PRAGMA user_version").fetchone()[0])  # another writer may have won


def _use_wal(conn: sqlite3.Connection) -> None:
    """Switch the file to WAL (persistent: once per database file). The switch needs the file to itself, and
    when several jobs open a new store at once SQLite may answer "database is locked" at once, without
    waiting in its busy handler (it would deadlock): so the switch is retried, up to the busy timeout.
    tests/history/test_store_contract.py has eight writers on one new store; test_sqlite_store.py plants the
    refusal."""
    deadline = time.monotonic() + _BUSY_MS / 1000
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as err:
            if "locked" not in str(err).lower() or time.monotonic() >= deadline:
                raise
            time.sleep(0.02)


def _apply(conn: sqlite3.Connection, version: int) -> None:
    for step in range(version + 1, SCHEMA_VERSION + 1):
        for statement in MIGRATIONS[step].split(";"):
            if statement.strip():
                conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def _missing(path: Path) -> bool:
    """True when nothing is at ``path`` (a dangling link included: sqlite would create its target). Anything
    there that cannot be looked at (a symlink loop, a path through a file) is an error, never an empty store:
    ``Path.exists`` reads those as missing, and a baseline that is not there lets a gate fall back to its
    missing-data policy."""
    try:
        path.stat()
    except FileNotFoundError:
        return True
    except OSError as exc:
        raise InputError(
            path, "", f"cannot open the history store ({exc.strerror})", "point --baseline at a database file"
        ) from None
    return False
