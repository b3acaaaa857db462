"""Finding: one diagnosed fact about the machine, with what to do about it.

Doctor prints them as a checklist; verify_hip records each as a JUnit check.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["SEVERITIES", "Finding", "Severity", "count_problems", "worst"]

Severity = Literal["ok", "info", "skipped", "warning", "error"]
# "error": something will fail; "warning": works, but bites in practice; "skipped": not applicable here
SEVERITIES: tuple[Severity, ...] = ("ok", "info", "skipped", "warning", "error")


@dataclass(frozen=True)
class Finding:
    check: str  # stable id: "hygiene.HSA_OVERRIDE_GFX_VERSION", "arch.compatible"
    severity: Severity
    message: str
    remediation: str = ""

    @property
    def is_problem(self) -> bool:
        return self.severity in ("warning", "error")

    def to_dict(self) -> dict[str, Any]:
        return {
            "check": self.check,
            "severity": self.severity,
            "message": self.message,
            "remediation": self.remediation,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Finding:
        return cls(d["check"], d["severity"], d["message"], d.get("remediation", ""))


def count_problems(findings: Iterable[Finding]) -> int:
    return sum(1 for f in findings if f.is_problem)


def worst(findings: Iterable[Finding]) -> Severity:
    return max((f.severity for f in findings), key=SEVERITIES.index, default="ok")
