"""Walking the kernel cache without following anything in it.

The cache root is a directory any CI job with the cache can write (GitLab restores it from an archive
that job saved), so what is under it is hostile input: a symbolic link to a file or directory outside,
a FIFO that blocks whoever opens it, a device node, a socket, a tree nested thousands of levels deep.
The rule (docs/security.md, "The kernel cache"): nothing under the root is followed, read, timed or
deleted through a link. Every entry is looked at with ``lstat`` (``os.scandir``'s
``stat(follow_symlinks=False)``); only a real directory is descended into, and only a regular file is a
cache entry. The root itself may be a link the user chose (``GATEKEEPER_CACHE_DIR``): it is resolved by
the command before the walk.

The walk is iterative (an explicit stack): ``os.walk`` and ``Path.rglob`` recurse once per level in
Python 3.11, so a tree ~1,000 levels deep ended every cache command with a RecursionError. A directory
that cannot be listed (no permission, or a path longer than the system's PATH_MAX) is passed over, as
``os.walk`` does: nothing under it can be opened by path either, by gatekeeper or by a compiler.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Item", "kind_of", "shown", "walk"]


@dataclass(frozen=True)
class Item:
    path: Path
    rel: str  # relative to the root, "/"-separated
    st: os.stat_result  # lstat: the item itself, never what a link points to

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.st.st_mode)

    @property
    def is_regular(self) -> bool:
        return stat.S_ISREG(self.st.st_mode)


def shown(name: str | Path) -> str:
    """A file name as text any output can carry: bytes that are not UTF-8 (Python holds them as lone surrogates,
    which no UTF-8 stream or JSON reader takes) become ``\\xNN``. For reports only, never to open a file."""
    return str(name).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def kind_of(mode: int) -> str:
    """What a non-regular item is, in words ("a symbolic link")."""
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device node"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "a regular file" if stat.S_ISREG(mode) else "a special file"


def walk(root: Path, *, skip: frozenset[str] = frozenset()) -> Iterator[Item]:
    """Every item under ``root`` (directories too, each before what it holds), by lstat; names in ``skip``
    are left out at the top level only (the quarantine, the breaker's state, gatekeeper's own files)."""
    stack: list[tuple[Path, str]] = [(root, "")]
    while stack:
        directory, prefix = stack.pop()
        try:
            with os.scandir(directory) as it:
                found = []
                for entry in it:
                    if not prefix and entry.name in skip:
                        continue
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue  # gone since it was listed
                    found.append(Item(Path(entry.path), prefix + entry.name, st))
        except OSError:
            continue  # not listable (permission, a path beyond PATH_MAX, gone): nothing under it is reachable
        found.sort(key=lambda i: i.rel)
        yield from found
        # reversed onto the stack: the first directory of this one is walked next
        stack += [(i.path, i.rel + "/") for i in reversed(found) if i.is_dir]
