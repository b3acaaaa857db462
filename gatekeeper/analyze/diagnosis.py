"""From evidence to a diagnosis: the root cause wins, the rest is context."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gatekeeper.analyze import structured
from gatekeeper.analyze.classify import MAX_KEPT_BYTES, Evidence, RuleMatch
from gatekeeper.analyze.learned import LearnedModel, evidence_text
from gatekeeper.analyze.rules import Rule, RuleSet
from gatekeeper.contract.stage_report import StageReport

__all__ = [
    "DIAGNOSIS_SCHEMA",
    "FailedCheck",
    "FailureDiagnosis",
    "diagnose",
    "diagnose_artifacts",
    "environment_fingerprint",
]

DIAGNOSIS_SCHEMA = "gatekeeper.analysis/v1"
MAX_MATCHES = 20
# A runner-up of another category this close in priority makes the call less certain.
_CLOSE_PRIORITY = 5

_FINGERPRINT_KEYS = (
    "device_kind",
    "device_name",
    "device_count",
    "gfx_arch",
    "compute_capability",
    "torch_version",
    "torch_git_hash",
    "hip_version",
    "rocm_version",
    "cuda_version",
    "driver",
    "python",
    "channel",
    "host",
)

_PLACEHOLDER_FALLBACK = {
    "gfx_arch": "<gfx arch>",
    "rocm_version": "<version>",
    "torch_version": "<torch version>",
}


@dataclass(frozen=True)
class FailedCheck:
    stage: str
    name: str
    status: str
    message: str
    details: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"stage": self.stage, "name": self.name, "status": self.status, "message": self.message}


@dataclass(frozen=True)
class FailureDiagnosis:
    category: str
    known_issue: str | None
    confidence: float
    explanation: str
    remediation: tuple[str, ...]
    links: tuple[str, ...]
    matches: tuple[RuleMatch, ...]
    also_seen: tuple[dict[str, Any], ...]
    environment: Mapping[str, Any]
    failed_checks: tuple[FailedCheck, ...]
    sources: Mapping[str, int]
    waiver: str | None = None
    rule_source: str | None = None
    bundle: str | None = None
    excerpt: tuple[str, ...] = ()
    waiver_detail: Mapping[str, Any] | None = None  # the gate's waiver in gates.yaml (with --gates)
    decided_by: str = "none"  # "rule" (a signature), "model" (the learned second opinion) or "none"
    model: Mapping[str, Any] | None = None  # the second opinion when it was asked (no signature fired)
    truncated: Mapping[str, int] = field(default_factory=dict)  # source -> bytes read before the input budget ran out
    failing_check: Mapping[str, Any] | None = None  # the root finding of the artifacts (a check, else a gate)
    blocking_gate: Mapping[str, Any] | None = None  # the gate it blocked (or the root finding itself)
    findings: tuple[Mapping[str, Any], ...] = ()  # every failure the artifacts report, root cause first

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": DIAGNOSIS_SCHEMA,
            "category": self.category,
            "known_issue": self.known_issue,
            "rule_source": self.rule_source,
            "waiver": self.waiver,
            "waiver_detail": dict(self.waiver_detail) if self.waiver_detail is not None else None,
            "confidence": self.confidence,
            "decided_by": self.decided_by,
            "model": dict(self.model) if self.model is not None else None,
            "explanation": self.explanation,
            "remediation": list(self.remediation),
            "links": list(self.links),
            "matches": [m.to_dict() for m in self.matches],
            "also_seen": list(self.also_seen),
            "environment": dict(self.environment),
            "failed_checks": [c.to_dict() for c in self.failed_checks],
            "inputs": [
                {"source": s, "lines": n}
                | ({"truncated_after_bytes": self.truncated[s]} if s in self.truncated else {})
                for s, n in self.sources.items()
            ],
            "bundle": self.bundle,
            "failing_check": dict(self.failing_check) if self.failing_check is not None else None,
            "blocking_gate": dict(self.blocking_gate) if self.blocking_gate is not None else None,
            "findings": [dict(f) for f in self.findings],
        }


def environment_fingerprint(reports: Mapping[str, StageReport]) -> dict[str, Any]:
    """The environment of the first failed stage (else the first stage), as a flat dict."""
    ordered = sorted(reports.values(), key=lambda r: (r.status not in ("failed", "error"), r.stage))
    if not ordered:
        return {}
    env = ordered[0].environment.to_dict()
    return {k: env.get(k) for k in _FINGERPRINT_KEYS if env.get(k) not in (None, "")}


def failed_checks(reports: Mapping[str, StageReport]) -> list[FailedCheck]:
    return [
        FailedCheck(r.stage, c.name, c.status, c.message, c.details)
        for r in reports.values()
        for c in r.checks
        if c.status in ("failed", "error")
    ]


def diagnose(
    evidence: Evidence,
    rules: RuleSet,
    *,
    environment: Mapping[str, Any] | None = None,
    checks: Sequence[FailedCheck] = (),
    model: LearnedModel | Callable[[], LearnedModel | None] | None = None,
) -> FailureDiagnosis:
    """The highest-ranked signature decides; when none does, ``model`` (if given) may, above its threshold.

    ``model`` may be a loader (``learned.builtin_model``): it is called only when no signature fired,
    so a classified log never pays for loading numpy and the model file.
    """
    env = dict(environment or {})
    matched = [rules.by_id(rid) for rid in evidence.matches if evidence.matches[rid]]
    first = {rid: ms[0].order for rid, ms in evidence.matches.items() if ms}
    # Highest priority wins; among equals, whatever appeared first in the log. A warning-level
    # signature (noise in many logs) followed by another signature's match is only context:
    # the last error before the exit beats earlier noise.
    ranked = sorted(matched, key=lambda r: (_superseded(r, matched, evidence), -r.priority, first[r.id]))
    causes = [r for r in ranked if r.category != "unknown"]
    winner: Rule | None = causes[0] if causes else (ranked[0] if ranked else None)
    category = winner.category if winner is not None else "unknown"

    confidence = 0.0
    if winner is not None and category != "unknown":
        confidence = winner.confidence
        rival = next((r for r in causes if r.category != category), None)
        if rival is not None and rival.priority >= winner.priority - _CLOSE_PRIORITY:
            confidence *= 0.8

    if winner is not None:
        explanation, remediation, links = winner.explanation, winner.remediation, winner.links
    else:
        explanation = "No failure signature and no generic error line found in the inputs."
        remediation = (
            "Check that the right log was passed (the failed job's log, or --artifacts with the stage logs).",
            "Reproduce with the bundle (--bundle DIR) and report it upstream with the environment capture.",
        )
        links = ()

    decided_by = "rule" if category != "unknown" else "none"
    opinion: dict[str, Any] | None = None
    if category == "unknown" and callable(model) and not isinstance(model, LearnedModel):
        model = model()
    if category == "unknown" and isinstance(model, LearnedModel):
        prediction = model.predict(evidence_text(evidence))
        opinion = {
            "category": prediction.category,
            "probability": round(prediction.probability, 2),
            "threshold": model.threshold,
            "abstained": prediction.abstained,
            "ranking": [{"category": c, "probability": round(p, 2)} for c, p in prediction.ranking[:3]],
            "training_digest": model.training.get("digest"),
        }
        typical = next((r for r in rules.rules if r.category == prediction.category), None)
        if not prediction.abstained and typical is not None:
            category, decided_by = prediction.category, "model"
            confidence = prediction.probability
            explanation = (
                f"No known signature matched; the learned second opinion (TF-IDF + linear model over the error "
                f"lines) says {category} with probability {prediction.probability:.2f}. Typically: "
                + typical.explanation
            )
            remediation, links = typical.remediation, typical.links

    order = {r.id: i for i, r in enumerate(ranked)}
    all_matches = sorted((m for ms in evidence.matches.values() for m in ms), key=lambda m: (order[m.rule], m.order))
    also_seen = tuple(
        {"category": r.category, "rule": r.id, "lines": evidence.counts.get(r.id, 0)}
        for r in ranked
        if winner is None or r.id != winner.id
    )
    fill = _Filler(env)
    return FailureDiagnosis(
        category=category,
        known_issue=winner.id if winner is not None and decided_by == "rule" else None,
        confidence=round(confidence, 2),
        explanation=explanation.format_map(fill),
        remediation=tuple(step.format_map(fill) for step in remediation),
        links=tuple(links),
        matches=tuple(all_matches[:MAX_MATCHES]),
        also_seen=also_seen,
        environment=env,
        failed_checks=tuple(checks),
        sources=dict(evidence.sources),
        truncated=dict(evidence.truncated),
        waiver=winner.waiver if winner is not None and decided_by == "rule" else None,
        rule_source="model" if decided_by == "model" else (winner.source if winner is not None else None),
        excerpt=_excerpt(all_matches, evidence),
        decided_by=decided_by,
        model=opinion,
    )


ARTIFACT_CONFIDENCE = 0.95  # the check measured it: only a wrong category declaration could make it wrong
_MAX_FINDINGS = 20


def diagnose_artifacts(
    found: Sequence[structured.Finding],
    evidence: Evidence,
    rules: RuleSet,
    *,
    environment: Mapping[str, Any] | None = None,
    checks: Sequence[FailedCheck] = (),
) -> FailureDiagnosis:
    """The diagnosis from the artifacts' findings (root cause first), refined by a more specific log signature."""
    env = dict(environment or {})
    first, gate = structured.root(found)
    matched = [rules.by_id(rid) for rid, ms in evidence.matches.items() if ms and not rules.by_id(rid).warning]
    first_seen = {rid: ms[0].order for rid, ms in evidence.matches.items() if ms}
    matched.sort(key=lambda r: (-r.priority, first_seen[r.id]))
    refiner = next((r for r in matched if structured.may_refine(first, r.category, r.priority)), None)
    confirming = next((r for r in matched if r.category == first.category), None)

    where = (
        f"{first.stage} check {first.name} {first.status}" if first.source == "check" else f"gate {first.name} blocked"
    )
    facts = f"{where}: {first.numbers()}"
    if gate is not None and gate is not first:
        facts += f"; it blocks gate {gate.name} ({gate.numbers()})"
    others = [f for f in found if f is not first and f is not gate]
    if others:
        more = ", ".join(f"{f.label} ({f.category})" for f in others[:5])
        facts += f". Also failed: {more}" + (f" and {len(others) - 5} more" if len(others) > 5 else "")
    own_fix = [step for step in (_message_fix(first.message), first.fix) if step]
    deciding: Rule | None
    if refiner is not None:
        category, decided_by, deciding = refiner.category, "rule", refiner
        confidence = refiner.confidence
        explanation = f"{refiner.explanation} The artifacts: {facts}."
        remediation = tuple(refiner.remediation) + tuple(own_fix)
        links = refiner.links
    else:
        category, decided_by, deciding = first.category, "artifacts", confirming
        confidence = ARTIFACT_CONFIDENCE
        explanation = f"{structured.meaning(category)[:1].upper()}{structured.meaning(category)[1:]}: {facts}."
        remediation = tuple(own_fix) + structured.CATEGORY_STEPS.get(category, ())
        links = confirming.links if confirming is not None else ()
    blocked = gate if gate is not None else (first if first.source == "gate" else None)
    lead = deciding.id if deciding is not None else ""
    ranked = [r.id for r in matched]
    all_matches = sorted(
        (m for ms in evidence.matches.values() for m in ms),
        key=lambda m: (m.rule != lead, ranked.index(m.rule) if m.rule in ranked else len(ranked), m.order),
    )
    fill = _Filler(env)
    return FailureDiagnosis(
        category=category,
        known_issue=deciding.id if deciding is not None else None,
        confidence=round(confidence, 2),
        explanation=explanation.format_map(fill),
        remediation=tuple(dict.fromkeys(step.format_map(fill) for step in remediation)),
        links=tuple(links),
        matches=tuple(all_matches[:MAX_MATCHES]),
        also_seen=tuple(
            {"category": r.category, "rule": r.id, "lines": evidence.counts.get(r.id, 0)}
            for r in (rules.by_id(rid) for rid, ms in evidence.matches.items() if ms)
            if deciding is None or r.id != deciding.id
        ),
        environment=env,
        failed_checks=tuple(checks),
        sources=dict(evidence.sources),
        truncated=dict(evidence.truncated),
        waiver=deciding.waiver if deciding is not None else None,
        rule_source="artifacts" if decided_by == "artifacts" else (deciding.source if deciding is not None else None),
        excerpt=_excerpt(all_matches, evidence),
        decided_by=decided_by,
        failing_check=first.to_dict(),
        blocking_gate=blocked.to_dict() if blocked is not None else None,
        findings=tuple(f.to_dict() for f in found[:_MAX_FINDINGS]),
    )


def _message_fix(message: str) -> str:
    """The fix a check wrote into its own message ("fix: ..." line, or an InputError's "; hint: ...")."""
    for line in message.splitlines():
        if line.strip().lower().startswith("fix:"):
            return line.strip()[4:].strip()
    _, sep, hint = message.partition("; hint: ")
    return hint.strip().splitlines()[0] if sep and hint.strip() else ""


def _superseded(rule: Rule, matched: Sequence[Rule], evidence: Evidence) -> bool:
    """A warning rule with a later match of another (non-warning, non-unknown) signature after its last line."""
    if not rule.warning:
        return False
    mine = evidence.last.get(rule.id, (0, 0))
    return any(
        not other.warning and other.category != "unknown" and evidence.last.get(other.id, (0, 0)) > mine
        for other in matched
    )


class _Filler(dict):
    """format_map mapping: environment values, a readable fallback, and unknown keys left as they are."""

    def __init__(self, env: Mapping[str, Any]) -> None:
        values = {k: str(env.get(k) or fallback) for k, fallback in _PLACEHOLDER_FALLBACK.items()}
        values["gfx_arch"] = values["gfx_arch"].split(":")[0]  # gfx90a:sramecc+:xnack- -> gfx90a
        super().__init__(values)

    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def _excerpt(matches: Sequence[RuleMatch], evidence: Evidence) -> tuple[str, ...]:
    """Matched lines with context, then the tail of each log: what a bug report needs."""
    lines: list[str] = []
    for m in sorted(matches, key=lambda m: m.order)[:MAX_MATCHES]:
        lines.append(f"--- {m.source}:{m.line} ({m.rule})")
        lines.extend(f"  {x}" for x in m.before)
        lines.append(f"> {m.text}")
        lines.extend(f"  {x}" for x in m.after)
    for source, tail in evidence.tails.items():
        if tail:
            lines.append(f"--- last {len(tail)} lines of {source}")
            lines.extend(tail)
    dropped = getattr(evidence, "dropped_sources", 0)
    if dropped:
        budget = f"{MAX_KEPT_BYTES // 2**20} MiB"
        lines.append(f"--- the tails of {dropped} earlier logs are left out (the analysis keeps {budget} of tails)")
    return tuple(lines)
