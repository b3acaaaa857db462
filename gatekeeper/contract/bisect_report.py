"""bisect.json: the one reader and writer of a bisection's record (schema ``gatekeeper.bisect/v1``).

``gatekeeper bisect`` writes it after every finished measurement; ``--resume`` and
``gatekeeper notify issue`` read it back. The document stays a plain dict: its
shape is the schema (``schemas/bisect.v1.json``), and the helpers below answer
the few questions readers ask of it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gatekeeper.contract import schemas
from gatekeeper.contract.stage_report import Environment
from gatekeeper.core import files
from gatekeeper.core.errors import InputError

__all__ = ["BISECT_SCHEMA", "fingerprint", "read_bisect", "signature_key", "write_bisect"]

BISECT_SCHEMA = "gatekeeper.bisect/v1"


def read_bisect(path: str | Path) -> dict[str, Any]:
    """The strict reader: a JSON object of this schema version, schema-valid, indices inside the range."""
    doc = files.read_json(path, what="bisect.json")
    if not isinstance(doc, dict):
        raise InputError(path, "", "bisect.json must be a JSON object", "pass the bisect.json gatekeeper bisect wrote")
    schema = doc.get("schema")
    if isinstance(schema, str) and schema.startswith("gatekeeper.bisect/") and schema != BISECT_SCHEMA:
        raise InputError(path, "schema", f"written by a newer gatekeeper ({schema})", "upgrade gatekeeper")
    if schema != BISECT_SCHEMA:
        raise InputError(path, "schema", f"not a {BISECT_SCHEMA} document", "pass the bisect.json of gatekeeper bisect")
    schemas.validate(BISECT_SCHEMA, doc, path=str(path))
    _check_indices(doc, str(path))
    return doc


def write_bisect(path: str | Path, doc: Mapping[str, Any]) -> Path:
    """Validate, then write atomically: an interrupted run leaves the previous complete file."""
    schemas.validate(BISECT_SCHEMA, doc, path=str(path))
    _check_indices(doc, str(path))
    return files.write_json(path, doc)


def _check_indices(doc: Mapping[str, Any], path: str) -> None:
    candidates = doc["candidates"]
    n = len(candidates)
    for i, cand in enumerate(candidates):
        if cand["index"] != i:
            raise InputError(path, f"candidates[{i}].index", f"is {cand['index']}, expected {i}", "do not edit it")
        for j, d in enumerate(cand["decisions"]):
            if d["reference"] is not None and not 0 <= d["reference"] < n:
                raise InputError(
                    path,
                    f"candidates[{i}].decisions[{j}].reference",
                    "outside the range",
                    "this bisect.json was edited or truncated: rerun the bisect without --resume",
                )
    result = doc.get("result")
    if not result:
        return
    named = [result.get("first_bad"), result.get("last_good")]
    for c in result["culprits"]:
        named += [c["first_bad"], c["last_good"], *c["unresolved"]]
    bad = [x for x in named if x is not None and not 0 <= x < n]
    if bad:
        raise InputError(path, "result", f"names candidate {bad[0]} of {n}", "do not edit bisect.json by hand")


def fingerprint(environment: Mapping[str, Any] | None) -> str:
    """The device a regression was seen on: device kind, architecture and ROCm minor (``any`` when unknown).

    The same fields that make two stage results comparable (``history.baseline.comparability``),
    so a regression seen on gfx942 with ROCm 6.2 is not the same issue as one on gfx90a.
    """
    if not environment:
        return "any"
    env = Environment.from_dict({"torch_version": None, "python": "", "host": "", **dict(environment)})
    rocm = ".".join((env.rocm_version or "").split(".")[:2])
    parts = [env.device_kind, env.arch or "?"]
    if rocm:
        parts.append(f"rocm{rocm}")
    return "/".join(parts)


def signature_key(signature: Mapping[str, Any]) -> str:
    """A short stable id of a regression signature (metric, channel, fingerprint, culprit)."""
    text = "\x1f".join(str(signature.get(k) or "") for k in ("metric", "channel", "fingerprint", "culprit"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]
