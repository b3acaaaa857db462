"""The versioned JSON Schemas gatekeeper reads and writes, and one validator for them."""

from __future__ import annotations

from typing import Any

from gatekeeper.core import schema

__all__ = ["SCHEMA_FILES", "load_schema", "validate"]

# schema id -> file in this package
SCHEMA_FILES = {
    "gatekeeper.stage/v1": "stage.v1.json",
    "gatekeeper.verdict/v1": "verdict.v1.json",
    "gatekeeper.gates/v1": "gates.v1.json",
    "gatekeeper.matrix/v1": "matrix.v1.json",
    "gatekeeper.known_issues/v1": "known_issues.v1.json",
    "gatekeeper.analysis/v1": "analysis.v1.json",
    "gatekeeper.bisect/v1": "bisect.v1.json",
    "gatekeeper.cache-snapshot/v1": "cache_snapshot.v1.json",
    "gatekeeper.bisect-nightly/v1": "bisect_nightly.v1.json",
    "gatekeeper.bisect-changes/v1": "bisect_changes.v1.json",
}


def load_schema(schema_id: str) -> dict[str, Any]:
    return schema.load(__package__, SCHEMA_FILES[schema_id])


def validate(schema_id: str, doc: Any, *, path: str, position=None) -> None:
    """Raise InputError for the first (best) schema error in ``doc`` (``core/schema.py``).

    ``position(key_path) -> "line:col"`` maps an error to its place in the file;
    without it the place is the JSON key path.
    """
    schema.validate(__package__, SCHEMA_FILES[schema_id], schema_id, doc, path=path, position=position)
