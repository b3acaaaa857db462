"""Progress that reads well both on a terminal and in a GitLab job log.

On a terminal: one live line rewritten in place. In CI (no TTY): plain lines at
most every ``interval_s`` seconds, inside GitLab's collapsible log sections
(one section per check group).
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

__all__ = ["Progress", "section"]

_ESC = "\x1b[0K"


def _section_id(name: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_.-]", "_", name)[:60] or "section"


@contextmanager
def section(name: str, header: str, *, stream: TextIO | None = None, collapsed: bool = True) -> Iterator[None]:
    """A GitLab collapsible section; on a terminal just a header line."""
    stream = stream or sys.stdout
    sid = _section_id(name)
    if stream.isatty():
        stream.write(f"== {header}\n")
    else:
        opt = "[collapsed=true]" if collapsed else ""
        stream.write(f"{_ESC}section_start:{int(time.time())}:{sid}{opt}\r{_ESC}{header}\n")
    stream.flush()
    try:
        yield
    finally:
        if not stream.isatty():
            stream.write(f"{_ESC}section_end:{int(time.time())}:{sid}\r{_ESC}\n")
            stream.flush()


class Progress:
    """``update(done, note)`` over ``total`` items."""

    def __init__(self, label: str, total: int, *, stream: TextIO | None = None, interval_s: float = 10.0) -> None:
        self.label = label
        self.total = total
        self.stream = stream or sys.stdout
        self.interval_s = interval_s
        self._tty = self.stream.isatty()
        self._start = time.monotonic()
        self._last = 0.0

    def update(self, done: int, note: str = "") -> None:
        now = time.monotonic()
        final = done >= self.total
        if not self._tty and not final and now - self._last < self.interval_s:
            return
        self._last = now
        pct = 100.0 * done / self.total if self.total else 100.0
        line = f"{self.label}: {done}/{self.total} ({pct:.0f}%) {now - self._start:.0f}s {note}".rstrip()
        if self._tty:
            self.stream.write("\r" + line[:150].ljust(150) + ("\n" if final else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()
