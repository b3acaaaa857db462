"""PostgresStore (``postgresql://USER@HOST:PORT/DB``): the sqlite store's records in one shared PostgreSQL
database, for a platform team whose model repositories all record into one place.

The same records and queries as ``sqlite:`` (``gatekeeper.history.sql``). The password never goes in the
spec that CI logs print: libpq reads ``PGPASSWORD`` (a masked CI variable) or a ``~/.pgpass`` file, and every
message names the store with any password in the URL replaced by ``***``.

Many runners write at once: a save is one short transaction of INSERTs (PostgreSQL serialises nothing
else), and the schema is created or migrated under a transaction-scoped advisory lock, so two jobs that
meet an empty database at the same moment do not both build it. ``gatekeeper_schema`` holds the version;
a database migrated by a newer gatekeeper is refused with an upgrade hint, never written.
The first save also makes ``results_series`` (each record's metric summaries for ``history changes``;
not a schema version, and skipped when the account may not create tables: ``gatekeeper.history.sql``).

psycopg 3 is the ``postgres`` extra (``pip install 'gatekeeper-rocm[postgres]'``; its binary wheel
carries libpq, so a ROCm or CUDA image needs no system package for it).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

from gatekeeper.core.errors import InputError
from gatekeeper.history.sql import SCHEMA_VERSION, SqlStore
from gatekeeper.history.sql_schema import SERIES_TABLE, results_table

__all__ = ["PostgresStore", "redact_url"]

_CONNECT_TIMEOUT_S = 10
_LOCK_ID = 0x6761_7465  # "gate": the advisory lock every gatekeeper takes while it migrates
_V1 = results_table("BIGSERIAL PRIMARY KEY")
_V2 = """
ALTER TABLE results ADD COLUMN IF NOT EXISTS tag TEXT;
ALTER TABLE results ADD COLUMN IF NOT EXISTS stack TEXT;
ALTER TABLE results ADD COLUMN IF NOT EXISTS points TEXT;
ALTER TABLE results ADD COLUMN IF NOT EXISTS config TEXT;
ALTER TABLE results ADD COLUMN IF NOT EXISTS project TEXT;
CREATE INDEX IF NOT EXISTS results_baseline ON results (stage, channel, device_kind, arch, project, recorded_at, id);
CREATE INDEX IF NOT EXISTS results_pipeline ON results (pipeline_id);
CREATE TABLE IF NOT EXISTS anchors (
    id BIGSERIAL PRIMARY KEY,
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
MIGRATIONS = {1: _V1, 2: _V2}
# not a schema version: derived data an older gatekeeper ignores (gatekeeper.history.sql)
_SERIES_TABLE = f"""
CREATE TABLE IF NOT EXISTS {SERIES_TABLE} (
    result_id BIGINT PRIMARY KEY,
    stack TEXT,
    config TEXT,
    names TEXT NOT NULL,
    data BYTEA NOT NULL
)
"""


def redact_url(url: str) -> str:
    """The URL with any password replaced by ``***`` (and any ``password=`` parameter)."""
    url = re.sub(r"(://[^:/@]*:)[^@/]*@", r"\1***@", url)
    return re.sub(r"(password=)[^&\s]*", r"\1***", url, flags=re.IGNORECASE)


class PostgresStore(SqlStore):
    label = "postgresql"
    placeholder = "%s"

    def __init__(self, url: str, *, create: bool = False, missing_ok: bool = False, project: str | None = None) -> None:
        """``create``/``missing_ok`` are the sqlite store's: a server database always exists, and its tables
        are made by the first gatekeeper that connects (only a recording use writes rows)."""
        self.url = url
        self.project = project
        self.why_missing = ""
        self.skipped: list[str] = []
        try:
            import psycopg  # noqa: F401
        except ImportError:
            raise InputError(
                self.where(), "", "a postgresql: store needs psycopg 3, which is not installed",
                "pip install 'gatekeeper-rocm[postgres]' in the job's image",
            ) from None  # fmt: skip
        with self._connect() as conn:
            self._migrate(conn)

    def where(self) -> str:
        return redact_url(self.url)

    def _insert_id(self, conn: Any, insert: str, row: Any) -> int:
        return int(conn.execute(insert + " RETURNING id", row).fetchone()[0])

    def _series_table(self, conn: Any, *, create: bool) -> bool:
        import psycopg

        if conn.execute("SELECT to_regclass(%s)", [SERIES_TABLE]).fetchone()[0] is not None:
            return True
        if not create:
            return False
        try:
            with conn.transaction():  # a savepoint: an account that may not create tables still saves records
                conn.execute("SELECT pg_advisory_xact_lock(%s)", [_LOCK_ID])
                conn.execute(_SERIES_TABLE)
        except psycopg.Error:
            return False
        return True

    @contextlib.contextmanager
    def _connect(self) -> Iterator[Any]:
        import psycopg

        try:
            conn = psycopg.connect(self.url, autocommit=True, connect_timeout=_CONNECT_TIMEOUT_S)
        except psycopg.Error as err:
            raise InputError(self.where(), "", _connect_problem(err), _connect_fix(err)) from None
        try:
            yield conn
        except psycopg.Error as err:
            first = (str(err).strip().splitlines() or [type(err).__name__])[0]
            raise InputError(
                self.where(), "", f"the database refused a query: {first}",
                "check that the account may read and write the gatekeeper tables",
            ) from None  # fmt: skip
        finally:
            conn.close()

    @contextlib.contextmanager
    def _transaction(self, conn: Any) -> Iterator[None]:
        with conn.transaction():
            yield

    def _version(self, conn: Any) -> int:
        exists = conn.execute("SELECT to_regclass('gatekeeper_schema')").fetchone()[0]
        if exists is None:
            return 0
        row = conn.execute("SELECT max(version) FROM gatekeeper_schema").fetchone()
        return int(row[0] or 0)

    def _migrate(self, conn: Any) -> None:
        version = self._version(conn)
        self._refuse_newer(version)
        if version == SCHEMA_VERSION:
            return
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", [_LOCK_ID])
            conn.execute("CREATE TABLE IF NOT EXISTS gatekeeper_schema (version INTEGER NOT NULL)")
            version = self._version(conn)  # another job may have migrated while this one waited
            self._refuse_newer(version)
            for step in range(version + 1, SCHEMA_VERSION + 1):
                for statement in MIGRATIONS[step].split(";"):
                    if statement.strip():
                        conn.execute(statement)
            if version < SCHEMA_VERSION:
                conn.execute("DELETE FROM gatekeeper_schema")
                conn.execute("INSERT INTO gatekeeper_schema (version) VALUES (%s)", [SCHEMA_VERSION])

    def _refuse_newer(self, version: int) -> None:
        if version > SCHEMA_VERSION:
            raise InputError(
                self.where(),
                "",
                f"store schema version {version} is newer than this gatekeeper's {SCHEMA_VERSION}",
                "upgrade gatekeeper (pip install -U gatekeeper-rocm) in this job",
            )


def _connect_problem(err: Exception) -> str:
    text = redact_url(" ".join(str(err).split()))
    if "password authentication failed" in text or "no password supplied" in text:
        return "cannot log in: the server refused the password"
    if "does not exist" in text and "database" in text:
        return f"cannot open the database: {text[:200]}"
    return f"cannot reach the history store: {text[:200]}"


def _connect_fix(err: Exception) -> str:
    text = str(err)
    if "password" in text:
        return "set PGPASSWORD (a masked CI variable) or a ~/.pgpass entry for this user"
    if "does not exist" in text:
        return "create the database (createdb) or fix its name in the URL"
    return "check host, port and that the server is up (pg_isready); a recording job spools its record meanwhile"
