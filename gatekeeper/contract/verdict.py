"""Verdict and GateResult: what the gatekeeper decided, and why, as data.

Rendering to markdown, JUnit and metrics.txt lives in ``gatekeeper.evaluate.outputs``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gatekeeper.contract import schemas
from gatekeeper.core import files
from gatekeeper.core.errors import InputError
from gatekeeper.core.exitcodes import ExitCode

__all__ = ["VERDICT_SCHEMA", "GateResult", "Outcome", "Verdict", "WaivedCheck", "read_verdict", "write_verdict"]

VERDICT_SCHEMA = "gatekeeper.verdict/v1"


class Outcome(str, enum.Enum):
    PASS = "pass"  # noqa: S105 - an outcome, not a password  # nosec B105
    WARN = "warn"
    FAIL = "fail"
    INCONCLUSIVE = "inconclusive"  # not enough valid data to decide
    WAIVED = "waived"
    SKIPPED = "skipped"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class GateResult:
    name: str
    outcome: Outcome
    reason: str
    metric: str
    severity: str = "blocking"
    mode: str = "enforce"
    value: float | None = None
    unit: str = ""
    rule: str = ""
    warn_rule: str | None = None
    baseline_value: float | None = None
    change: float | None = None  # relative: value / baseline - 1
    waiver: Mapping[str, Any] | None = None
    comparison: Mapping[str, Any] | None = None  # the statistical judge's result, when one ran
    description: str = ""

    @property
    def blocking(self) -> bool:
        return self.outcome is Outcome.FAIL and self.severity == "blocking" and self.mode == "enforce"

    @property
    def warns(self) -> bool:
        """Counts towards "passed with warnings"."""
        if self.mode == "shadow" or self.blocking:
            return False
        return self.outcome in (Outcome.WARN, Outcome.INCONCLUSIVE, Outcome.FAIL)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["outcome"] = self.outcome.value
        out["blocking"] = self.blocking
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GateResult:
        kwargs = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        kwargs["outcome"] = Outcome(d["outcome"])
        return cls(**kwargs)


@dataclass(frozen=True)
class WaivedCheck:
    stage: str
    check: str
    status: str
    message: str
    waiver: Mapping[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Verdict:
    result: str  # pass | warn | blocked
    summary: str
    channel: str
    gates: tuple[GateResult, ...]
    context: Mapping[str, Any] = field(default_factory=dict)
    environment: Mapping[str, Any] = field(default_factory=dict)
    stages: Mapping[str, str] = field(default_factory=dict)  # stage -> status
    waived_checks: tuple[WaivedCheck, ...] = ()
    expired_waivers: tuple[Mapping[str, Any], ...] = ()
    generated_at: str = ""
    gates_file: str = ""
    baselines: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # stage -> the run it was compared with
    warnings: tuple[str, ...] = ()  # integrity warnings (weakened gates, skipped baseline records...)
    provenance: Mapping[str, Any] = field(default_factory=dict)  # version, gates sha256, artifacts sha256
    anchors: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # stage -> the anchor run (compare: anchor)

    @property
    def gpu_verified(self) -> bool:
        """False when the stages ran on a CPU: whatever the result, it says nothing about a GPU."""
        return self.environment.get("device_kind") in ("rocm", "cuda")

    @property
    def exit_code(self) -> ExitCode:
        return {"pass": ExitCode.PASS, "warn": ExitCode.WARN, "blocked": ExitCode.BLOCKED}[self.result]

    @property
    def blocking_gates(self) -> tuple[GateResult, ...]:
        return tuple(g for g in self.gates if g.blocking)

    @property
    def warning_gates(self) -> tuple[GateResult, ...]:
        return tuple(g for g in self.gates if g.warns)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": VERDICT_SCHEMA,
            "result": self.result,
            "exit_code": int(self.exit_code),
            "summary": self.summary,
            "channel": self.channel,
            "generated_at": self.generated_at,
            "gates_file": self.gates_file,
            "context": dict(self.context),
            "environment": dict(self.environment),
            "stages": dict(self.stages),
            "gates": [g.to_dict() for g in self.gates],
            "waived_checks": [w.to_dict() for w in self.waived_checks],
            "expired_waivers": [dict(w) for w in self.expired_waivers],
            "gpu_verified": self.gpu_verified,
            "baselines": {k: dict(v) for k, v in self.baselines.items()},
            "warnings": list(self.warnings),
            "provenance": dict(self.provenance),
            **({"anchors": {k: dict(v) for k, v in self.anchors.items()}} if self.anchors else {}),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Verdict:
        return cls(
            result=d["result"],
            summary=d["summary"],
            channel=d["channel"],
            gates=tuple(GateResult.from_dict(g) for g in d["gates"]),
            context=d.get("context", {}),
            environment=d.get("environment", {}),
            stages=d.get("stages", {}),
            waived_checks=tuple(WaivedCheck(**w) for w in d.get("waived_checks", [])),
            expired_waivers=tuple(d.get("expired_waivers", [])),
            generated_at=d.get("generated_at", ""),
            gates_file=d.get("gates_file", ""),
            baselines=d.get("baselines", {}),
            warnings=tuple(d.get("warnings", ())),
            provenance=d.get("provenance", {}),
            anchors=d.get("anchors", {}),
        )


def read_verdict(path: str | Path) -> Verdict:
    """The one strict reader of verdict.json: JSON object, this schema version, schema-valid."""
    doc = files.read_json(path, what="verdict")
    if not isinstance(doc, dict):
        raise InputError(
            path, "", "a verdict must be a JSON object", "pass the verdict.json that gatekeeper evaluate wrote"
        )
    schema = doc.get("schema")
    if isinstance(schema, str) and schema.startswith("gatekeeper.verdict/") and schema != VERDICT_SCHEMA:
        raise InputError(path, "schema", f"written by a newer gatekeeper ({schema})", "upgrade gatekeeper")
    if schema != VERDICT_SCHEMA:
        raise InputError(path, "schema", f"not a {VERDICT_SCHEMA} document", "pass the verdict.json")
    schemas.validate(VERDICT_SCHEMA, doc, path=str(path))
    return Verdict.from_dict(doc)


def write_verdict(verdict: Verdict, path: str | Path) -> Path:
    """Validate against the schema, then write atomically."""
    doc = verdict.to_dict()
    schemas.validate(VERDICT_SCHEMA, doc, path=str(path))
    return files.write_json(path, doc)
