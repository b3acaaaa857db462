"""A copy of this checkout's tracked files, for tests that build the package.

``python -m build`` and ``pip install DIR`` write ``build/`` and ``*.egg-info`` into the tree they build;
building a copy keeps the checkout clean and lets two such tests run at once (pytest-xdist)."""

from __future__ import annotations

import shutil
from pathlib import Path

from gatekeeper.core import proc

ROOT = Path(__file__).resolve().parents[2]


def source_tree(into: Path) -> Path:
    """The files git tracks here (as they are in the work tree, edits included), copied under ``into``."""
    listed = proc.run(["git", "ls-files", "-z"], timeout=60, cwd=ROOT)
    assert listed.ok, listed.describe()
    for rel in filter(None, listed.stdout.split("\0")):
        src = ROOT / rel
        if src.is_file():  # a tracked file deleted in the work tree is not part of the build
            (into / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, into / rel)
    return into
