"""The versioned JSON Schemas gatekeeper reads and writes, and one validator for them."""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

import jsonschema

from gatekeeper.core.errors import InputError

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
}


@functools.cache
def load_schema(schema_id: str) -> dict[str, Any]:
    name = SCHEMA_FILES[schema_id]
    return json.loads(resources.files(__package__).joinpath(name).read_text(encoding="utf-8"))


@functools.cache
def _validator(schema_id: str) -> jsonschema.protocols.Validator:
    schema = load_schema(schema_id)
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema)


def validate(schema_id: str, doc: Any, *, path: str, position=None) -> None:
    """Raise InputError for the first (best) schema error in ``doc``.

    ``position(key_path) -> "line:col"`` maps an error to its place in the file;
    without it the place is the JSON key path.
    """
    errors = sorted(_validator(schema_id).iter_errors(doc), key=lambda e: (len(e.absolute_path), str(e.absolute_path)))
    if not errors:
        return
    err = jsonschema.exceptions.best_match(errors)
    key_path = list(err.absolute_path)
    dotted = _dotted(key_path) or "(top level)"
    where = position(key_path) if position else dotted
    problem = err.message if len(err.message) < 200 else err.message[:197] + "..."
    raise InputError(path, where, f"{dotted}: {problem}", f"see the {schema_id} schema")


def _dotted(key_path: list[str | int]) -> str:
    out = ""
    for key in key_path:
        out += f"[{key}]" if isinstance(key, int) else (f".{key}" if out else str(key))
    return out
