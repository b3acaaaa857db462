"""Validating a parsed document against a JSON Schema: the first (best) error as one InputError.

The schemas live beside the code that owns their format (``gatekeeper/contract/schemas`` for the files
gatekeeper's steps exchange, ``gatekeeper/machine/schemas`` for a doctor capture); each package loads its
own and validates through here, so every schema error reads the same: the file, the place, the problem
and the schema to look at.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from importlib import resources
from typing import Any

import jsonschema

from gatekeeper.core.errors import InputError
from gatekeeper.core.escape import CONTROL_CHARS, control_char

__all__ = ["control_problem", "load", "validate"]


@functools.cache
def load(package: str, name: str) -> dict[str, Any]:
    """The schema file ``name`` of ``package`` (read once)."""
    return json.loads(resources.files(package).joinpath(name).read_text(encoding="utf-8"))


@functools.cache
def _validator(package: str, name: str) -> jsonschema.protocols.Validator:
    schema = load(package, name)
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema)


def validate(
    package: str,
    name: str,
    schema_id: str,
    doc: Any,
    *,
    path: str,
    position: Callable[[Sequence[str | int]], str] | None = None,
) -> None:
    """Raise InputError for the first (best) error of ``doc`` against schema file ``name`` of ``package``.

    ``position(key_path) -> "line:col"`` maps an error to its place in the file; without it the place is the
    JSON key path.
    """
    errors = sorted(
        _validator(package, name).iter_errors(doc), key=lambda e: (len(e.absolute_path), str(e.absolute_path))
    )
    if not errors:
        return
    err = _telling(jsonschema.exceptions.best_match(errors))
    key_path = list(err.absolute_path)
    dotted = _dotted(key_path) or "(top level)"
    where = position(key_path) if position else dotted
    problem = _no_control(err) or (err.message if len(err.message) < 200 else err.message[:197] + "...")
    raise InputError(path, where, f"{dotted}: {problem}", f"see the {schema_id} schema")


def _telling(err: jsonschema.ValidationError) -> jsonschema.ValidationError:
    """For "is not valid under any of the given schemas" (``anyOf``/``oneOf``: a value or a list of values), the
    alternative that says what is allowed: an ``enum``'s "'merge-request' is not one of ['tag', ...]", else one
    that is not only about the type."""
    while err.validator in ("anyOf", "oneOf") and err.context:
        same = [e for e in err.context if list(e.absolute_path) == list(err.absolute_path)]
        pick = next((e for e in same if e.validator == "enum"), None) or next(
            (e for e in same if e.validator != "type"), None
        )
        if pick is None:
            break
        err = pick
    return err


def control_problem(text: object, *, key: bool = False) -> str | None:
    """Why ``text`` (a value, or a key with ``key``) may not stand in a field that holds one name or version,
    or None: it contains a control character (``escape.CONTROL_CHARS``). The schemas' ``$defs.no_control``
    and the readers of rows without a schema (``contract.stage_report.environment_problem``) say it alike."""
    found = control_char(text)
    if found is None:
        return None
    shown = repr(text) if len(repr(text)) <= 60 else repr(text)[:57] + "..."
    return (
        f"{'a key' if key else 'the value'} {shown} contains a control character ({found}); a name or version "
        "holds no tab, newline, escape or bidi character (corrupt or forged input)"
    )


def _no_control(err: jsonschema.ValidationError) -> str | None:
    """The problem in plain words when ``err`` is the schemas' rule against control characters: a ``not``
    of ``{"type": "string", "pattern": CONTROL_CHARS}`` (``$defs.no_control``), never the pattern itself."""
    value = err.validator_value
    if err.validator != "not" or not isinstance(value, dict) or value.get("pattern") != CONTROL_CHARS:
        return None
    return control_problem(err.instance, key="propertyNames" in err.schema_path)


def _dotted(key_path: list[str | int]) -> str:
    out = ""
    for key in key_path:
        out += f"[{key}]" if isinstance(key, int) else (f".{key}" if out else str(key))
    return out
