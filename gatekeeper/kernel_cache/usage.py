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
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gatekeeper.contract import schemas
from gatekeeper.contract.stage_report import STAGE_SCHEMA, Metric, read_stage
from gatekeeper.core import files
from gatekeeper.core.errors import InputError
from gatekeeper.kernel_cache.integrity import QUARANTINE
from gatekeeper.kernel_cache.key import CACHE_VARIABLES

__all__ = [
    "SNAPSHOT",
    "CacheStats",
    "PruneResult",
    "add_to_stage_report",
    "begin",
    "collect_stats",
    "parse_size",
    "prune",
    "stage_metrics",
]

SNAPSHOT = ".gatekeeper-snapshot.json"
# Files of ours inside the root that are not cache entries.
_OWN = {SNAPSHOT}
# The breaker's state lives in the cache root so GitLab keeps it; it is not a
# cache entry and pruning must never drop it.
BREAKER_DIR = "breaker"


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


def _entries(root: Path) -> Iterator[Path]:
    if not root.is_dir():
        return
    for dirpath, dirnames, filenames in os.walk(root):
        rel = Path(dirpath).relative_to(root)
        if rel.parts[:1] in ((QUARANTINE,), (BREAKER_DIR,)):
            dirnames[:] = []
            continue
        for name in filenames:
            if rel == Path(".") and name in _OWN:
                continue
            yield Path(dirpath) / name


def _kind(root: Path, path: Path) -> str:
    rel = path.relative_to(root).as_posix()
    for sub in sorted(CACHE_VARIABLES.values(), key=len, reverse=True):
        if rel == sub or rel.startswith(sub + "/"):
            return sub
    return rel.split("/", 1)[0] if "/" in rel else "other"


def _atime_works(root: Path) -> bool:
    probe = root / ".gatekeeper-atime-probe"
    try:
        probe.write_bytes(b"x")
        st = probe.stat()
        os.utime(probe, ns=(st.st_mtime_ns - 10**9, st.st_mtime_ns))
        before = probe.stat().st_atime_ns
        probe.read_bytes()
        return probe.stat().st_atime_ns > before
    except OSError:
        return False
    finally:
        probe.unlink(missing_ok=True)


def begin(root: Path) -> dict[str, Any]:
    """Snapshot the cache at the start of a job (call before the compilers run)."""
    root.mkdir(parents=True, exist_ok=True)
    started = time.time_ns()
    known: dict[str, int] = {}
    for path in _entries(root):
        try:
            st = path.stat()
            os.utime(path, ns=(min(st.st_atime_ns, st.st_mtime_ns - 10**9), st.st_mtime_ns))
        except OSError:
            continue
        known[path.relative_to(root).as_posix()] = st.st_mtime_ns
    snap = {"started_ns": started, "atime": _atime_works(root), "files": known}
    files.write_json(root / SNAPSHOT, snap)
    return snap


def collect_stats(root: Path, corrupt: list[dict[str, Any]] | None = None) -> CacheStats:
    total_bytes = total_files = 0
    by_kind: dict[str, dict[str, int]] = {}
    snap_path = root / SNAPSHOT
    snap = files.read_json(snap_path, what="cache snapshot") if snap_path.is_file() else None
    used = created = 0
    for path in _entries(root):
        try:
            st = path.stat()
        except OSError:
            continue
        kind = by_kind.setdefault(_kind(root, path), {"bytes": 0, "files": 0})
        kind["bytes"] += st.st_size
        kind["files"] += 1
        total_bytes += st.st_size
        total_files += 1
        if snap is not None:
            rel = path.relative_to(root).as_posix()
            before = snap["files"].get(rel)
            if before is None or st.st_mtime_ns != before:
                created += 1
            elif st.st_atime_ns >= snap["started_ns"]:
                used += 1
    reason = None
    if snap is None:
        reason = "no snapshot: run 'gatekeeper cache stats --begin' at the start of the job"
    elif not snap.get("atime"):
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
    """Delete least-recently-used files (by the later of atime and mtime) until the cache fits."""
    entries = []
    for path in _entries(root):
        try:
            st = path.stat()
        except OSError:
            continue
        entries.append((max(st.st_atime_ns, st.st_mtime_ns), st.st_size, path))
    before = sum(size for _, size, _ in entries)
    total = before
    removed = removed_bytes = 0
    for _, size, path in sorted(entries, key=lambda e: (e[0], str(e[2]))):
        if total <= max_bytes:
            break
        try:
            path.unlink()
        except OSError:
            continue
        total -= size
        removed += 1
        removed_bytes += size
    # Drop directories the pruning emptied (deepest first); the root stays.
    for dirpath, _, _ in sorted(os.walk(root), key=lambda w: -len(Path(w[0]).parts)):
        if Path(dirpath) != root:
            with contextlib.suppress(OSError):  # not empty (or gone): keep it
                Path(dirpath).rmdir()
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
    if not stage_json.is_file():
        return f"{stage_json} not found (the stage wrote no report); cache metrics not added"
    report = read_stage(stage_json)
    merged = {**report.metrics, **stage_metrics(stats)}
    summary = {**report.summary, "kernel_cache": stats.to_dict()}
    # The file named, and only it (its JUnit twin has no metrics): not <dir>/<stage>.json, which
    # is another file when STAGE_JSON has another name.
    doc = replace(report, metrics=merged, summary=summary).to_dict()
    schemas.validate(STAGE_SCHEMA, doc, path=str(stage_json))
    files.write_json(stage_json, doc)
    return f"cache metrics added to {stage_json}"
