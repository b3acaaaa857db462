"""Corrupt kernel-cache entries: found, moved aside, reported, never fatal.

MIOpen keeps its tuning results and compiled kernels in SQLite files (the user
db ``*.udb``/``*.db`` and the kernel cache ``*.kdb``); a job killed while one
is written leaves a file MIOpen then fails on in every later job. Each SQLite
file is opened read-only and checked with ``PRAGMA integrity_check``; a file
that fails (or is not a database at all) is moved to ``<root>/.quarantine/``
so the next run rebuilds it, and the move is reported.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

__all__ = ["QUARANTINE", "CorruptEntry", "check_and_quarantine", "sqlite_problem"]

QUARANTINE = ".quarantine"
SQLITE_SUFFIXES = (".db", ".udb", ".kdb", ".ufdb", ".sqlite", ".sqlite3")
SQLITE_MAGIC = b"SQLite format 3\x00"


@dataclass(frozen=True)
class CorruptEntry:
    path: str
    moved_to: str | None
    problem: str


def sqlite_problem(path: Path) -> str | None:
    """None when ``path`` is a sound SQLite database, else what is wrong with it."""
    try:
        with path.open("rb") as fh:
            head = fh.read(len(SQLITE_MAGIC))
    except OSError as err:
        return f"unreadable: {err.strerror or err}"
    if not head:
        return None  # an empty file is how SQLite starts a new database
    if head != SQLITE_MAGIC:
        return "not a SQLite database (bad header)"
    import sqlite3  # here, not at the top: the commands that only name this module never load SQLite

    try:
        # immutable=1: never take a lock or create a journal beside a file we only inspect.
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True, timeout=5)
        try:
            rows = conn.execute("PRAGMA integrity_check").fetchall()
        finally:
            conn.close()
    except sqlite3.DatabaseError as err:
        return f"SQLite error: {err}"
    result = "; ".join(str(r[0]) for r in rows[:3])
    return None if result == "ok" else f"integrity_check: {result}"


def check_and_quarantine(root: Path) -> list[CorruptEntry]:
    if not root.is_dir():
        return []
    found: list[CorruptEntry] = []
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
    for path in sorted(root.rglob("*")):
        if QUARANTINE in path.relative_to(root).parts or not path.is_file():
            continue
        if path.suffix not in SQLITE_SUFFIXES:
            continue
        problem = sqlite_problem(path)
        if problem is None:
            continue
        target = root / QUARANTINE / stamp / path.relative_to(root)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            path.replace(target)
            moved: str | None = str(target)
        except OSError as err:
            # Never fatal: say it could not be moved, the job goes on.
            moved = None
            problem = f"{problem}; could not move aside: {err.strerror or err}"
        found.append(CorruptEntry(str(path), moved, problem))
    return found
