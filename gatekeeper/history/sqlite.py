"""SqliteStore (``sqlite:PATH``): every stage result with its fingerprint, ref, commit, channel and time.

The embedded default: history, report and breaker read it. Several jobs on one
runner may write at once, so the database runs in WAL mode with a busy timeout
and each save is one short ``BEGIN IMMEDIATE`` transaction.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from gatekeeper.contract.stage_report import StageReport, utc_now
from gatekeeper.core.errors import InputError
from gatekeeper.history.baseline import BASELINE_VERDICTS, BaselineStore, RunInfo, first_comparable, read_record

__all__ = ["SCHEMA_VERSION", "SqliteStore"]

SCHEMA_VERSION = 1
_BUSY_MS = 30_000
_SCAN = 500  # rows examined for a comparable baseline before giving up

_DDL = """
CREATE TABLE IF NOT EXISTS results (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    stage TEXT NOT NULL,
    status TEXT NOT NULL,
    channel TEXT,
    device_kind TEXT,
    arch TEXT,
    rocm_version TEXT,
    torch_version TEXT,
    model TEXT,
    ref TEXT,
    commit_sha TEXT,
    pipeline_id TEXT,
    verdict TEXT,
    recorded_at TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    report TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS results_stage_time ON results (stage, recorded_at, id);
"""


class SqliteStore(BaselineStore):
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.why_missing = ""  # why the last latest() returned None
        self.skipped: list[str] = []  # records the last latest() could not use
        if not str(path):
            raise InputError(None, "--baseline", "sqlite store needs a path", "e.g. sqlite:.gatekeeper/results.db")
        with self._connect() as conn:
            self._migrate(conn)

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=_BUSY_MS / 1000, isolation_level=None)
        except (OSError, sqlite3.Error) as err:
            raise InputError(self.path, "", f"cannot open the baseline database: {err}", "check the path") from None
        try:
            conn.execute(f"PRAGMA busy_timeout = {_BUSY_MS}")
            yield conn
        except sqlite3.DatabaseError as err:
            raise InputError(
                self.path, "", f"not a usable baseline database: {err}", "point sqlite: at a gatekeeper store"
            ) from None
        finally:
            conn.close()

    def _migrate(self, conn: sqlite3.Connection) -> None:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise InputError(
                self.path, "", f"store schema version {version} is newer than this gatekeeper's {SCHEMA_VERSION}",
                "upgrade gatekeeper",
            )  # fmt: skip
        if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
            conn.execute("PRAGMA journal_mode = WAL")  # persistent: set once per database file
        if version == SCHEMA_VERSION:
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            if conn.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:  # another writer may have won
                for statement in _DDL.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def save(self, report: StageReport, info: RunInfo) -> None:
        env = report.environment
        row = (
            report.stage, report.status, env.channel, env.device_kind, env.arch, env.rocm_version, env.torch_version,
            report.config.get("model"), info.ref, info.commit, info.pipeline_id, info.verdict,
            info.recorded_at or utc_now(), json.dumps(env.to_dict(), sort_keys=True), json.dumps(report.to_dict()),
        )  # fmt: skip
        with self._connect() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute(
                    "INSERT INTO results (stage, status, channel, device_kind, arch, rocm_version, torch_version, "
                    "model, ref, commit_sha, pipeline_id, verdict, recorded_at, fingerprint, report) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    row,
                )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    def latest_record(
        self, stage: str, like: StageReport, *, branch: str | None = None
    ) -> tuple[RunInfo, StageReport] | None:
        env = like.environment
        query = (
            "SELECT id, ref, commit_sha, pipeline_id, verdict, recorded_at, report FROM results "
            "WHERE stage = ? AND channel IS ? AND device_kind IS ? AND arch IS ? AND status = 'passed' "
            "AND (verdict IS NULL OR verdict IN (?, ?))"
        )
        args: list[object] = [stage, env.channel, env.device_kind, env.arch, *BASELINE_VERDICTS]
        if branch:
            query += " AND ref = ?"
            args.append(branch)
        query += " ORDER BY recorded_at DESC, id DESC LIMIT ?"
        args.append(_SCAN)
        with self._connect() as conn:
            rows = conn.execute(query, args).fetchall()
        device = env.device_kind if env.arch in (None, env.device_kind) else f"{env.device_kind} {env.arch}"
        on = f", branch {branch}" if branch else ""
        self.why_missing = (
            f"no passed {stage} result on {device} ({env.channel} channel{on}, verdict pass or warn) in {self.path} "
            "yet (first run of this branch or device)"
        )
        self.skipped = []
        found, reasons = first_comparable(self._usable(rows), like)
        if found is not None:
            self.why_missing = ""
        elif reasons:
            self.why_missing = reasons[0]  # the newest candidate's reason, as the GitLab store reports
        return found

    def _usable(self, rows: Iterable[Sequence[Any]]) -> Iterator[tuple[RunInfo, StageReport]]:
        """The rows that may be a baseline, read one at a time; the others are named in ``skipped``."""
        for row_id, ref, commit, pipeline, verdict, at, text in rows:
            info = RunInfo(ref, commit, pipeline, verdict, at, run_id=f"sqlite:{row_id}")
            report, problem = read_record(text, f"{self.path} row {row_id}")
            if report is None:
                self.skipped.append(f"baseline record {info.describe()} in {self.path} skipped: {problem}")
                continue
            yield info, report

    def history(
        self, stage: str, *, channel: str | None = None, limit: int = 50
    ) -> Sequence[tuple[RunInfo, StageReport]]:
        query = "SELECT id, ref, commit_sha, pipeline_id, verdict, recorded_at, report FROM results WHERE stage = ?"
        args: list[object] = [stage]
        if channel:
            query += " AND channel = ?"
            args.append(channel)
        query += " ORDER BY recorded_at DESC, id DESC LIMIT ?"
        args.append(int(limit))
        with self._connect() as conn:
            rows = conn.execute(query, args).fetchall()
        self.skipped = []
        return list(self._usable(rows))
