"""A sequential comparison's design and its answer at one look (``gatekeeper.stats.sequential`` is the rule).

``Plan`` is fixed before the first process runs: the budget, the error rates, the effect sizes, which side
grows. ``Step`` is what the rule says after a round: stop or run more, the verdict, the always-valid
interval, and every look so far (what a bisection or ``gatekeeper ab`` records to replay the decision).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["CODES", "REUSED_MIN_CANDIDATE", "Plan", "Step", "Verdict"]

Verdict = Literal["regression", "improvement", "equivalent", "inconclusive"]
CODES: tuple[Verdict, ...] = ("inconclusive", "regression", "improvement", "equivalent")

# Against a reused (larger) baseline, Welch's t with 3-4 candidate processes is anti-conservative at the far
# tail the first looks use (0.7% false regressions instead of 0.5% in benchmarks/judge.py --sequential).
REUSED_MIN_CANDIDATE = 5


@dataclass(frozen=True)
class Plan:
    """The design, fixed before the first process runs.

    ``max_processes``: the budget, candidate processes (per side when ``baseline_grows``).
    ``alpha``: the false-alarm rate of the whole comparison, as in ``compare_runs`` (its
    body share, alpha/2, bounds false regressions; alpha/2 bounds false improvements).
    ``min_effect``: a regression must be estimated worse than this. ``detect``: the change
    caught with probability ``power`` (default ``2 * min_effect``); ruling it out is "equivalent".
    ``max_cv``: the noise guard, as in ``compare_runs``: no look decides while a side's process medians
    vary more than this (coefficient of variation); a gate's ``max_cv`` in gates.yaml sets it.
    """

    max_processes: int
    better: Literal["lower", "higher"] = "lower"
    alpha: float = 0.01
    min_effect: float = 0.02
    detect: float | None = None
    power: float = 0.9
    max_cv: float = 0.05
    min_processes: int = 3
    baseline_grows: bool = False

    def __post_init__(self) -> None:
        if self.better not in ("lower", "higher"):
            raise ValueError(f"better must be 'lower' or 'higher', not {self.better!r}")
        if not 0.0 < self.alpha < 1.0 or not 0.0 < self.power < 1.0:
            raise ValueError(f"alpha and power must lie in (0, 1), got {self.alpha} and {self.power}")
        if not self.max_cv > 0.0:
            raise ValueError(f"max_cv must be positive, got {self.max_cv}")
        if self.min_effect < 0.0:
            raise ValueError(f"min_effect must not be negative, got {self.min_effect}")
        if self.target <= self.min_effect:
            raise ValueError(f"detect ({self.target}) must exceed min_effect ({self.min_effect})")
        if self.min_processes < 2 or self.max_processes < self.min_processes:
            raise ValueError(
                f"max_processes ({self.max_processes}) must be at least min_processes ({self.min_processes}, >= 2)"
            )

    @property
    def min_candidate(self) -> int:
        """Candidate processes before the first decision."""
        return self.min_processes if self.baseline_grows else max(self.min_processes, REUSED_MIN_CANDIDATE)

    @property
    def target(self) -> float:
        """``detect``, or twice ``min_effect`` (0.02 when that is 0)."""
        if self.detect is not None:
            return self.detect
        return 2.0 * self.min_effect if self.min_effect > 0 else 0.02

    def to_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "detect": self.target}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Plan:
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


@dataclass(frozen=True)
class Step:
    """The rule's answer at one look. ``stop`` False: run more processes (``verdict`` is then "inconclusive")."""

    verdict: Verdict
    stop: bool
    reason: str
    processes: int  # candidate processes so far
    baseline_processes: int
    looks: tuple[tuple[int, int], ...]  # (baseline, candidate) processes at every look, this one last
    ratio: float | None = None  # candidate / baseline, geometric means of process medians
    interval: tuple[float, float] | None = None  # always-valid interval of ratio, coverage ``level``
    p_value: float | None = None  # always-valid one-sided p (candidate worse); computed when stop
    level: float = 0.99
    plan: Plan | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "stop": self.stop,
            "reason": self.reason,
            "processes": self.processes,
            "baseline_processes": self.baseline_processes,
            "looks": [list(x) for x in self.looks],
            "ratio": self.ratio,
            "interval": list(self.interval) if self.interval else None,
            "p_value": self.p_value,
            "level": self.level,
            "plan": self.plan.to_dict() if self.plan else None,
        }
