"""GitLabStore (``gitlab:`` or ``gitlab:BRANCH``): the newest successful pipeline's artifacts of the target branch.

For merge requests: the baseline is what the target branch's last green
pipeline measured. Two routes through the REST API:

- with a token that may list pipelines (``GATEKEEPER_GITLAB_TOKEN``, sent as
  ``PRIVATE-TOKEN``): successful pipelines of the branch, newest first, their
  successful jobs, and ``artifacts/<stage>.json`` of each (by path, else
  searched in the artifacts zip), up to the first comparable one;
- with only ``CI_JOB_TOKEN`` (sent as ``JOB-TOKEN``, which may not list
  pipelines): the ref's latest successful artifacts of the named jobs
  (``GATEKEEPER_BASELINE_JOBS``, default: the stage name).

Tokens go in headers only and are redacted from every message. This store
keeps its own session rather than ``gatekeeper.gitlab.GitLabClient``: it needs
raw bytes (artifact files and zips), 404 as "no baseline" rather than an
error, and the JOB-TOKEN header, which that JSON client does not offer.
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import quote

import requests

from gatekeeper.artifacts import StageReport
from gatekeeper.baseline import RunInfo, comparability
from gatekeeper.budgets import MAX_ZIP_MEMBER_BYTES
from gatekeeper.errors import InputError
from gatekeeper.redact import redact

__all__ = ["GitLabStore"]

TIMEOUT = (5.0, 30.0)  # connect, read
_PIPELINES = 5  # newest successful pipelines searched for a comparable result
_MAX_ZIP = 512 * 2**20


class GitLabStore:
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
        self.api_url = api_url.rstrip("/")
        self.project = quote(str(project_id), safe="")
        self.branch = branch
        self.artifacts_dir = artifacts_dir.strip("/")
        self.job_names = tuple(job_names)
        self.session = session or requests.Session()
        self._token = token_header[1] if token_header else None
        if token_header:
            self.session.headers[token_header[0]] = token_header[1]
        self.private = bool(token_header and token_header[0] == "PRIVATE-TOKEN")
        self.why_missing = ""

    @classmethod
    def from_env(cls, location: str = "", environ: Mapping[str, str] | None = None) -> GitLabStore:
        env = os.environ if environ is None else environ
        missing = [v for v in ("CI_API_V4_URL", "CI_PROJECT_ID") if not env.get(v)]
        branch = location or env.get("CI_MERGE_REQUEST_TARGET_BRANCH_NAME") or env.get("CI_DEFAULT_BRANCH")
        if not branch:
            missing.append("CI_MERGE_REQUEST_TARGET_BRANCH_NAME or CI_DEFAULT_BRANCH")
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
        return cls(env["CI_API_V4_URL"], env["CI_PROJECT_ID"], str(branch), header, job_names=jobs)

    # -- HTTP -----------------------------------------------------------------

    def _get(self, path: str, params: Mapping[str, Any] | None = None) -> requests.Response | None:
        """The response, None on 404; InputError (redacted) for refusals, network errors and server errors."""
        url = f"{self.api_url}/projects/{self.project}/{path}"
        try:
            resp = self.session.get(url, params=params, timeout=TIMEOUT)
        except requests.RequestException as err:
            raise self._error(f"GitLab API unreachable: {type(err).__name__}: {err}", "check CI_API_V4_URL") from None
        if resp.status_code == 404:
            return None
        if resp.status_code in (401, 403):
            raise self._error(
                f"GitLab API refused {resp.request.method} {resp.url} ({resp.status_code})",
                "set GATEKEEPER_GITLAB_TOKEN to a token with read_api on this project",
            )
        if resp.status_code >= 400:
            raise self._error(f"GitLab API answered {resp.status_code} for {resp.url}", "retry, or use another store")
        return resp

    def _error(self, problem: str, hint: str) -> InputError:
        return InputError(
            None, "--baseline gitlab:", redact(problem, extra=[self._token] if self._token else None), hint
        )

    def _json(self, resp: requests.Response) -> Any:
        try:
            return resp.json()
        except ValueError:
            raise self._error(f"GitLab API answered non-JSON for {resp.url}", "check CI_API_V4_URL") from None

    # -- finding stage results -----------------------------------------------

    def _report_from(self, data: bytes, where: str) -> StageReport | None:
        try:
            return StageReport.from_dict(json.loads(data))
        except (ValueError, KeyError, TypeError) as err:
            self.why_missing = f"{where} is not a readable stage result ({type(err).__name__}: {err})"
            return None

    def _from_job(self, job: Mapping[str, Any], stage: str) -> StageReport | None:
        name = f"{self.artifacts_dir}/{stage}.json" if self.artifacts_dir else f"{stage}.json"
        resp = self._get(f"jobs/{int(job['id'])}/artifacts/{quote(name)}")
        if resp is not None:
            return self._report_from(resp.content, f"job {job['id']} {name}")
        archive = job.get("artifacts_file") or {}
        if not archive or int(archive.get("size") or 0) > _MAX_ZIP:  # never pull a checkpoint-sized archive
            return None
        resp = self._get(f"jobs/{int(job['id'])}/artifacts")
        if resp is None or len(resp.content) > _MAX_ZIP:
            return None
        try:
            with zipfile.ZipFile(io.BytesIO(resp.content)) as zf:
                info = next((i for i in zf.infolist() if i.filename.rsplit("/", 1)[-1] == f"{stage}.json"), None)
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

    def _candidates_by_pipeline(self, stage: str) -> Iterator[StageReport]:
        """Reports of ``stage`` from the branch's successful pipelines, newest first, fetched lazily."""
        params = {"ref": self.branch, "status": "success", "order_by": "id", "sort": "desc", "per_page": _PIPELINES}
        resp = self._get("pipelines", params)
        pipelines = self._json(resp) if resp is not None else []
        if not pipelines:
            self.why_missing = f"no successful pipeline on {self.branch}"
        for pipeline in pipelines[:_PIPELINES]:
            resp = self._get(f"pipelines/{int(pipeline['id'])}/jobs", {"scope[]": "success", "per_page": 100})
            for job in self._json(resp) if resp is not None else []:
                if self.job_names and job.get("name") not in self.job_names:
                    continue
                report = self._from_job(job, stage)
                if report is not None and report.stage == stage:
                    yield report

    def _candidates_by_ref(self, stage: str) -> Iterator[StageReport]:
        name = f"{self.artifacts_dir}/{stage}.json" if self.artifacts_dir else f"{stage}.json"
        for job in self.job_names or (stage,):
            resp = self._get(f"jobs/artifacts/{quote(self.branch, safe='')}/raw/{quote(name)}", {"job": job})
            report = self._report_from(resp.content, f"{job} {name}") if resp is not None else None
            if report is not None and report.stage == stage:
                yield report

    def latest(self, stage: str, like: StageReport) -> StageReport | None:
        self.why_missing = ""
        reports = self._candidates_by_pipeline(stage) if self.private else self._candidates_by_ref(stage)
        reasons = []
        for report in reports:
            reason = comparability(report, like)
            if reason is None and report.status == "passed":
                return report
            reasons.append(reason or f"the baseline stage {report.status}")
        if reasons:
            self.why_missing = reasons[0]
        elif not self.why_missing:
            self.why_missing = f"no {stage}.json in the latest successful artifacts of {self.branch}"
        return None

    def history(
        self, stage: str, *, channel: str | None = None, limit: int = 50
    ) -> Sequence[tuple[RunInfo, StageReport]]:
        reports = self._candidates_by_pipeline(stage) if self.private else self._candidates_by_ref(stage)
        out = []
        for r in reports:
            if not channel or r.environment.channel == channel:
                out.append((RunInfo(ref=self.branch, recorded_at=r.started_at), r))
            if len(out) >= limit:
                break
        return out

    def save(self, report: StageReport, info: RunInfo) -> None:
        raise InputError(
            None, "--baseline gitlab:", "the gitlab store is read-only: results are the pipelines' own artifacts",
            "save history to sqlite:PATH or git:BRANCH",
        )  # fmt: skip
