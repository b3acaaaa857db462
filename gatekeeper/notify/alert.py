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

__all__ = ["Alert", "Links", "load_alert", "severity_of"]

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


def load_alert(
    verdict_path: str | Path, analysis_path: str | Path | None = None, environ: Mapping[str, str] | None = None
) -> Alert:
    """Read verdict.json (and analysis.json) and the GitLab predefined variables."""
    env = os.environ if environ is None else environ
    verdict = read_verdict(verdict_path)
    analysis = None
    if analysis_path is not None:
        analysis = read_analysis(analysis_path).to_dict()
    # The verdict's own context wins (it was taken when the pipeline ran); the environment fills gaps.
    live = PipelineContext.from_env(env).to_dict()
    ctx = PipelineContext.from_dict({**live, **{k: v for k, v in verdict.context.items() if v is not None}})
    project_url = ctx.project_url or env.get("CI_PROJECT_URL")
    mr_url = f"{project_url}/-/merge_requests/{ctx.mr_iid}" if project_url and ctx.mr_iid else None
    report = env.get("GATEKEEPER_REPORT_URL") or (f"{ctx.job_url}/artifacts/browse" if ctx.job_url else None)
    links = Links(ctx.pipeline_url, ctx.job_url, mr_url, report, project_url)
    project = env.get("CI_PROJECT_PATH") or (project_url.rstrip("/").rsplit("/", 1)[-1] if project_url else "")
    return Alert(
        verdict=verdict,
        context=ctx,
        links=links,
        analysis=analysis,
        project=project,
        commit=ctx.commit or env.get("CI_COMMIT_SHA"),
    )
