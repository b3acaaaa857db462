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


def file_sha256(path: str | Path, chunk: int = 1 << 20) -> str:
    """The hex sha256 of a file, read in chunks (bounded memory whatever its size)."""
    digest = sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(chunk), b""):
            digest.update(block)
    return str(digest.hexdigest())
