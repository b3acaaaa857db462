"""The SQL stores' bound on the times rows claim about themselves: rows dated after the reading job's clock
are never the newest run, the baseline or the anchor (``gatekeeper.history.baseline.beyond_clock`` judges
each row read; this keeps a flood of far-future rows from pushing every real one out of a LIMIT)."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Sequence
from typing import Any, Protocol

from gatekeeper.core.budgets import CLOCK_SKEW

__all__ = ["Reader", "believed"]


class Reader(Protocol):
    """What of ``gatekeeper.history.sql.SqlStore`` this module and ``sql_anchors`` use (a Protocol, so that
    neither imports the store: no import cycle inside history)."""

    label: str
    project: str | None
    skipped: list[str]

    def where(self) -> str: ...
    def _rows(self, query: str, args: Sequence[Any], conn: Any = None) -> list[Sequence[Any]]: ...
    def _connect(self) -> contextlib.AbstractContextManager[Any]: ...
    def _transaction(self, conn: Any) -> contextlib.AbstractContextManager[None]: ...
    def _sql(self, text: str) -> str: ...
    def _scope(self, conds: list[str], args: list[object]) -> None: ...
    def _clock(self) -> dt.datetime: ...
    def run(self, run: str) -> Any: ...


# A stored time is text, compared as text: one written with an offset reads up to 14 hours later (23:59+14:00)
# or 12 hours earlier (-12:00) than it is. The queries leave out only rows later than the clock by more than
# that (so a flood of far-future rows cannot push every real one out of a LIMIT), and ask for as many more rows
# as may be later than the clock under their text; beyond_clock then judges each row read, offset and all.
_OFFSET_AHEAD = dt.timedelta(hours=14)
_OFFSET_BEHIND = dt.timedelta(hours=12)
_NAMED = 5  # far-future rows named in a warning, per query


def believed(
    store: Reader,
    conds: list[str],
    args: list[object],
    now: dt.datetime,
    what: str = "record",
    *,
    table: str = "results",
    conn: Any = None,
) -> int:
    """Keep the rows dated after the clock out of a query: add the condition to ``conds`` (rows later than
    ``now`` by more than any UTC offset are left out, and named in ``skipped``); return how many rows the
    query still holds that may be dated after ``now`` as text (those ``beyond_clock`` judges one by one),
    so that a query with a LIMIT asks for that many more and still gets its number of believed rows (the
    caller keeps no more than its number)."""
    column = "set_at" if table == "anchors" else "recorded_at"
    near = (now + CLOCK_SKEW - _OFFSET_BEHIND).isoformat(timespec="seconds")
    bound = (now + CLOCK_SKEW + _OFFSET_AHEAD).isoformat(timespec="seconds")
    where = " AND ".join(conds)
    query = f"SELECT id, {column} FROM {table} WHERE {where} AND {column} > ? ORDER BY {column} DESC, id DESC LIMIT ?"  # noqa: S608 - constant table and column names and ? placeholders only  # nosec B608
    far = store._rows(query, [*args, bound, _NAMED + 1], conn)
    label = "anchor " if table == "anchors" else f"run {store.label}:"
    clock = now.isoformat(timespec="seconds")
    for row_id, at in far[:_NAMED]:
        store.skipped.append(
            f"{what} {label}{row_id} in {store.where()} skipped: {column} {str(at)[:40]!r} is later than this "
            f"job's clock ({clock}) by more than any UTC offset"
        )
    if len(far) > _NAMED:
        store.skipped.append(f"and more {what}s in {store.where()} dated after this job's clock, skipped")
    query = f"SELECT COUNT(*) FROM {table} WHERE {where} AND {column} > ? AND {column} <= ?"  # noqa: S608 - constant table and column names and ? placeholders only  # nosec B608
    near_rows = int(store._rows(query, [*args, near, bound], conn)[0][0])
    conds.append(f"{column} <= ?")
    args.append(bound)
    return near_rows
