"""core/digest.py: CPython's own sha256 gives hashlib's digests; without it, hashlib's."""

from __future__ import annotations

import hashlib
import importlib
import os
import sys
from pathlib import Path

import pytest

from gatekeeper.core import digest


@pytest.mark.parametrize("size", [0, 1, 63, 64, 65, 1 << 20, (1 << 20) + 7])
def test_the_digests_are_hashlibs(size: int, tmp_path: Path) -> None:
    data = os.urandom(size)
    assert digest.sha256(data).hexdigest() == hashlib.sha256(data).hexdigest()
    path = tmp_path / "blob"
    path.write_bytes(data)
    assert digest.file_sha256(path) == hashlib.sha256(data).hexdigest()
    assert digest.file_sha256(path, chunk=5) == hashlib.sha256(data).hexdigest()  # across chunk edges


def test_the_builtin_is_used_where_cpython_has_one() -> None:
    builtin = "_sha2" if sys.version_info >= (3, 12) else "_sha256"
    assert digest.sha256.__module__ == builtin  # not hashlib's openssl_sha256


def test_a_python_without_the_builtin_falls_back_to_hashlib(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "_sha2", None)  # None in sys.modules: that import raises ImportError
    monkeypatch.setitem(sys.modules, "_sha256", None)
    try:
        fallback = importlib.reload(digest)
        assert fallback.sha256 is hashlib.sha256
        assert fallback.sha256(b"x").hexdigest() == hashlib.sha256(b"x").hexdigest()
    finally:
        monkeypatch.undo()
        importlib.reload(digest)
