"""Corrupt kernel-cache entries: found, moved aside, reported, never fatal.

MIOpen keeps its tuning results and compiled kernels in SQLite files (the user
db ``*.udb``/``*.db`` and the kernel cache ``*.kdb``); a job killed while one
is written leaves a file MIOpen then fails on in every later job. Each SQLite
file is opened read-only and checked with ``PRAGMA integrity_check``; a file
that fails (or is not a database at all) is moved to ``<root>/.quarantine/``
so the next run rebuilds it, and the move is reported.

A cache holds regular files and directories only. A symbolic link, FIFO,
socket or device node under the root is not a cache entry: it is moved to the
quarantine as a corrupt entry (the link itself, never its target), so no
compiler, which would follow it, ever sees it. Nothing is opened, timed or
deleted through a link (``tree.py``); the quarantine is a directory this check
makes itself, fresh at each move, so a link planted where it belongs cannot
send an entry outside the cache.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import os
import secrets
import stat
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from gatekeeper.kernel_cache.tree import kind_of, shown, walk

__all__ = ["BREAKER_DIR", "QUARANTINE", "CorruptEntry", "check_and_quarantine", "sqlite_problem"]

QUARANTINE = ".quarantine"
# The breaker's state lives in the cache root so GitLab keeps it; it is not a
# cache entry (the breaker reads and checks its own files).
BREAKER_DIR = "breaker"
SQLITE_SUFFIXES = (".db", ".udb", ".kdb", ".ufdb", ".sqlite", ".sqlite3")
SQLITE_MAGIC = b"SQLite format 3\x00"
_NOFOLLOW = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)


@dataclass(frozen=True)
class CorruptEntry:
    path: str
    moved_to: str | None
    problem: str


def not_an_entry(mode: int) -> str:
    """The problem text of an item that is not a regular file (a cache holds regular files)."""
    return f"{kind_of(mode)} (a cache holds regular files)"


def sqlite_problem(path: Path) -> str | None:
    """None when ``path`` is a sound SQLite database, else what is wrong with it.

    The file is opened without following a link and without blocking (a FIFO), and only a regular file is
    read."""
    try:
        fd = os.open(path, _NOFOLLOW)
    except OSError as err:
        if err.errno == errno.ELOOP:
            return not_an_entry(stat.S_IFLNK)
        return f"unreadable: {err.strerror or err}"
    with os.fdopen(fd, "rb") as fh:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            return not_an_entry(mode)
        head = fh.read(len(SQLITE_MAGIC))
    if not head:
        return None  # an empty file is how SQLite starts a new database
    if head != SQLITE_MAGIC:
        return "not a SQLite database (bad header)"
    import sqlite3  # here, not at the top: the commands that only name this module never load SQLite

    try:
        # immutable=1: never take a lock or create a journal beside a file we only inspect. absolute(), not
        # resolve(): the path is the entry's own (resolve would follow links on the way).
        conn = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro&immutable=1", uri=True, timeout=5)
        try:
            rows = conn.execute("PRAGMA integrity_check").fetchall()
        finally:
            conn.close()
    except sqlite3.DatabaseError as err:
        return f"SQLite error: {err}"
    result = "; ".join(str(r[0]) for r in rows[:3])
    return None if result == "ok" else f"integrity_check: {result}"


class _Quarantine:
    """``<root>/.quarantine/<time>-<random>/``: made on the first move, by mkdtemp (a new directory, never one
    that was there), inside a ``.quarantine`` that is a real directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.dir: Path | None = None
        self.found: list[CorruptEntry] = []

    def prepare(self) -> None:
        """A ``.quarantine`` that is not a directory (a link to elsewhere) is renamed out of the way (the link
        itself, never its target) and then moved into the new quarantine like any other corrupt entry."""
        path = self.root / QUARANTINE
        try:
            mode = path.lstat().st_mode
        except FileNotFoundError:
            return
        if stat.S_ISDIR(mode):
            return
        problem = f"{kind_of(mode)} where the quarantine directory belongs"
        aside = self.root / f"{QUARANTINE}-{secrets.token_hex(8)}"
        try:
            os.rename(path, aside)
        except OSError as err:
            self.found.append(CorruptEntry(shown(path), None, f"{problem}; could not move aside: {err.strerror}"))
            return
        self.move(aside, QUARANTINE, problem, display=path)

    def move(self, path: Path, rel: str, problem: str, *, display: Path | None = None) -> None:
        try:
            if self.dir is None:
                base = self.root / QUARANTINE
                base.mkdir(exist_ok=True)
                if not base.is_dir() or base.is_symlink():
                    raise OSError(errno.ENOTDIR, "the quarantine is not a directory")
                stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S")
                self.dir = Path(tempfile.mkdtemp(prefix=f"{stamp}-", dir=base))
            target = self.dir / rel
            # Inside the fresh directory, made here (no links), one level after the other: Path.mkdir(parents=True)
            # recurses once per level (a RecursionError for an entry ~1,000 levels deep).
            made = self.dir
            for part in Path(rel).parts[:-1]:
                made = made / part
                with contextlib.suppress(FileExistsError):
                    os.mkdir(made)
            os.replace(path, target)  # a link is renamed itself, never followed
            moved: str | None = shown(target)
        except OSError as err:
            # Never fatal: say it could not be moved, the job goes on.
            moved = None
            problem = f"{problem}; could not move aside: {err.strerror or err}"
        self.found.append(CorruptEntry(shown(display or path), moved, problem))


def check_and_quarantine(root: Path, *, own: Iterable[str] = (), replace_own: bool = False) -> list[CorruptEntry]:
    """Move every corrupt entry under ``root`` to the quarantine: a SQLite file that fails its check, and
    anything that is not a regular file or a directory. ``own``: gatekeeper's files in the root (the snapshot),
    not cache entries: left alone (their reader refuses one that is not a regular file), except with
    ``replace_own`` (``begin`` is about to write them anew), when one that is not a regular file is moved aside."""
    if not root.is_dir():
        return []
    own = frozenset(own)
    quarantine = _Quarantine(root)
    quarantine.prepare()
    for name in sorted(own) if replace_own else ():
        try:
            mode = (root / name).lstat().st_mode
        except OSError:
            continue
        if not stat.S_ISREG(mode):
            quarantine.move(root / name, name, f"{kind_of(mode)} where gatekeeper's {name} belongs")
    for item in walk(root, skip=own | {QUARANTINE, BREAKER_DIR}):
        if item.is_dir:
            continue
        if not item.is_regular:
            quarantine.move(item.path, item.rel, not_an_entry(item.st.st_mode))
            continue
        if item.path.suffix not in SQLITE_SUFFIXES:
            continue
        problem = sqlite_problem(item.path)
        if problem is not None:
            quarantine.move(item.path, item.rel, problem)
    return quarantine.found
