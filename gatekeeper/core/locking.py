"""An advisory lock file beside a state file, so concurrent jobs on one runner cannot lose an update."""

from __future__ import annotations

import contextlib
import fcntl
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["LockTimeout", "locked"]


class LockTimeout(Exception):
    """Another process held the lock longer than the timeout."""


@contextlib.contextmanager
def locked(path: str | Path, *, timeout_s: float = 120.0, poll_s: float = 0.05) -> Iterator[None]:
    """Hold ``<path>.lock`` exclusively (fcntl) for the block; LockTimeout after ``timeout_s``."""
    lock_path = Path(f"{path}.lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a+") as lock:
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
