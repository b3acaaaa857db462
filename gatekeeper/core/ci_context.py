"""PipelineContext: what kind of pipeline this is, from GitLab's predefined variables."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["PIPELINE_KINDS", "PipelineContext"]

PIPELINE_KINDS = ("tag", "merge_request", "schedule", "branch", "local")  # PipelineContext.kind


@dataclass(frozen=True)
class PipelineContext:
    pipeline_source: str | None = None  # push, merge_request_event, schedule, web, ...
    ref: str | None = None
    tag: str | None = None
    commit: str | None = None
    mr_iid: str | None = None
    target_branch: str | None = None
    default_branch: str | None = None
    protected_branch: str = "main"
    pipeline_id: str | None = None
    pipeline_url: str | None = None
    job_name: str | None = None
    job_url: str | None = None
    project_url: str | None = None
    require_device: bool = False

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> PipelineContext:
        env = os.environ if environ is None else environ

        def get(name: str) -> str | None:
            return env.get(name) or None

        return cls(
            pipeline_source=get("CI_PIPELINE_SOURCE"),
            ref=get("CI_COMMIT_REF_NAME"),
            tag=get("CI_COMMIT_TAG"),
            commit=get("CI_COMMIT_SHA"),
            mr_iid=get("CI_MERGE_REQUEST_IID"),
            target_branch=get("CI_MERGE_REQUEST_TARGET_BRANCH_NAME"),
            default_branch=get("CI_DEFAULT_BRANCH"),
            protected_branch=get("GATEKEEPER_PROTECTED_BRANCH") or get("CI_DEFAULT_BRANCH") or "main",
            pipeline_id=get("CI_PIPELINE_ID"),
            pipeline_url=get("CI_PIPELINE_URL"),
            job_name=get("CI_JOB_NAME"),
            job_url=get("CI_JOB_URL"),
            project_url=get("CI_PROJECT_URL"),
            require_device=env.get("GATEKEEPER_REQUIRE_DEVICE", "") in ("1", "true", "yes"),
        )

    @property
    def in_ci(self) -> bool:
        return self.pipeline_source is not None

    @property
    def kind(self) -> str:
        """What ``when: {pipeline: ...}`` matches: tag, merge_request, schedule, branch (a push, the web, the
        API, a trigger on a branch) or local (outside CI)."""
        if self.tag:
            return "tag"
        if self.is_merge_request:
            return "merge_request"
        if self.pipeline_source == "schedule":
            return "schedule"
        return "branch" if self.in_ci else "local"

    @property
    def is_merge_request(self) -> bool:
        return self.pipeline_source == "merge_request_event" or self.mr_iid is not None

    @property
    def protected(self) -> bool:
        """A failure here must block: a tag, the protected branch, or a merge request into it."""
        if self.tag:
            return True
        if self.is_merge_request:
            return self.target_branch == self.protected_branch
        return self.ref == self.protected_branch if self.ref else True  # outside CI: behave strictly

    def describe(self) -> str:
        if self.tag:
            return f"tag {self.tag}"
        if self.is_merge_request:
            return f"merge request !{self.mr_iid} into {self.target_branch}"
        if self.pipeline_source == "schedule":
            return f"scheduled pipeline on {self.ref}"
        if self.ref:
            return f"{self.pipeline_source or 'pipeline'} on {self.ref}"
        return "local run"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["protected"] = self.protected
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PipelineContext:
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})
