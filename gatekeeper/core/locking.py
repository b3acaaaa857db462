"""An advisory lock file beside a state file, so concurrent jobs on one runner cannot lose an update."""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from gatekeeper.core.errors import InputError

__all__ = ["LockTimeout", "LockUnusable", "locked", "open_lock"]


class LockTimeout(Exception):
    """Another process held the lock longer than the timeout."""


class LockUnusable(InputError):
    """Something other than a regular file has the lock file's name (a link, a directory, a FIFO)."""


def open_lock(lock_path: Path) -> IO[bytes]:
    """The lock file, created if absent: a regular file, never a link's target.

    State directories live in a cache any job can write. ``open(path, "a+")`` followed a link planted under the
    lock's name (creating an empty file wherever it pointed) and crashed on a directory there (exit 70). The
    lock is opened without following a link and without blocking; anything but a regular file is an
    InputError naming it (docs/security.md, "Findings of the 2026-12-04 audit").
    """
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0)
    hint = "delete it; gatekeeper makes a new one"
    try:
        fd = os.open(lock_path, flags, 0o644)
    except OSError as err:
        raise LockUnusable(
            lock_path, "", f"cannot open the lock file: {err.strerror} (a link or a directory?)", hint
        ) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise LockUnusable(lock_path, "", "the lock file is not a regular file", hint)
    os.set_blocking(fd, True)
    return os.fdopen(fd, "r+b")


@contextlib.contextmanager
def locked(path: str | Path, *, timeout_s: float = 120.0, poll_s: float = 0.05) -> Iterator[None]:
    """Hold ``<path>.lock`` exclusively (fcntl) for the block; LockTimeout after ``timeout_s``."""
    lock_path = Path(f"{path}.lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open_lock(lock_path) as lock:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LockTimeout(f"{lock_path} held by another process for {timeout_s:g} s") from None
                time.sleep(poll_s)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
