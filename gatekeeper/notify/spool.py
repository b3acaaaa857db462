"""Messages that could not be sent wait in ``<spool>/pending/*.json`` for ``notify --resend``.

A spool file holds the payload and where it goes, never the credentials: the
webhook URL or token is read from the environment again when resending.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gatekeeper.core import files
from gatekeeper.core.redact import redact

__all__ = ["SPOOL_SCHEMA", "SpoolEntry", "pending", "remove", "spool", "update"]

SPOOL_SCHEMA = "gatekeeper.alert/v1"


@dataclass(frozen=True)
class SpoolEntry:
    path: Path
    kind: str  # slack | gitlab
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


def pending(directory: str | Path) -> tuple[list[SpoolEntry], list[str]]:
    """Pending entries, oldest first, and one warning line per unreadable file (left in place)."""
    entries: list[SpoolEntry] = []
    problems: list[str] = []
    for path in sorted((Path(directory) / "pending").glob("*.json")):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            if doc.get("schema") != SPOOL_SCHEMA or doc.get("kind") not in ("slack", "gitlab"):
                raise ValueError(f"not a {SPOOL_SCHEMA} entry")
            entries.append(SpoolEntry(path, doc["kind"], doc["payload"], int(doc["attempts"]), doc["last_error"]))
        except (OSError, ValueError, KeyError, TypeError) as err:
            problems.append(f"{path}: skipped: {err}")
    return entries, problems


def update(entry: SpoolEntry, error: str, *, secrets: list[str]) -> None:
    doc = json.loads(entry.path.read_text(encoding="utf-8"))
    doc["attempts"] = entry.attempts + 1
    doc["last_error"] = redact(error, extra=secrets)
    files.write_json(entry.path, doc)


def remove(entry: SpoolEntry) -> None:
    entry.path.unlink(missing_ok=True)
