"""sha256 for the commands that run on every pipeline, without loading OpenSSL.

Why not ``hashlib``: importing it loads OpenSSL's libcrypto, 3.5 MB of resident memory, more than a
tenth of what ``gatekeeper evaluate`` peaks at (benchmarks/README.md, "Evaluate over a large JUnit
file"), paid by every pipeline for a few digests of small files. CPython builds its own sha256 beside
OpenSSL's (``_sha2`` from 3.12, ``_sha256`` before): the same digest, tested against hashlib
(tests/core/test_digest.py), slower on large inputs (about 60 ms against 10 ms for 17 MB here), a cost
evaluate pays only for an artifact that large. A Python built without it falls back to hashlib.
Commands off that path (bisect, notify, analyze) keep using hashlib.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["file_sha256", "sha256"]


def _constructor() -> Any:
    try:
        from _sha2 import sha256 as builtin  # type: ignore[import-not-found,unused-ignore]  # CPython >= 3.12
    except ImportError:
        try:
            from _sha256 import sha256 as builtin  # type: ignore[import-not-found,no-redef,unused-ignore]  # 3.11
        except ImportError:
            from hashlib import sha256 as builtin  # type: ignore[assignment,unused-ignore]
    return builtin


sha256 = _constructor()


def file_sha256(path: str | Path, chunk: int = 1 << 20, *, max_bytes: int | None = None, what: str = "file") -> str:
    """The hex sha256 of a file, read in chunks (bounded memory whatever its size).

    With ``max_bytes`` (a file the job did not write): only a regular file is opened (``budgets.open_regular``:
    no FIFO swapped in after a check, no device) and one larger than ``max_bytes`` is an InputError once that
    many bytes were read, so a sparse file of a terabyte costs a bounded time, not hours.
    """
    from gatekeeper.core import budgets
    from gatekeeper.core.errors import InputError

    digest = sha256()
    seen = 0
    with open(path, "rb") if max_bytes is None else budgets.open_regular(path, what=what) as fh:
        for block in iter(lambda: fh.read(chunk), b""):
            seen += len(block)
            if max_bytes is not None and seen > max_bytes:
                raise InputError(
                    path, "", f"{what} is larger than {max_bytes >> 20} MiB", "this is not a file gatekeeper wrote"
                )
            digest.update(block)
    return str(digest.hexdigest())
