"""Messages that could not be sent wait in ``<spool>/pending/*.json`` for ``notify --resend``.

An entry holds what to send as *data*, never rendered text: the verdict and the analysis as they were
read, the pipeline context and links of the job that spooled it, and its target (project, merge request,
commit, pipeline; the Slack channel). ``--resend`` validates the data again, renders it again through the
escaping layer, and sends it only to the resending job's own project (and merge request, in one).

The spool sits under the artifacts directory, where any job of the pipeline can write, including the stage
jobs that run the merge request's code. So every entry is signed: an HMAC-SHA256 over its schema, kind,
creation time and data, keyed with ``GATEKEEPER_SPOOL_KEY`` (a protected, masked CI variable). An entry whose
signature does not verify is quarantined. Fail closed: without the key, notify still spools (unsigned, and
says so) and ``--resend`` sends nothing at all; an unsigned entry is never sent.

A spool file holds no credentials: the webhook URL or token is read from the environment again when
resending. Concurrent resends (two jobs, or a retried job) send each message once: a sender first
*claims* a message by renaming it into ``<spool>/claimed/`` (rename is atomic, so exactly one process
wins), sends it, and then deletes it or puts it back. A claim left by a killed process is returned to
pending after ``STALE_CLAIM_S``. A file that is not a valid entry is moved to ``<spool>/quarantine/`` so
it never blocks the ones after it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import hmac
import json
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gatekeeper.core import files
from gatekeeper.core.errors import InputError
from gatekeeper.core.redact import redact, redact_obj

__all__ = [
    "KEY_VARIABLE",
    "SPOOL_SCHEMA",
    "STALE_CLAIM_S",
    "SpoolEntry",
    "claim",
    "pending",
    "quarantine",
    "release",
    "remove",
    "signature_problem",
    "spool",
    "update",
]

SPOOL_SCHEMA = "gatekeeper.alert/v2"
KEY_VARIABLE = "GATEKEEPER_SPOOL_KEY"
STALE_CLAIM_S = 3600.0
MAX_ENTRY_BYTES = 16 * 1024 * 1024  # a verdict of a few hundred gates and its analysis fit many times over
_MAC = re.compile(r"[0-9a-f]{64}")
KINDS = ("slack", "gitlab", "gitlab_issue")  # gitlab_issue: a regression issue's data (notify/issue.py)


@dataclass(frozen=True)
class SpoolEntry:
    path: Path
    kind: str  # slack | gitlab | gitlab_issue
    data: dict[str, Any]  # target, verdict, analysis, context, links, ... (see notify.resend)
    attempts: int
    last_error: str
    created_at: str
    mac: str | None  # None: spooled without a key, never sent


def _signed_bytes(kind: str, created_at: str, data: Any) -> bytes:
    body = {"schema": SPOOL_SCHEMA, "kind": kind, "created_at": created_at, "data": data}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode()


def _mac(key: str, kind: str, created_at: str, data: Any) -> str:
    return hmac.new(key.encode("utf-8"), _signed_bytes(kind, created_at, data), hashlib.sha256).hexdigest()


def spool(
    directory: str | Path, kind: str, data: Mapping[str, Any], error: str, *, key: str | None, secrets: list[str]
) -> tuple[Path, bool]:
    """Write one pending message atomically, signed with ``key`` when there is one; (its path, signed?).

    Everything in it is redacted first (the configured ``secrets`` and every shape the redactor knows), and the
    signature is over exactly what is written."""
    now = dt.datetime.now(dt.timezone.utc)
    created_at = now.isoformat(timespec="seconds")
    body = json.dumps(data, sort_keys=True, allow_nan=False)
    clean = redact_obj(json.loads(redact(body, extra=secrets)))
    digest = hashlib.sha256(body.encode()).hexdigest()[:12]
    path = Path(directory) / "pending" / f"{now:%Y%m%dT%H%M%S}-{kind}-{digest}.json"
    doc = {
        "schema": SPOOL_SCHEMA,
        "kind": kind,
        "created_at": created_at,
        "attempts": 1,
        "last_error": redact(error, extra=secrets),
        "data": clean,
        "hmac": _mac(key, kind, created_at, clean) if key else None,
    }
    return _write(path, doc), bool(key)


def _write(path: Path, doc: Mapping[str, Any]) -> Path:
    # Already redacted string by string above: written as it is, so the signature still matches.
    return files.atomic_write(path, json.dumps(doc, indent=2, allow_nan=False) + "\n", redacted=True)


def signature_problem(entry: SpoolEntry, key: str) -> str | None:
    """Why ``entry`` cannot be trusted with ``key`` (None: its signature verifies)."""
    if entry.mac is None:
        return f"unsigned (spooled without {KEY_VARIABLE}): never sent"
    try:
        expected = _mac(key, entry.kind, entry.created_at, entry.data)
    except ValueError:  # NaN or an infinity: nothing notify wrote
        return "data is not canonical JSON"
    if not hmac.compare_digest(expected, entry.mac):
        return f"signature does not match (not written by gatekeeper notify with this {KEY_VARIABLE}, or changed since)"
    return None


def _read(path: Path) -> SpoolEntry:
    """One entry's structure (not yet its signature); ValueError naming the problem when it is not a valid one."""
    if not path.is_file() or path.is_symlink():
        raise ValueError("not a regular file")
    if path.stat().st_size > MAX_ENTRY_BYTES:
        raise ValueError(f"larger than {MAX_ENTRY_BYTES} bytes")
    try:  # bounded again by the read: the entry may have grown since the stat
        doc = files.read_json(path, what="spool entry", max_bytes=MAX_ENTRY_BYTES)
    except (InputError, ValueError, OSError) as err:  # the entry is bad, not the run
        raise ValueError(f"not JSON ({type(err).__name__})") from None
    if not isinstance(doc, dict):
        raise ValueError(f"not a {SPOOL_SCHEMA} entry")
    if doc.get("schema") == "gatekeeper.alert/v1":
        raise ValueError("an entry of an older gatekeeper (rendered text, unsigned): never sent")
    if doc.get("schema") != SPOOL_SCHEMA:
        raise ValueError(f"not a {SPOOL_SCHEMA} entry")
    if doc.get("kind") not in KINDS:
        raise ValueError(f"unknown kind {doc.get('kind')!r}")
    if not isinstance(doc.get("data"), dict):
        raise ValueError("data is not an object")
    if not isinstance(doc.get("created_at"), str):
        raise ValueError("created_at is not a string")
    mac = doc.get("hmac")
    if mac is not None and not (isinstance(mac, str) and _MAC.fullmatch(mac)):
        raise ValueError("hmac is not a hex SHA-256 digest")
    attempts = doc.get("attempts", 1)
    if not isinstance(attempts, int) or isinstance(attempts, bool):
        raise ValueError("attempts is not an integer")
    return SpoolEntry(
        path, doc["kind"], doc["data"], attempts, str(doc.get("last_error", "")), doc["created_at"], mac
    )  # fmt: skip


def _return_stale_claims(root: Path) -> None:
    claimed = root / "claimed"
    if not claimed.is_dir():
        return
    now = time.time()
    for path in claimed.glob("*.json"):
        with contextlib.suppress(OSError):  # another process may return it first
            if now - path.stat().st_mtime > STALE_CLAIM_S:
                os.rename(path, root / "pending" / path.name)


def pending(directory: str | Path) -> tuple[list[SpoolEntry], list[str]]:
    """Pending entries, oldest first, and one line per invalid file (moved to quarantine/)."""
    root = Path(directory)
    _return_stale_claims(root)
    entries: list[SpoolEntry] = []
    problems: list[str] = []
    for path in sorted((root / "pending").glob("*.json")):
        try:
            entries.append(_read(path))
        except FileNotFoundError:
            continue  # claimed or sent by another process meanwhile
        except (OSError, ValueError) as err:
            problems.append(quarantine(path, str(err)))
    return entries, problems


def quarantine(path: Path, why: str) -> str:
    """Move a bad entry aside (kept for a human, never retried); the line to log."""
    target = path.parent.parent / "quarantine" / path.name
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        os.rename(path, target)
    except FileNotFoundError:
        return f"{path}: gone before it could be quarantined ({why})"
    except OSError as err:
        return f"{path}: skipped ({why}); could not quarantine it: {err.strerror}"
    return f"{path.name}: quarantined to {target.parent} ({why})"


def claim(entry: SpoolEntry) -> SpoolEntry | None:
    """Take ``entry`` for this process (atomic rename into claimed/); None when another process has it."""
    target = entry.path.parent.parent / "claimed" / entry.path.name
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.rename(entry.path, target)
    except FileNotFoundError:
        return None
    os.utime(target)  # the claim's age starts now
    try:
        return _read(target)  # re-read: it may have been updated since it was listed
    except (OSError, ValueError) as err:
        quarantine(target, str(err))
        return None


def update(entry: SpoolEntry, error: str, *, secrets: list[str]) -> None:
    """Count another attempt (the signature does not cover attempts and the last error)."""
    doc = {
        "schema": SPOOL_SCHEMA,
        "kind": entry.kind,
        "created_at": entry.created_at,
        "attempts": entry.attempts + 1,
        "last_error": redact(error, extra=secrets),
        "data": entry.data,
        "hmac": entry.mac,
    }
    _write(entry.path, doc)


def release(entry: SpoolEntry, error: str, *, secrets: list[str]) -> None:
    """A claimed entry that still failed: record the attempt and put it back in pending/."""
    update(entry, error, secrets=secrets)
    os.rename(entry.path, entry.path.parent.parent / "pending" / entry.path.name)


def remove(entry: SpoolEntry) -> None:
    entry.path.unlink(missing_ok=True)
