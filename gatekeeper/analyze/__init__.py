"""Failure analysis: from a red job's logs and artifacts to a diagnosis.

``analyze(...)`` is the workflow behind ``gatekeeper analyze``: load rules,
read the artifacts, stream the logs, diagnose, write the output, and write a
reproduction bundle for failures no signature knows.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from gatekeeper import files
from gatekeeper.analyze.classify import Classifier, open_log
from gatekeeper.analyze.diagnosis import Diagnosis, diagnose, environment_fingerprint, failed_checks
from gatekeeper.analyze.render import FORMATS, render
from gatekeeper.analyze.rules import CATEGORIES, RuleSet, load_rules
from gatekeeper.artifacts import read_artifacts
from gatekeeper.errors import InputError

__all__ = ["CATEGORIES", "FORMATS", "analyze", "classify_logs", "doctor_available"]


def classify_logs(
    logs: Sequence[str | Path],
    *,
    rules: RuleSet,
    artifacts: str | Path | None = None,
) -> Diagnosis:
    """Diagnose ``logs`` (paths, ``-`` for stdin; gzip accepted) plus the failed checks in ``artifacts``."""
    reports = read_artifacts(artifacts) if artifacts is not None else {}
    checks = failed_checks(reports)
    classifier = Classifier(rules)
    for log in logs:
        with open_log(log) as stream:
            classifier.scan(stream, "<stdin>" if str(log) == "-" else str(log))
    for check in checks:
        # A failed check's message is evidence too (a stage may have caught the error).
        classifier.scan_text(check.message, f"{check.stage}.json#{check.name}")
    return diagnose(classifier.evidence, rules, environment=environment_fingerprint(reports), checks=checks)


def doctor_available() -> bool:
    """Whether this gatekeeper has the ``doctor`` subcommand (another issue adds it)."""
    import argparse

    from gatekeeper.cli import build_parser

    return any(
        isinstance(action, argparse._SubParsersAction) and "doctor" in action.choices
        for action in build_parser()._actions
    )


def analyze(
    *,
    logs: Sequence[str | Path],
    artifacts: str | Path | None = None,
    known_issues: str | Path | None = None,
    fmt: str = "text",
    out: str | Path | None = None,
    bundle: str | Path | None = None,
) -> Diagnosis:
    """The whole workflow; returns the diagnosis after writing ``out`` (or stdout) and the bundle."""
    rules = load_rules(known_issues)
    if not logs:
        if artifacts is None and sys.stdin.isatty():
            raise InputError(
                None, "LOG", "no log given and stdin is a terminal", "pass log files, --artifacts or a pipe"
            )
        logs = sorted(Path(artifacts).glob("*.log")) if artifacts is not None else ["-"]
    diagnosis = classify_logs(logs, rules=rules, artifacts=artifacts)
    if bundle is not None and diagnosis.category == "unknown":
        from dataclasses import replace

        from gatekeeper.analyze.bundle import write_bundle

        diagnosis = replace(diagnosis, bundle=str(bundle))
        write_bundle(bundle, diagnosis, doctor_available=doctor_available())
    text = render(diagnosis, fmt)
    if out is not None:
        files.atomic_write(out, text)
    else:
        sys.stdout.write(text)
    return diagnosis
