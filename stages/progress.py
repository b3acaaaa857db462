"""Progress that reads well both on a terminal and in a GitLab job log.

On a terminal: one live line rewritten in place. In CI (no TTY): plain lines at
most every ``interval_s`` seconds, inside GitLab's collapsible log sections
(one section per check group).

A stage copies its output to ``<stage>.log`` through a pipe (``tee_output``), so
its ``sys.stdout`` is never the terminal itself: ``TerminalAwareText`` answers
``isatty()`` for the stream the pipe ends in, and ``LogLines`` keeps only what a
terminal finally shows of a rewritten line when the log file is written.
"""

from __future__ import annotations

import io
import re
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

__all__ = ["LogLines", "Progress", "TerminalAwareText", "section"]

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
            # one terminal row: a longer line would wrap and every update would add a row
            width = max(20, (getattr(self.stream, "columns", None) or shutil.get_terminal_size((151, 24)).columns) - 1)
            self.stream.write("\r" + line[:width].ljust(width) + ("\n" if final else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


class TerminalAwareText(io.TextIOWrapper):
    """A text stream into a pipe that reports ``isatty()`` of where the pipe's output goes."""

    def __init__(
        self, buffer: io.RawIOBase | io.BufferedIOBase, *, tty: bool, columns: int | None = None, **kwargs: object
    ) -> None:
        super().__init__(buffer, **kwargs)  # type: ignore[arg-type]
        self._gatekeeper_tty = tty
        self.columns = columns  # the terminal's width, when known

    def isatty(self) -> bool:
        return self._gatekeeper_tty


class LogLines:
    """Bytes for a log file from terminal output: of a line rewritten with ``\r``, only its last text.

    ``feed`` returns the complete lines ready to write; ``flush`` what is left at the end.
    A line that is never ended keeps only its text after the last ``\r`` (bounded memory).
    """

    MAX_PENDING = 1 << 16

    def __init__(self) -> None:
        self._pending = b""

    @staticmethod
    def _final(line: bytes) -> bytes:
        if b"\r" not in line:
            return line
        return line.rstrip(b"\r").rsplit(b"\r", 1)[-1].rstrip(b" ")

    def feed(self, chunk: bytes) -> bytes:
        data = self._pending + chunk
        *lines, self._pending = data.split(b"\n")
        if len(self._pending) > self.MAX_PENDING and b"\r" in self._pending[:-1]:
            self._pending = self._pending[self._pending.rindex(b"\r", 0, len(self._pending) - 1) + 1 :]
        return b"".join(self._final(line) + b"\n" for line in lines)

    def flush(self) -> bytes:
        rest, self._pending = self._pending, b""
        return self._final(rest)
