"""Opening a log for the classifier: a file, a gzip (by its magic bytes) or standard input; what is not a
log (a directory, a device that never ends) is refused with one line."""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from gatekeeper.core.errors import InputError

__all__ = ["open_log"]


@contextlib.contextmanager
def open_log(path: str | Path) -> Iterator[BinaryIO]:
    """A binary stream of a log file (``-`` is stdin); gzip is detected by its magic bytes."""
    if str(path) == "-":
        raw: BinaryIO = sys.stdin.buffer
        if not hasattr(raw, "peek"):
            raw = io.BufferedReader(raw)  # type: ignore[type-var]  # typeshed: stdin.buffer is BinaryIO, lacks readinto
        yield _maybe_gzip(raw)
        return
    try:
        # Not a with-statement here: open errors become InputError, the body's errors must not.
        fh = Path(path).open("rb")  # noqa: SIM115
    except FileNotFoundError:
        raise InputError(path, "", "log file not found", "check the path") from None
    except IsADirectoryError:
        raise InputError(
            path, "", "expected a log file, found a directory", "use --artifacts for a directory"
        ) from None
    except OSError as err:
        raise InputError(
            path, "", f"cannot read log: {err.strerror}", "check the path and that the job can read it"
        ) from None
    if stat.S_ISCHR(os.fstat(fh.fileno()).st_mode) or stat.S_ISBLK(os.fstat(fh.fileno()).st_mode):
        fh.close()  # /dev/zero never ends: a log is a file or a pipe (tests/security/test_matrix.py)
        raise InputError(path, "", "expected a log file, found a device", "pass a file, a pipe or - for stdin")
    with fh:
        yield _maybe_gzip(fh)


def _maybe_gzip(stream: BinaryIO) -> BinaryIO:
    head = stream.peek(2)[:2] if hasattr(stream, "peek") else b""
    return gzip.GzipFile(fileobj=stream, mode="rb") if head == b"\x1f\x8b" else stream  # type: ignore[return-value]
