"""The JSON Schemas of a doctor capture's JSON files (``doctor --capture`` writes them, ``doctor --from`` reads
them back through ``machine/snapshot.py``), validated by ``core/schema.py`` as the contract's schemas are."""

from __future__ import annotations

from typing import Any

from gatekeeper.core import schema

__all__ = ["SCHEMA_FILES", "validate"]

SCHEMA_FILES = {
    "gatekeeper.capture-tools/v1": "capture_tools.v1.json",
    "gatekeeper.capture-fs/v1": "capture_fs.v1.json",
    "gatekeeper.capture-torch/v1": "capture_torch.v1.json",
}


def validate(schema_id: str, doc: Any, *, path: str) -> None:
    schema.validate("gatekeeper.machine.schemas", SCHEMA_FILES[schema_id], schema_id, doc, path=path)
