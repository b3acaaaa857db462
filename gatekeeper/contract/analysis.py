"""analysis.json: the failure diagnosis that ``gatekeeper analyze --format json`` writes.

``Analysis`` is the typed view that readers (notify, the report) use, and
``read_analysis`` its one strict reader: a JSON object whose fields have the types
the schema ``gatekeeper.analysis/v1`` gives them. A missing optional field reads as
empty; a field of the wrong type, or a newer schema version, is an InputError (exit 2).
The writer is the analyzer's ``FailureDiagnosis.to_dict``; the schema is checked
against what it writes by the analyze tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gatekeeper.contract import schemas
from gatekeeper.core import files
from gatekeeper.core.errors import InputError

__all__ = ["ANALYSIS_SCHEMA", "Analysis", "AnalysisMatch", "read_analysis"]

ANALYSIS_SCHEMA = "gatekeeper.analysis/v1"


@dataclass(frozen=True)
class AnalysisMatch:
    line: int | None
    text: str
    rule: str


@dataclass(frozen=True)
class Analysis:
    category: str
    known_issue: str | None = None
    confidence: float = 0.0
    explanation: str = ""
    remediation: tuple[str, ...] = ()
    links: tuple[str, ...] = ()
    matches: tuple[AnalysisMatch, ...] = ()
    bundle: str | None = None
    source: str = ""  # the log it came from, when the analyzer said
    decided_by: str = ""  # artifacts | rule | model | none
    failing_check: Mapping[str, Any] | None = None  # the root failure the artifacts report (a check or a gate)
    blocking_gate: Mapping[str, Any] | None = None  # the gate it blocked

    @property
    def failing(self) -> str:
        """``stage/check: message`` (or ``gate NAME: reason``) of the root failure; empty when there is none."""
        f = self.failing_check
        if not f:
            return ""
        label = f"{f.get('stage')}/{f.get('name')}" if f.get("source") == "check" else f"gate {f.get('name')}"
        message = str(f.get("message") or "").strip()
        first = message.splitlines()[0][:300] if message else ""
        return f"{label}: {first}" if first else label

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> Analysis:
        """From a schema-valid document (``read_analysis`` validates first)."""
        return cls(
            category=doc["category"],
            known_issue=doc.get("known_issue") or None,
            confidence=float(doc.get("confidence") or 0.0),
            explanation=doc.get("explanation") or "",
            remediation=tuple(doc.get("remediation") or ()),
            links=tuple(doc.get("links") or ()),
            matches=tuple(
                AnalysisMatch(m.get("line"), m.get("text", ""), m.get("rule", "")) for m in doc.get("matches") or ()
            ),
            bundle=doc.get("bundle") or None,
            source=doc.get("source") or "",
            decided_by=doc.get("decided_by") or "",
            failing_check=doc.get("failing_check") or None,
            blocking_gate=doc.get("blocking_gate") or None,
        )

    def to_dict(self) -> dict[str, Any]:
        """The fields readers use, in the shape of analysis.json."""
        return {
            "schema": ANALYSIS_SCHEMA,
            "category": self.category,
            "known_issue": self.known_issue,
            "confidence": self.confidence,
            "explanation": self.explanation,
            "remediation": list(self.remediation),
            "links": list(self.links),
            "matches": [{"line": m.line, "text": m.text, "rule": m.rule} for m in self.matches],
            "bundle": self.bundle,
            "decided_by": self.decided_by,
            "failing_check": dict(self.failing_check) if self.failing_check else None,
            "blocking_gate": dict(self.blocking_gate) if self.blocking_gate else None,
            "failing": self.failing,
        }


def read_analysis(path: str | Path) -> Analysis:
    doc = files.read_json(path, what="failure analysis")
    hint = "pass the analysis.json that gatekeeper analyze --format json wrote"
    if not isinstance(doc, dict):
        raise InputError(path, "", "a failure analysis must be a JSON object", hint)
    schema = doc.get("schema")
    if schema is not None and schema != ANALYSIS_SCHEMA:
        newer = isinstance(schema, str) and schema.startswith("gatekeeper.analysis/")
        raise InputError(
            path, "schema", f"{'written by a newer gatekeeper' if newer else 'not a failure analysis'} ({schema!r})",
            "upgrade gatekeeper" if newer else hint,
        )  # fmt: skip
    schemas.validate(ANALYSIS_SCHEMA, doc, path=str(path))
    return Analysis.from_dict(doc)
