"""Messages that could not be sent wait in ``<spool>/pending/*.json`` for ``notify --resend``.

A spool file holds the payload and where it goes, never the credentials: the
webhook URL or token is read from the environment again when resending.

Concurrent resends (two jobs, or a retried job) send each message once: a
sender first *claims* a message by renaming it into ``<spool>/claimed/``
(rename is atomic, so exactly one process wins), sends it, and then deletes it
or puts it back. A claim left by a killed process is returned to pending after
``STALE_CLAIM_S``. A file that is not a valid entry is moved to
``<spool>/quarantine/`` so it never blocks the ones after it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gatekeeper.core import files
from gatekeeper.core.redact import redact

__all__ = [
    "SPOOL_SCHEMA",
    "STALE_CLAIM_S",
    "SpoolEntry",
    "claim",
    "pending",
    "quarantine",
    "release",
    "remove",
    "spool",
    "update",
]

SPOOL_SCHEMA = "gatekeeper.alert/v1"
STALE_CLAIM_S = 3600.0
MAX_ENTRY_BYTES = 4 * 1024 * 1024  # a Slack message is at most ~50 blocks of 3000 characters


@dataclass(frozen=True)
class SpoolEntry:
    path: Path
    kind: str  # slack | gitlab | gitlab_issue
    payload: dict[str, Any]
    attempts: int
    last_error: str


def spool(directory: str | Path, kind: str, payload: dict[str, Any], error: str, *, secrets: list[str]) -> Path:
    """Write one pending message atomically; the error text is redacted."""
    now = dt.datetime.now(dt.timezone.utc)
    body = json.dumps(payload, sort_keys=True)
    digest = hashlib.sha256(body.encode()).hexdigest()[:12]
    path = Path(directory) / "pending" / f"{now:%Y%m%dT%H%M%S}-{kind}-{digest}.json"
    doc = {
        "schema": SPOOL_SCHEMA,
        "kind": kind,
        "created_at": now.isoformat(timespec="seconds"),
        "attempts": 1,
        "last_error": redact(error, extra=secrets),
        "payload": json.loads(redact(body, extra=secrets)),
    }
    return files.write_json(path, doc)


def _payload_problem(kind: object, payload: object) -> str | None:
    """What is wrong with a payload for resend (None: it can be sent)."""
    if kind not in ("slack", "gitlab", "gitlab_issue"):
        return f"unknown kind {kind!r}"
    if not isinstance(payload, Mapping):
        return "payload is not an object"
    if kind == "gitlab_issue":
        from gatekeeper.notify.issue import payload_problem

        return payload_problem(payload)
    if kind == "slack":
        message = payload.get("message")
        if not isinstance(message, Mapping) or not isinstance(message.get("text", ""), str):
            return "slack payload has no message object"
        if not isinstance(message.get("blocks", []), list):
            return "slack message blocks is not a list"
        return None
    if not isinstance(payload.get("project"), (str, int)) or isinstance(payload.get("project"), bool):
        return "gitlab payload has no project"
    if payload.get("mr_iid") and not isinstance(payload.get("note"), str):
        return "gitlab payload has an MR but no note"
    if payload.get("sha") and (not isinstance(payload.get("sha"), str) or not isinstance(payload.get("status"), dict)):
        return "gitlab payload has a commit but no status"
    if isinstance(payload.get("status"), dict) and not isinstance(payload["status"].get("state"), str):
        return "gitlab status has no state"
    return None


def _read(path: Path) -> SpoolEntry:
    """One entry; ValueError naming the problem when the file is not a valid one."""
    if not path.is_file() or path.is_symlink():
        raise ValueError("not a regular file")
    if path.stat().st_size > MAX_ENTRY_BYTES:
        raise ValueError(f"larger than {MAX_ENTRY_BYTES} bytes")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, RecursionError, ValueError) as err:
        raise ValueError(f"not JSON ({type(err).__name__})") from None
    if not isinstance(doc, dict) or doc.get("schema") != SPOOL_SCHEMA:
        raise ValueError(f"not a {SPOOL_SCHEMA} entry")
    problem = _payload_problem(doc.get("kind"), doc.get("payload"))
    if problem:
        raise ValueError(problem)
    attempts = doc.get("attempts", 1)
    if not isinstance(attempts, int) or isinstance(attempts, bool):
        raise ValueError("attempts is not an integer")
    return SpoolEntry(path, doc["kind"], dict(doc["payload"]), attempts, str(doc.get("last_error", "")))


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
    doc = json.loads(entry.path.read_text(encoding="utf-8"))
    doc["attempts"] = entry.attempts + 1
    doc["last_error"] = redact(error, extra=secrets)
    files.write_json(entry.path, doc)


def release(entry: SpoolEntry, error: str, *, secrets: list[str]) -> None:
    """A claimed entry that still failed: record the attempt and put it back in pending/."""
    update(entry, error, secrets=secrets)
    os.rename(entry.path, entry.path.parent.parent / "pending" / entry.path.name)


def remove(entry: SpoolEntry) -> None:
    entry.path.unlink(missing_ok=True)
