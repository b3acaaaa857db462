"""What an alert is about: the verdict, the failure analysis, the pipeline, the links, the severity."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gatekeeper.contract.analysis import read_analysis
from gatekeeper.contract.verdict import Verdict, read_verdict
from gatekeeper.core.ci_context import PipelineContext
from gatekeeper.core.errors import InputError

__all__ = [
    "CHECKED_CONTEXT",
    "Alert",
    "Links",
    "check_context",
    "job_links",
    "job_project",
    "load_alert",
    "severity_of",
]

FAILING_RESULTS = ("blocked", "error")


@dataclass(frozen=True)
class Links:
    pipeline: str | None = None
    job: str | None = None
    merge_request: str | None = None
    report: str | None = None
    project: str | None = None

    def items(self) -> list[tuple[str, str]]:
        named = [
            ("Pipeline", self.pipeline),
            ("Job", self.job),
            ("Merge request", self.merge_request),
            ("Report", self.report),
        ]
        return [(name, url) for name, url in named if url]


@dataclass(frozen=True)
class Alert:
    verdict: Verdict
    context: PipelineContext
    links: Links
    analysis: Mapping[str, Any] | None = None
    project: str = ""
    commit: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def failing(self) -> bool:
        return self.verdict.result in FAILING_RESULTS

    @property
    def where(self) -> str:
        return self.context.describe()


def severity_of(alert: Alert, *, recovered: bool = False) -> str:
    """critical: a blocked main/tag pipeline; warning: nightly and other breakage; info: recovery or fine."""
    if recovered or not alert.failing:
        return "info"
    ctx = alert.context
    if ctx.tag:
        return "critical"
    if alert.verdict.channel == "nightly" or ctx.pipeline_source == "schedule":
        return "warning"
    if not ctx.is_merge_request and ctx.protected:
        return "critical"
    return "warning"


# The pipeline-level facts a verdict records about where it was computed (``PipelineContext``); each one the
# job also knows must agree with the job's. Job-level facts (job name, job URL) differ between the gate job
# that wrote the verdict and the job that notifies, so they are not compared.
CHECKED_CONTEXT = ("pipeline_id", "commit", "mr_iid", "ref", "tag", "project_url")


def check_context(verdict: Verdict, job: PipelineContext, path: str | Path) -> None:
    """InputError naming both values when the verdict was not computed in this job's pipeline.

    A job in a pipeline (``CI_PIPELINE_ID``) accepts only a verdict of that same pipeline: an earlier one (left in
    ``--out``) or one that names no pipeline is refused. Every other fact both sides know must agree."""
    theirs = verdict.context
    hint = (
        "notify with the verdict.json that gatekeeper evaluate wrote in this pipeline; a verdict never picks its target"
    )
    if job.pipeline_id and str(theirs.get("pipeline_id")) != job.pipeline_id:
        raise InputError(
            path, "context.pipeline_id",
            f"the verdict was written in pipeline {theirs.get('pipeline_id')!r}, this job is in pipeline "
            f"{job.pipeline_id!r}",
            hint,
        )  # fmt: skip
    for name in CHECKED_CONTEXT:
        mine, claimed = getattr(job, name), theirs.get(name)
        if mine and claimed not in (None, "") and str(claimed) != mine:
            raise InputError(
                path, f"context.{name}", f"the verdict says {name} {claimed!r}, this job's is {mine!r}", hint
            )  # fmt: skip


def job_links(ctx: PipelineContext, env: Mapping[str, str]) -> Links:
    """The links of an alert, all from the job's own variables."""
    project_url = ctx.project_url
    mr_url = f"{project_url}/-/merge_requests/{ctx.mr_iid}" if project_url and ctx.mr_iid else None
    report = env.get("GATEKEEPER_REPORT_URL") or (f"{ctx.job_url}/artifacts/browse" if ctx.job_url else None)
    return Links(ctx.pipeline_url, ctx.job_url, mr_url, report, project_url)


def job_project(env: Mapping[str, str]) -> str | None:
    """The project this job posts to: ``CI_PROJECT_ID`` (else ``CI_PROJECT_PATH``); None outside GitLab."""
    return env.get("CI_PROJECT_ID") or env.get("CI_PROJECT_PATH") or None


def load_alert(
    verdict_path: str | Path, analysis_path: str | Path | None = None, environ: Mapping[str, str] | None = None
) -> Alert:
    """Read verdict.json (and analysis.json); where it is about comes from the job (GitLab's predefined
    variables), never from the verdict, which must agree with the job (``check_context``)."""
    env = os.environ if environ is None else environ
    verdict = read_verdict(verdict_path)
    analysis = None
    if analysis_path is not None:
        analysis = read_analysis(analysis_path).to_dict()
    ctx = PipelineContext.from_env(env)
    check_context(verdict, ctx, verdict_path)
    project_url = ctx.project_url
    project = env.get("CI_PROJECT_PATH") or (project_url.rstrip("/").rsplit("/", 1)[-1] if project_url else "")
    return Alert(
        verdict=verdict, context=ctx, links=job_links(ctx, env), analysis=analysis, project=project,
        commit=ctx.commit,
    )  # fmt: skip
