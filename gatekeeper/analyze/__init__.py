"""Failure analysis: from a red job's logs and artifacts to a diagnosis.

``analyze(...)`` is the workflow behind ``gatekeeper analyze``: load rules,
read the artifacts, stream the logs, diagnose, write the output, and write a
reproduction bundle for failures no signature knows.
"""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from gatekeeper.analyze import structured
from gatekeeper.analyze.classify import Classifier
from gatekeeper.analyze.diagnosis import (
    FailedCheck,
    FailureDiagnosis,
    diagnose,
    diagnose_artifacts,
    environment_fingerprint,
    failed_checks,
)
from gatekeeper.analyze.learned import LearnedModel, builtin_model
from gatekeeper.analyze.logs import open_log
from gatekeeper.analyze.render import FORMATS, render
from gatekeeper.analyze.rules import CATEGORIES, RuleSet, load_rules
from gatekeeper.contract.stage_report import read_artifacts
from gatekeeper.contract.verdict import Verdict, read_verdict
from gatekeeper.core import files
from gatekeeper.core.errors import InputError
from gatekeeper.core.redact import redact, redact_fields

__all__ = [
    "CATEGORIES",
    "FORMATS",
    "analyze",
    "blocking_gates",
    "classify_logs",
    "nothing_failed",
    "report_text",
    "waiver_status",
]


def classify_logs(
    logs: Sequence[str | Path],
    *,
    rules: RuleSet,
    artifacts: str | Path | None = None,
    model: LearnedModel | str | None = "builtin",
) -> FailureDiagnosis:
    """Diagnose ``logs`` (paths, ``-`` for stdin; gzip accepted) plus the failed checks in ``artifacts``.

    ``model``: the learned second opinion asked when no signature fires (``"builtin"``: the packaged
    one; ``None``: rules alone).
    """
    reports = read_artifacts(artifacts) if artifacts is not None else {}
    verdict = _verdict(Path(artifacts)) if artifacts is not None else None
    checks = failed_checks(reports) + (
        [FailedCheck("gate", g.name, "failed", g.reason, {}) for g in verdict.blocking_gates] if verdict else []
    )
    found = structured.findings(reports, verdict, Path(artifacts) if artifacts is not None else None)
    classifier = Classifier(rules)
    for log in logs:
        with open_log(log) as stream:
            classifier.scan(stream, "<stdin>" if str(log) == "-" else str(log))
    for check in checks:
        # A failed check's message is evidence too (a stage may have caught the error), but it is the checked
        # code's text: gatekeeper's own-output lines in it are not believed.
        classifier.scan_text(check.message, f"{check.stage}.json#{check.name}", artifact=True)
    env = environment_fingerprint(reports)
    if found:  # the artifacts name the failure: the logs only refine it (no learned guess is needed)
        return diagnose_artifacts(found, classifier.evidence, rules, environment=env, checks=checks)
    learned: LearnedModel | Callable[[], LearnedModel | None] | None
    if isinstance(model, str):
        if model != "builtin":
            raise ValueError(f"model must be a LearnedModel, None or 'builtin', not {model!r}")
        learned = builtin_model  # loaded only if no signature fires
    else:
        learned = model
    return diagnose(classifier.evidence, rules, environment=env, checks=checks, model=learned)


def _verdict(artifacts: Path) -> Verdict | None:
    """verdict.json in the artifacts, when the gate job wrote one."""
    path = artifacts / "verdict.json"
    return read_verdict(path) if path.is_file() else None


def blocking_gates(artifacts: Path) -> list[FailedCheck]:
    """The gates that blocked this run (from verdict.json, when the gate job wrote one), as evidence."""
    verdict = _verdict(artifacts)
    return [FailedCheck("gate", g.name, "failed", g.reason, {}) for g in verdict.blocking_gates] if verdict else []


def nothing_failed(artifacts: str | Path) -> str | None:
    """Why there is nothing to diagnose in ``artifacts`` (a passing verdict and no failed stage), else None.

    Without a verdict something failed before the gate could judge: that is diagnosed.
    """
    verdict = _verdict(Path(artifacts))
    if verdict is None or verdict.result == "blocked":
        return None
    reports = read_artifacts(artifacts)
    failed = [r.stage for r in reports.values() if r.status in ("failed", "error")]
    if failed or structured.stopped_stages(Path(artifacts), reports):
        return None
    return f"the verdict is {verdict.result} and no stage failed"


def waiver_status(rules: RuleSet, gates_path: str | Path, today: dt.date | None = None) -> dict[str, dict]:
    """Check that every waiver a known issue names is a gate in gates.yaml; gate -> its waiver there."""
    from gatekeeper.evaluate.gates import load_gates

    gates = load_gates(gates_path)
    names = {g.name for g in gates.gates}
    for rule in rules.rules:
        if rule.waiver and rule.waiver not in names:
            raise InputError(
                rule.source,
                rule.waiver_at,
                f"issues[{rule.id}].waiver: {rule.waiver!r} is not a gate in {gates_path}",
                f"one of: {', '.join(sorted(names))}",
            )
    today = today or dt.datetime.now(dt.timezone.utc).date()
    status: dict[str, dict] = {}
    for waiver in gates.waivers:
        status[waiver.gate] = {**waiver.to_dict(), "expired": waiver.expired(today)}
    return status


def analyze(
    *,
    logs: Sequence[str | Path],
    artifacts: str | Path | None = None,
    known_issues: str | Path | None = None,
    fmt: str = "text",
    out: str | Path | None = None,
    bundle: str | Path | None = None,
    gates: str | Path | None = None,
    use_model: bool = True,
) -> FailureDiagnosis:
    """The whole workflow; returns the diagnosis after writing ``out`` and the bundle.

    Without ``out`` nothing is written but the bundle: the caller prints ``report_text(diagnosis, fmt)``.
    """
    rules = load_rules(known_issues)
    waivers = waiver_status(rules, gates) if gates is not None else None
    if not logs:
        if artifacts is None and sys.stdin.isatty():
            raise InputError(
                None, "LOG", "no log given and stdin is a terminal", "pass log files, --artifacts or a pipe"
            )
        logs = sorted(Path(artifacts).glob("*.log")) if artifacts is not None else ["-"]
    diagnosis = classify_logs(logs, rules=rules, artifacts=artifacts, model="builtin" if use_model else None)
    if waivers is not None and diagnosis.waiver:
        from dataclasses import replace

        diagnosis = replace(diagnosis, waiver_detail=waivers.get(diagnosis.waiver, {"gate": diagnosis.waiver}))
    if bundle is not None and diagnosis.category == "unknown":
        from dataclasses import replace

        from gatekeeper.analyze.bundle import write_bundle

        diagnosis = replace(diagnosis, bundle=str(bundle))
        write_bundle(bundle, diagnosis)
    if out is not None:
        files.atomic_write(out, report_text(diagnosis, fmt))
    return diagnosis


def report_text(diagnosis: FailureDiagnosis, fmt: str) -> str:
    """The diagnosis as ``fmt`` (json, md, text), redacted.

    Logs can contain tokens (local runs are not masked like GitLab job logs): the report must not.
    """
    return redact(render(redact_fields(diagnosis), fmt))
