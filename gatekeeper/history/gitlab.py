"""GitLabStore (``gitlab:`` or ``gitlab:BRANCH``): the newest successful pipeline's artifacts of the target branch.

For merge requests: the baseline is what the target branch's last green
pipeline measured. Two routes through the REST API:

The branch: ``gitlab:BRANCH``, else ``GATEKEEPER_PROTECTED_BRANCH`` (set by the CI
component), else the merge request's target branch, else the default branch. The
stage results are read at ``$GATEKEEPER_BASELINE_ARTIFACTS/<stage>.json`` (default
``artifacts``; the component uses ``artifacts/<channel>``).

- with a token that may list pipelines (``GATEKEEPER_GITLAB_TOKEN``, sent as
  ``PRIVATE-TOKEN``): successful pipelines of the branch, newest first, their
  successful jobs, and ``artifacts/<stage>.json`` of each (by path, else
  searched in the artifacts zip), up to the first comparable one;
- with only ``CI_JOB_TOKEN`` (sent as ``JOB-TOKEN``, which may not list
  pipelines): the ref's latest successful artifacts of the named jobs
  (``GATEKEEPER_BASELINE_JOBS``, default: the stage name).

Every call goes through ``gatekeeper.core.gitlab_api.GitLabClient`` (timeouts,
retries on 429/5xx, tokens in headers only and redacted from every message); a
404 means "no baseline here", not an error.
"""

from __future__ import annotations

import io
import os
import zipfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import quote

import requests

from gatekeeper.contract.stage_report import StageReport
from gatekeeper.core import files
from gatekeeper.core.budgets import MAX_ZIP_MEMBER_BYTES
from gatekeeper.core.errors import InputError
from gatekeeper.core.gitlab_api import GitLabClient, GitLabError
from gatekeeper.core.redact import redact
from gatekeeper.history.baseline import BaselineStore, RunInfo, baseline_branch, first_comparable, read_record, unusable

__all__ = ["GitLabStore"]

TIMEOUT = (5.0, 30.0)  # connect, read
_PIPELINES = 5  # newest successful pipelines searched for a comparable result
_MAX_ZIP = 512 * 2**20


class GitLabStore(BaselineStore):
    def __init__(
        self,
        api_url: str,
        project_id: str,
        branch: str,
        token_header: tuple[str, str] | None,
        *,
        artifacts_dir: str = "artifacts",
        job_names: Sequence[str] = (),
        session: requests.Session | None = None,
    ) -> None:
        header, token = token_header or ("PRIVATE-TOKEN", "")
        self.client = GitLabClient(api_url, token, timeout=TIMEOUT, session=session, token_header=header)
        self.project = quote(str(project_id), safe="")
        self.branch = branch
        self.artifacts_dir = artifacts_dir.strip("/")
        self.job_names = tuple(job_names)
        self._token = token or None
        self.private = bool(token and header == "PRIVATE-TOKEN")
        self.why_missing = ""
        self.skipped: list[str] = []

    @classmethod
    def from_env(cls, location: str = "", environ: Mapping[str, str] | None = None) -> GitLabStore:
        env = os.environ if environ is None else environ
        missing = [v for v in ("CI_API_V4_URL", "CI_PROJECT_ID") if not env.get(v)]
        # A merge request compares with its target branch, any other pipeline with the protected branch.
        branch = location or baseline_branch(env)
        if not branch:
            missing.append("GATEKEEPER_PROTECTED_BRANCH, CI_MERGE_REQUEST_TARGET_BRANCH_NAME or CI_DEFAULT_BRANCH")
        if missing:
            raise InputError(
                None, "--baseline gitlab:", f"{', '.join(missing)} not set",
                "run inside GitLab CI, or set them (and GATEKEEPER_GITLAB_TOKEN) for a local run",
            )  # fmt: skip
        if env.get("GATEKEEPER_GITLAB_TOKEN"):
            header: tuple[str, str] | None = ("PRIVATE-TOKEN", env["GATEKEEPER_GITLAB_TOKEN"])
        elif env.get("CI_JOB_TOKEN"):
            header = ("JOB-TOKEN", env["CI_JOB_TOKEN"])
        else:
            header = None
        jobs = [j.strip() for j in env.get("GATEKEEPER_BASELINE_JOBS", "").split(",") if j.strip()]
        artifacts_dir = env.get("GATEKEEPER_BASELINE_ARTIFACTS") or "artifacts"
        return cls(
            env["CI_API_V4_URL"], env["CI_PROJECT_ID"], str(branch), header, job_names=jobs, artifacts_dir=artifacts_dir
        )

    # -- HTTP -----------------------------------------------------------------

    def _get(self, path: str, params: Mapping[str, Any] | None = None) -> bytes | None:
        """The body, None on 404; InputError (redacted) for refusals, network errors and server errors."""
        try:
            return self.client.get_bytes(f"/projects/{self.project}/{path}", params=params)
        except GitLabError as err:
            if err.status in (401, 403):
                raise self._error(
                    f"GitLab API refused GET {path} ({err.status})",
                    "set GATEKEEPER_GITLAB_TOKEN to a token with read_api on this project",
                ) from None
            if err.status is None:
                raise self._error(f"GitLab API unreachable: {err}", "check CI_API_V4_URL") from None
            raise self._error(f"GitLab API answered {err.status} for {path}", "retry, or use another store") from None

    def _error(self, problem: str, hint: str) -> InputError:
        return InputError(
            None, "--baseline gitlab:", redact(problem, extra=[self._token] if self._token else None), hint
        )

    def _json(self, body: bytes, path: str) -> Any:
        try:  # the strict reader, as core/gitlab_api.py reads GitLab's answers
            return files.parse_json(body, path, what="GitLab answer")
        except InputError:
            raise self._error(f"GitLab API answered non-JSON for {path}", "check CI_API_V4_URL") from None

    # -- finding stage results -----------------------------------------------

    def _report_from(self, data: bytes, where: str) -> StageReport | None:
        report, problem = read_record(data, where)
        if report is None:
            self.why_missing = f"{where} is not a readable stage result ({problem})"
        return report

    def _from_job(self, job: Mapping[str, Any], stage: str) -> StageReport | None:
        name = f"{self.artifacts_dir}/{stage}.json" if self.artifacts_dir else f"{stage}.json"
        body = self._get(f"jobs/{int(job['id'])}/artifacts/{quote(name)}")
        if body is not None:
            return self._report_from(body, f"job {job['id']} {name}")
        archive = job.get("artifacts_file") or {}
        if not archive or int(archive.get("size") or 0) > _MAX_ZIP:  # never pull a checkpoint-sized archive
            return None
        body = self._get(f"jobs/{int(job['id'])}/artifacts")
        if body is None or len(body) > _MAX_ZIP:
            return None
        try:
            with zipfile.ZipFile(io.BytesIO(body)) as zf:
                infos = {i.filename: i for i in zf.infolist()}
                # the path the stage wrote first; any <stage>.json only when that is absent
                anywhere = (i for n, i in infos.items() if n.rsplit("/", 1)[-1] == f"{stage}.json")
                info = infos[name] if name in infos else next(anywhere, None)
                if info is None:
                    return None
                # The header's size is checked before inflating, and the read is capped in case it lies.
                if info.file_size > MAX_ZIP_MEMBER_BYTES:
                    self.why_missing = f"job {job['id']} {info.filename} is too large ({info.file_size} bytes)"
                    return None
                with zf.open(info) as fh:
                    data = fh.read(MAX_ZIP_MEMBER_BYTES + 1)
                if len(data) > MAX_ZIP_MEMBER_BYTES:
                    self.why_missing = f"job {job['id']} {info.filename} is too large (inflates past its header)"
                    return None
                return self._report_from(data, f"job {job['id']} {info.filename}")
        except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, RuntimeError, OSError, EOFError):
            self.why_missing = f"job {job['id']} artifacts are not a zip archive"
            return None

    def _candidates_by_pipeline(self, stage: str) -> Iterator[tuple[RunInfo, StageReport]]:
        """Reports of ``stage`` from the branch's successful pipelines, newest first, fetched lazily."""
        params = {"ref": self.branch, "status": "success", "order_by": "id", "sort": "desc", "per_page": _PIPELINES}
        body = self._get("pipelines", params)
        pipelines = self._json(body, "pipelines") if body is not None else []
        if not pipelines:
            self.why_missing = f"no successful pipeline on {self.branch}"
        for pipeline in pipelines[:_PIPELINES]:
            path = f"pipelines/{int(pipeline['id'])}/jobs"
            body = self._get(path, {"scope[]": "success", "per_page": 100})
            for job in self._json(body, path) if body is not None else []:
                if self.job_names and job.get("name") not in self.job_names:
                    continue
                report = self._from_job(job, stage)
                if report is not None and report.stage == stage:
                    info = RunInfo(
                        ref=self.branch,
                        commit=pipeline.get("sha"),
                        pipeline_id=str(pipeline["id"]),
                        verdict="pass",  # a successful pipeline: its gate passed or only warned
                        recorded_at=pipeline.get("updated_at") or report.started_at,
                        run_id=f"job {job['id']}",
                    )
                    yield info, report

    def _candidates_by_ref(self, stage: str) -> Iterator[tuple[RunInfo, StageReport]]:
        name = f"{self.artifacts_dir}/{stage}.json" if self.artifacts_dir else f"{stage}.json"
        for job in self.job_names or (stage,):
            body = self._get(f"jobs/artifacts/{quote(self.branch, safe='')}/raw/{quote(name)}", {"job": job})
            report = self._report_from(body, f"{job} {name}") if body is not None else None
            if report is not None and report.stage == stage:
                yield (
                    RunInfo(ref=self.branch, recorded_at=report.started_at, run_id=f"latest {job} of {self.branch}"),
                    report,
                )

    def latest_record(
        self, stage: str, like: StageReport, *, branch: str | None = None
    ) -> tuple[RunInfo, StageReport] | None:
        """``branch`` is already this store's own (the spec's, else the target or protected branch)."""
        self.why_missing = ""
        self.skipped = []
        reports = self._candidates_by_pipeline(stage) if self.private else self._candidates_by_ref(stage)
        found, reasons = first_comparable(self._usable(reports), like, passed_only=True)
        if found is not None:
            return found
        if reasons:
            self.why_missing = reasons[0]
        elif not self.why_missing:
            self.why_missing = f"no {stage}.json in the latest successful artifacts of {self.branch}"
        return None

    def _usable(self, reports: Iterable[tuple[RunInfo, StageReport]]) -> Iterator[tuple[RunInfo, StageReport]]:
        """The records that may be a baseline, fetched one at a time; the others are named in ``skipped``."""
        for info, report in reports:
            problem = unusable(report.to_dict())
            if problem:
                self.skipped.append(f"baseline record {info.describe()} skipped: {problem}")
                continue
            yield info, report

    def history(
        self, stage: str, *, channel: str | None = None, limit: int = 50
    ) -> Sequence[tuple[RunInfo, StageReport]]:
        reports = self._candidates_by_pipeline(stage) if self.private else self._candidates_by_ref(stage)
        out = []
        for info, r in reports:
            if not channel or r.environment.channel == channel:
                out.append((info, r))
            if len(out) >= limit:
                break
        return out

    def save(self, report: StageReport, info: RunInfo) -> None:
        raise InputError(
            None, "--baseline gitlab:", "the gitlab store is read-only: results are the pipelines' own artifacts",
            "save history to sqlite:PATH or git:BRANCH",
        )  # fmt: skip
