"""What the kernel cache holds and what a job did with it: sizes, file counts,
entries used vs created, and least-recently-used pruning.

"Used" is read from access times. Linux's default ``relatime`` updates a
file's atime on read only when it is not newer than its mtime, so ``begin``
sets every entry's atime just before its mtime; a read during the job then
moves the atime past the snapshot time. Where the filesystem does not record
access times at all (``noatime``), a probe notices and "used" is reported as
unknown rather than zero.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gatekeeper.contract import schemas
from gatekeeper.contract.stage_report import STAGE_SCHEMA, Metric, read_stage
from gatekeeper.core import files
from gatekeeper.core.errors import InputError
from gatekeeper.kernel_cache.integrity import BREAKER_DIR, QUARANTINE
from gatekeeper.kernel_cache.key import CACHE_VARIABLES
from gatekeeper.kernel_cache.tree import Item, kind_of, shown, walk

__all__ = [
    "SNAPSHOT",
    "SNAPSHOT_FIX",
    "SNAPSHOT_SCHEMA",
    "CacheStats",
    "PruneResult",
    "add_to_stage_report",
    "begin",
    "collect_stats",
    "parse_size",
    "prune",
    "read_snapshot",
    "stage_metrics",
]

SNAPSHOT = ".gatekeeper-snapshot.json"
SNAPSHOT_SCHEMA = "gatekeeper.cache-snapshot/v1"
# Files of ours inside the root that are not cache entries.
_OWN = frozenset({SNAPSHOT})
# What the snapshot's errors tell the user: begin writes a new one over whatever is there.
SNAPSHOT_FIX = (
    "run 'gatekeeper cache stats --begin' at the start of the job (it writes a new snapshot) or delete the file"
)


@dataclass(frozen=True)
class CacheStats:
    root: str
    total_bytes: int
    total_files: int
    by_kind: dict[str, dict[str, int]]
    used: int | None  # None: unknown (no snapshot, or no access times)
    created: int | None
    used_unknown_reason: str | None = None
    corrupt: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "gatekeeper.cache-stats/v1",
            "root": self.root,
            "total_bytes": self.total_bytes,
            "total_files": self.total_files,
            "by_kind": self.by_kind,
            "entries_used": self.used,
            "entries_created": self.created,
            "used_unknown_reason": self.used_unknown_reason,
            "corrupt": self.corrupt,
        }


@dataclass(frozen=True)
class PruneResult:
    removed_files: int
    removed_bytes: int
    before_bytes: int
    after_bytes: int


def _entries(root: Path) -> Iterator[Item]:
    """The cache entries: regular files (by lstat), not in the quarantine or the breaker's state, not ours.
    A link, FIFO, socket or device is no entry (the integrity check moves it aside); nothing is followed."""
    if not root.is_dir():
        return
    for item in walk(root, skip=_OWN | {QUARANTINE, BREAKER_DIR}):
        if item.is_regular:
            yield item


def _inode(item: Item) -> tuple[int, int]:
    return item.st.st_dev, item.st.st_ino


def _links_inside(entries: list[Item]) -> dict[tuple[int, int], int]:
    """How many of the cache's entries name each file: hard links are one file's bytes under several names."""
    links: dict[tuple[int, int], int] = {}
    for item in entries:
        links[_inode(item)] = links.get(_inode(item), 0) + 1
    return links


def _kind(rel: str) -> str:
    rel = shown(rel)  # a directory's name (any job chose it) is a key of the stats and of a stage report
    for sub in sorted(CACHE_VARIABLES.values(), key=len, reverse=True):
        if rel == sub or rel.startswith(sub + "/"):
            return sub
    return rel.split("/", 1)[0] if "/" in rel else "other"


def _atime_works(root: Path) -> bool:
    # mkstemp: a new file (O_EXCL), so a link planted under a fixed probe name cannot be written through.
    fd, name = tempfile.mkstemp(prefix=".gatekeeper-atime-probe-", dir=root)
    probe = Path(name)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(b"x")
        st = probe.lstat()
        os.utime(probe, ns=(st.st_mtime_ns - 10**9, st.st_mtime_ns), follow_symlinks=False)
        before = probe.lstat().st_atime_ns
        with open(probe, "rb") as fh:  # our own new file
            fh.read()
        return probe.lstat().st_atime_ns > before
    except OSError:
        return False
    finally:
        probe.unlink(missing_ok=True)


def begin(root: Path) -> dict[str, Any]:
    """Snapshot the cache at the start of a job (call before the compilers run, after ``check_and_quarantine``
    with ``own=(SNAPSHOT,)``, which moves aside anything under the snapshot's name that is not a regular file).
    Whatever snapshot was there is replaced, unread."""
    root.mkdir(parents=True, exist_ok=True)
    path = root / SNAPSHOT
    with contextlib.suppress(FileNotFoundError):
        mode = path.lstat().st_mode
        if not stat.S_ISREG(mode):  # os.replace would put the new one inside a directory, or fail
            raise InputError(path, "", f"{kind_of(mode)} where the cache snapshot belongs", "delete it")
    started = time.time_ns()
    known: dict[str, int] = {}
    entries = list(_entries(root))
    links = _links_inside(entries)
    for item in entries:
        st = item.st
        if st.st_nlink > links[_inode(item)]:
            # A hard link to a file outside the cache: its times are that file's too, so they are left alone.
            # Known by its mtime, it is never counted as created; a read of it may go unseen as "used".
            known[item.rel] = st.st_mtime_ns
            continue
        try:
            # follow_symlinks=False: if the entry was swapped for a link since the walk, the link is timed
            os.utime(item.path, ns=(min(st.st_atime_ns, st.st_mtime_ns - 10**9), st.st_mtime_ns), follow_symlinks=False)
        except OSError:
            continue
        known[item.rel] = st.st_mtime_ns
    snap = {"schema": SNAPSHOT_SCHEMA, "started_ns": started, "atime": _atime_works(root), "files": known}
    files.write_json(path, snap)
    return snap


def read_snapshot(path: Path) -> dict[str, Any] | None:
    """The snapshot ``begin`` wrote, or None when there is none. The cache root is written by every job with
    the cache: a snapshot that is not a regular file, not JSON, or not a gatekeeper.cache-snapshot/v1
    document is bad input (InputError naming the file, the place and SNAPSHOT_FIX)."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(mode):
        raise InputError(
            path, "", f"{kind_of(mode)} where the cache snapshot belongs (nothing in the cache is followed)",
            SNAPSHOT_FIX,
        )  # fmt: skip
    try:
        doc = files.read_json(path, what="cache snapshot")
        if not isinstance(doc, dict):
            raise InputError(path, "", "a cache snapshot must be a JSON object", SNAPSHOT_FIX)
        schema = doc.get("schema")  # none: written by a gatekeeper before the schema had a name
        if schema is not None and schema != SNAPSHOT_SCHEMA:
            newer = isinstance(schema, str) and schema.startswith("gatekeeper.cache-snapshot/")
            what = "written by a newer gatekeeper" if newer else "not a cache snapshot"
            raise InputError(path, "schema", f"{what} ({str(schema)[:40]!r})", SNAPSHOT_FIX)
        schemas.validate(SNAPSHOT_SCHEMA, doc, path=str(path))
    except InputError as err:  # one fix for every way the snapshot is bad: begin writes a new one
        raise InputError(err.path, err.where, err.problem, SNAPSHOT_FIX) from None
    return doc


def collect_stats(root: Path, corrupt: list[dict[str, Any]] | None = None) -> CacheStats:
    total_bytes = total_files = 0
    by_kind: dict[str, dict[str, int]] = {}
    snap = read_snapshot(root / SNAPSHOT)
    used = created = 0
    counted: set[tuple[int, int]] = set()  # a file's bytes count once, whatever the names it has in the cache
    for item in _entries(root):
        st = item.st
        size = 0 if _inode(item) in counted else st.st_size
        counted.add(_inode(item))
        kind = by_kind.setdefault(_kind(item.rel), {"bytes": 0, "files": 0})
        kind["bytes"] += size
        kind["files"] += 1
        total_bytes += size
        total_files += 1
        if snap is not None:
            before = snap["files"].get(item.rel)
            if before is None or st.st_mtime_ns != before:
                created += 1
            elif st.st_atime_ns >= snap["started_ns"]:
                used += 1
    reason = None
    if snap is None:
        reason = "no snapshot: run 'gatekeeper cache stats --begin' at the start of the job"
    elif not snap["atime"]:
        reason = "the filesystem does not record access times (noatime)"
    return CacheStats(
        root=str(root),
        total_bytes=total_bytes,
        total_files=total_files,
        by_kind=dict(sorted(by_kind.items())),
        used=None if reason else used,
        created=None if snap is None else created,
        used_unknown_reason=reason,
        corrupt=list(corrupt or []),
    )


def prune(root: Path, max_bytes: int) -> PruneResult:
    """Delete least-recently-used files (by the later of atime and mtime) until the cache fits.

    Only regular files are deleted (unlink never follows a link); the times and sizes are the files' own. A file
    with several names in the cache (hard links) counts its bytes once, freed when its last name is deleted."""
    items = list(_entries(root))
    links = _links_inside(items)
    entries = [(max(i.st.st_atime_ns, i.st.st_mtime_ns), i.st.st_size, i.path, _inode(i)) for i in items]
    before = sum(size for _, size, _, _ in {e[3]: e for e in entries}.values())
    total = before
    removed = removed_bytes = 0
    for _, size, path, inode in sorted(entries, key=lambda e: (e[0], str(e[2]))):
        if total <= max_bytes:
            break
        try:
            path.unlink()
        except OSError:
            continue
        removed += 1
        links[inode] -= 1
        if links[inode] == 0:
            total -= size
            removed_bytes += size
    # Drop directories the pruning emptied (deepest first); the root, the quarantine and the breaker's stay.
    dirs = [i.path for i in walk(root, skip=_OWN | {QUARANTINE, BREAKER_DIR}) if i.is_dir]
    for path in sorted(dirs, key=lambda p: -len(p.parts)):
        with contextlib.suppress(OSError):  # not empty (or gone): keep it
            path.rmdir()
    return PruneResult(removed, removed_bytes, before, total)


_SIZE_UNITS = {"": 1, "B": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def parse_size(text: str) -> int:
    """'500M', '2G', '1.5GiB', '1048576' -> bytes (binary units)."""
    cleaned = text.strip().upper().removesuffix("IB").removesuffix("B")
    num, unit = (cleaned[:-1], cleaned[-1]) if cleaned and cleaned[-1] in "KMGT" else (cleaned, "")
    try:
        value = float(num)
    except ValueError:
        raise InputError(None, "--max-size", f"not a size: {text!r}", "use e.g. 500M, 2G or bytes") from None
    if value < 0:
        raise InputError(None, "--max-size", f"must not be negative: {text!r}", "use e.g. 500M")
    return int(value * _SIZE_UNITS[unit])


def stage_metrics(stats: CacheStats) -> dict[str, Metric]:
    metrics = {
        "kernel_cache_bytes": Metric.of(stats.total_bytes, "bytes", "none", description="kernel cache size at job end"),
        "kernel_cache_files": Metric.of(stats.total_files, "files", "none"),
        "kernel_cache_corrupt_entries": Metric.of(len(stats.corrupt), "files", "lower"),
    }
    if stats.used is not None:
        metrics["kernel_cache_entries_used"] = Metric.of(
            stats.used, "files", "higher", description="cache entries read by this job"
        )
    if stats.created is not None:
        metrics["kernel_cache_entries_created"] = Metric.of(
            stats.created, "files", "lower", description="cache entries written by this job"
        )
    return metrics


def add_to_stage_report(stage_json: Path, stats: CacheStats) -> str:
    """Add the kernel_cache_* metrics and the stats summary to a stage report; what was done, in words."""
    if not stage_json.exists() and not stage_json.is_symlink():
        return f"{stage_json} not found (the stage wrote no report); cache metrics not added"
    report = read_stage(stage_json)  # anything else under the name (a FIFO, a directory, a link to nothing): exit 2
    merged = {**report.metrics, **stage_metrics(stats)}
    summary = {**report.summary, "kernel_cache": stats.to_dict()}
    # The file named, and only it (its JUnit twin has no metrics): not <dir>/<stage>.json, which
    # is another file when STAGE_JSON has another name.
    doc = replace(report, metrics=merged, summary=summary).to_dict()
    schemas.validate(STAGE_SCHEMA, doc, path=str(stage_json))
    files.write_json(stage_json, doc)
    return f"cache metrics added to {stage_json}"
