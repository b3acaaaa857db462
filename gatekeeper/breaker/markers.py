"""What breaker jobs leave in and read from a pipeline's artifacts.

A skip marker (``<job>.breaker.json``) says only "this job was skipped by its
breaker": a later job of the same pipeline and channel skips too instead of
spending device time on missing inputs. Markers are validated (schema, job,
channel, pipeline id) or ignored with a warning; breaker *state* is never read
from the artifacts, only from the state directory.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from gatekeeper.contract.stage_names import STAGE_NAMES
from gatekeeper.contract.stage_report import StageReport, read_stage
from gatekeeper.core import files
from gatekeeper.core.errors import InputError

__all__ = [
    "MARKER_JOBS",
    "MARKER_SCHEMA",
    "MARKER_SUFFIX",
    "diagnosis_from_artifacts",
    "file_stem",
    "marker_problem",
    "open_markers",
    "upstream_failure",
    "write_marker",
]


MARKER_SUFFIX = ".breaker.json"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def file_stem(job: str) -> str:
    """A job name as one file name inside the artifacts: "../x" or "a/b" cannot leave the directory."""
    return _UNSAFE.sub("_", job).lstrip(".") or "_"


def upstream_failure(artifacts: Path, after: Sequence[str]) -> str | None:
    """Why a stage this job comes after did not pass on this channel (None: it passed).

    Stage jobs of both channels share one needs: chain (GitLab < 18.6 cannot
    say "the same matrix value" in needs:), so they run `when: always` and
    decide here, from their own channel's artifacts, whether to go on.
    """
    for stage in after:
        report, problem = _stage_report(artifacts, stage)
        if report is None:
            return f"{stage} {problem}"
        if report.status in ("failed", "error"):
            counts = report.counts()
            return f"{stage} {report.status} ({counts['failed']} failed, {counts['error']} errors)"
    return None


MARKER_SCHEMA = "gatekeeper.breaker-skip/v1"
MARKER_JOBS = (*STAGE_NAMES, "gate")


def write_marker(artifacts: str | None, channel: str, job: str, message: str, environ: Mapping[str, str]) -> None:
    if artifacts:
        doc = {"schema": MARKER_SCHEMA, "channel": channel, "job": job, "message": message}
        files.write_json(
            Path(artifacts) / f"{file_stem(job)}{MARKER_SUFFIX}",
            {**doc, "pipeline_id": environ.get("CI_PIPELINE_ID") or None},
        )


def open_markers(artifacts: Path, job: str, channel: str, environ: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """Skip markers an upstream job of this pipeline and channel left, and a warning for each file ignored.

    A marker only says "this job was skipped"; breaker state itself is read from the state directory only.
    """
    found: list[str] = []
    warnings: list[str] = []
    pipeline = environ.get("CI_PIPELINE_ID") or None
    for path in sorted(artifacts.glob(f"*{MARKER_SUFFIX}")):
        if path.name == f"{file_stem(job)}{MARKER_SUFFIX}":
            continue  # our own marker from an earlier attempt of this job
        try:
            doc = files.read_json(path, what="breaker marker")
        except InputError as err:
            warnings.append(f"marker ignored: {err.line()}")
            continue
        problem = marker_problem(doc, path, channel, pipeline)
        if problem:
            warnings.append(f"marker {path} ignored: {problem}")
            continue
        found.append(f"{doc['job']}: {doc['message']}")
    return found, warnings


def marker_problem(doc: object, path: Path, channel: str, pipeline: str | None) -> str | None:
    if not isinstance(doc, dict) or doc.get("schema") != MARKER_SCHEMA:
        return f"not a {MARKER_SCHEMA} marker"
    name = path.name[: -len(MARKER_SUFFIX)]
    if doc.get("job") != name or name not in MARKER_JOBS:
        return f"job {doc.get('job')!r} is not the file's job {name!r} (one of {', '.join(MARKER_JOBS)})"
    if doc.get("channel") != channel:
        return f"written for the {doc.get('channel')!r} channel, not {channel!r}"
    if (doc.get("pipeline_id") or None) != pipeline:
        return f"written by pipeline {doc.get('pipeline_id')}, not this pipeline {pipeline}"
    if not isinstance(doc.get("message"), str) or not doc["message"]:
        return "no message"
    return None


def diagnosis_from_artifacts(artifacts: Path, job: str) -> str | None:
    """The failed checks of the job's stage report, as one short line."""
    report, problem = _stage_report(artifacts, job)
    if report is None:
        return f"{job} {problem}"
    bad = [c for c in report.checks if c.status in ("failed", "error")]
    if not bad:
        return None
    first = "; ".join(f"{c.name}: {c.message}" for c in bad[:2])
    more = f" (+{len(bad) - 2} more)" if len(bad) > 2 else ""
    return (first + more)[:300]


def _stage_report(artifacts: Path, job: str) -> tuple[StageReport | None, str]:
    """The job's stage report, or None and what is wrong with it (the job's name goes in front)."""
    path = artifacts / f"{file_stem(job)}.json"
    if not path.is_file():
        return None, f"wrote no report (crashed or timed out before writing {path.name})"
    try:
        return read_stage(path), ""
    except InputError as err:
        return None, f"report unreadable ({err.line()})"
