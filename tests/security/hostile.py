"""Builders of hostile verdicts, analyses and diagnoses for the security tests."""

from __future__ import annotations

from typing import Any

from gatekeeper.analyze.classify import RuleMatch as Match
from gatekeeper.analyze.diagnosis import FailedCheck, FailureDiagnosis
from gatekeeper.contract.verdict import GateResult, Outcome, Verdict, WaivedCheck
from gatekeeper.core.ci_context import PipelineContext
from gatekeeper.notify.alert import Alert, Links

# One line that tries every injection at once.
NASTY = (
    "<!channel> <!here> <@U123> @all @here `x` ``` </details> <img src=x onerror=alert(1)> "
    "[click](https://evil.example) <https://evil.example|Pipeline> ~~~ \x1b[31mred\x1b[0m \r\x07\x00 /close"
)


def verdict(name: str = NASTY, reason: str = NASTY, rule: str = NASTY) -> Verdict:
    gates = (
        GateResult(name, Outcome.FAIL, reason, "m", value=1.0, unit="ms", rule=rule),
        GateResult(name + "2", Outcome.WARN, reason, "m", severity="advisory", rule=rule),
        GateResult(name + "3", Outcome.WAIVED, reason, "m", severity="blocking", rule=rule,
                   waiver={"reason": reason, "owner": name, "ticket": name, "expires": "2030-01-01"}),
    )  # fmt: skip
    return Verdict(
        result="blocked",
        summary=reason,
        channel="stable",
        gates=gates,
        context={"ref": name, "mr_iid": 7, "target_branch": name, "tag": None, "commit": "0" * 40},
        environment={"torch_version": name, "device_name": name, "gfx_arch": name},
        generated_at="2026-12-02T15:00:00+00:00",
        gates_file=name,
        waived_checks=(
            WaivedCheck("stage", name, "failed", reason, {"reason": reason, "owner": name, "expires": "x"}),
        ),
        expired_waivers=({"message": reason},),
    )


def analysis(text: str = NASTY) -> dict[str, Any]:
    return {
        "category": text,
        "known_issue": text,
        "confidence": 0.5,
        "explanation": text,
        "remediation": [text, text],
        "matches": [{"source": text, "line": 3, "text": text}],
    }


def alert(text: str = NASTY) -> Alert:
    url = "https://gitlab.example.com/ml/model/-/pipelines/1"
    return Alert(
        verdict=verdict(text, text, text),
        context=PipelineContext.from_dict({"ref": "main", "mr_iid": 7, "job_name": "gates"}),
        links=Links(pipeline=url, job=url, report=url),
        analysis=analysis(text),
        project=text,
        commit="0123456789abcdef",
    )


def diagnosis(text: str = NASTY) -> FailureDiagnosis:
    match = Match(text, 1, text, text, "unknown", 1)
    return FailureDiagnosis(
        category="unknown",
        known_issue=text,
        confidence=0.1,
        explanation=text,
        remediation=(text,),
        links=("https://gitlab.example.com/ml/model/-/pipelines/1",),  # from known_issues.yaml, trusted
        matches=(match,),
        also_seen=({"category": text, "rule": text, "lines": 1},),
        environment={"k": text},
        failed_checks=(FailedCheck(text, text, "failed", text, {}),),
        sources={},
        bundle=text,
    )
