"""Budgets for every reader: what a hostile file may cost before it is refused (exit 2).

Artifacts, JUnit files, logs and archives come from the code under test. A
reader here opens only regular files (a FIFO named ``*.json`` would block
forever, a device would never end, a symlink loop or a directory would crash),
reads at most a capped number of bytes, bounds YAML alias expansion, checks an
archive member's size before inflating it, and turns timestamps into aware UTC
datetimes or refuses them.
"""

from __future__ import annotations

import datetime as dt
import errno
import os
import stat
from pathlib import Path
from typing import IO

import yaml

from gatekeeper.core.errors import InputError

__all__ = [
    "CLOCK_SKEW",
    "MAX_JSON_BYTES",
    "MAX_YAML_BYTES",
    "MAX_YAML_NODES",
    "MAX_ZIP_MEMBER_BYTES",
    "aware_utc",
    "check_yaml_size",
    "open_regular",
    "read_capped",
]

MAX_JSON_BYTES = 256 * 2**20  # a stage report with every sample of a long perf run stays far below
MAX_YAML_BYTES = 4 * 2**20  # gates.yaml, known_issues.yaml, matrix.yaml: hand-written config
MAX_YAML_NODES = 200_000  # nodes after alias expansion: a real gates.yaml has a few hundred
MAX_ZIP_MEMBER_BYTES = 64 * 2**20


def open_regular(path: str | Path, *, what: str = "file") -> IO[bytes]:
    """A binary handle on ``path`` if it is a regular file; InputError (naming the path) otherwise.

    Opened with O_NONBLOCK and checked with fstat, so a FIFO swapped in after a
    check cannot block the open, and a device is refused before any read.
    """
    path = Path(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        hint = "the symlink points nowhere" if path.is_symlink() else "check the path"
        raise InputError(path, "", f"{what} not found", hint) from None
    except IsADirectoryError:
        raise InputError(
            path, "", f"expected a {what}, found a directory", "pass the file, not its directory"
        ) from None
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise InputError(
                path, "", f"expected a {what}, found a symlink loop", "fix or remove the symlink"
            ) from None
        raise InputError(
            path, "", f"cannot read {what}: {err.strerror}", "check the path and that the job can read it"
        ) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = "a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "a device or socket"
        article = "an" if what[:1].lower() in "aeiou" else "a"
        raise InputError(path, "", f"expected {article} {what}, found {kind}", "only regular files are read")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def read_capped(path: str | Path, *, max_bytes: int, what: str = "file") -> bytes:
    """The bytes of a regular file of at most ``max_bytes``; InputError when it is larger."""
    with open_regular(path, what=what) as fh:
        # Ask for what the file holds, not for the cap: read(cap + 1) allocates a 256 MiB buffer for every small
        # artifact, address space a container with strict overcommit may refuse. Then read on in bounded
        # chunks, in case the file grew after fstat (or is one whose size fstat does not know).
        ask = min(os.fstat(fh.fileno()).st_size, max_bytes) + 1
        data = fh.read(ask)
        while len(data) == ask <= max_bytes:  # a short read is the end of the file
            ask = len(data) + min(1 << 20, max_bytes + 1 - len(data))
            data += fh.read(ask - len(data))
    if len(data) > max_bytes:
        raise InputError(
            path, "", f"{what} is larger than {max_bytes // 2**20 or 1} MiB",
            f"check that the path names the {what} meant (one this large is not one); an artifact: rerun the job that "
            "wrote it",
        )  # fmt: skip
    return data


def check_yaml_size(root: yaml.Node | None, path: str | Path, *, limit: int | None = None) -> None:
    """Refuse a YAML document whose alias expansion exceeds ``limit`` nodes (a "billion laughs").

    PyYAML's composer shares aliased nodes, so counting with a memo is cheap
    even for a bomb; constructing, validating or copying it would not be.
    """
    limit = MAX_YAML_NODES if limit is None else limit
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(node: yaml.Node) -> int:
        key = id(node)
        if key in open_nodes:  # an alias to an enclosing node: the document contains itself
            raise InputError(path, f"{node.start_mark.line + 1}:{node.start_mark.column + 1}",
                             "recursive YAML alias", "an alias may not refer to a node that contains it")  # fmt: skip
        if key in sizes:
            return sizes[key]
        open_nodes.add(key)
        total = 1
        if isinstance(node, yaml.SequenceNode):
            total += sum(size(n) for n in node.value)
        elif isinstance(node, yaml.MappingNode):
            total += sum(size(k) + size(v) for k, v in node.value)
        open_nodes.discard(key)
        sizes[key] = min(total, limit + 1)
        return sizes[key]

    try:
        too_big = root is not None and size(root) > limit
    except RecursionError:
        raise InputError(path, "", "YAML nested too deeply", "flatten the document") from None
    if too_big:
        raise InputError(
            path,
            "",
            f"YAML aliases expand to more than {limit} nodes",
            "write the values out; anchors and aliases may only share small blocks",
        )


# How far a time a file claims may run ahead of the reading job's clock: runners' clocks differ by seconds.
CLOCK_SKEW = dt.timedelta(minutes=10)


def aware_utc(
    value: object, *, path: str | Path | None, where: str, hint: str = "", not_after: dt.datetime | None = None
) -> dt.datetime:
    """An ISO 8601 time with an offset, as aware UTC; InputError for a naive or malformed one.

    ``not_after`` (the reading job's clock): a time a file says of itself ("recorded at", "opened at", "last
    alerted at") is only believed up to then, give or take ``CLOCK_SKEW``. The file's author does not control
    the job's clock, and a time in the future decided "newest" or "not yet" for ever (docs/security.md,
    "Findings of the 2026-12-04 audit").
    """
    if not isinstance(value, str):
        raise InputError(path, where, f"expected an ISO 8601 time, got {type(value).__name__}", hint)
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        raise InputError(path, where, f"not an ISO 8601 time: {value[:40]!r}", hint) from None
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        raise InputError(path, where, f"time {value[:40]!r} has no UTC offset", hint)
    try:
        when = parsed.astimezone(dt.timezone.utc)
    except OverflowError:  # 9999-12-31T23:59-01:00 is past the last time Python holds
        raise InputError(path, where, f"time {value[:40]!r} is out of range", hint) from None
    if not_after is not None and when > not_after + CLOCK_SKEW:
        clock = not_after.isoformat(timespec="seconds")
        raise InputError(path, where, f"time {value[:40]!r} is later than this job's clock ({clock})", hint)
    return when
