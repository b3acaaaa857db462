"""GitStore (``git:BRANCH``): stage results as files on a data branch of the repository.

For teams without a shared disk: like benchmark history kept on a data
branch. ``save`` commits ``results/<stage>/<time>-<commit>-<id>.json`` to the
branch through a temporary index (``GIT_INDEX_FILE``) and ``update-ref`` with
the old value, so the checked-out branch, index and working tree are never
touched and two writers cannot lose each other's commit. With a ``remote``
(``GATEKEEPER_GIT_REMOTE`` through ``open_store``), ``latest`` fetches the
branch first and ``save`` pushes it (retrying on a concurrent push).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import tempfile
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import git

from gatekeeper.contract.stage_report import StageReport
from gatekeeper.core import files
from gatekeeper.core.errors import InputError
from gatekeeper.core.redact import redact
from gatekeeper.history.baseline import (
    BASELINE_VERDICTS,
    BaselineStore,
    RunInfo,
    beyond_clock,
    first_comparable,
    read_record,
)

__all__ = ["GitStore"]

GIT_TIMEOUT_S = 120  # every git child is killed after this (gitpython's kill_after_timeout)
_RETRIES = 5
_IDENTITY = {
    "GIT_AUTHOR_NAME": "gatekeeper",
    "GIT_AUTHOR_EMAIL": "gatekeeper@localhost",
    "GIT_COMMITTER_NAME": "gatekeeper",
    "GIT_COMMITTER_EMAIL": "gatekeeper@localhost",
}


class GitStore(BaselineStore):
    def __init__(self, branch: str, repo: str | Path = ".", *, remote: str | None = None) -> None:
        if not branch:
            raise InputError(None, "--baseline git:", "no branch given", "e.g. git:gatekeeper-results")
        try:
            self.repo = git.Repo(repo, search_parent_directories=True)
            self.repo.git.check_ref_format("--branch", branch, kill_after_timeout=GIT_TIMEOUT_S)
        except git.InvalidGitRepositoryError:
            raise InputError(Path(repo), "", "not inside a git repository", "run from the repository") from None
        except git.GitCommandError:
            raise InputError(
                None,
                "--baseline git:",
                f"{branch!r} is not a valid branch name",
                "use a branch name git accepts, e.g. git:gatekeeper-history",
            ) from None
        self.branch = branch
        self.why_missing = ""  # why the last latest() returned None
        self.skipped: list[str] = []  # records the last latest() could not use
        self.ref = f"refs/heads/{branch}"
        self.remote = remote

    def _git(self, *args: str, env: Mapping[str, str] | None = None, **kw: Any) -> str:
        try:
            if env:
                with self.repo.git.custom_environment(**env):
                    return self.repo.git.execute(["git", *args], kill_after_timeout=GIT_TIMEOUT_S, **kw)
            return self.repo.git.execute(["git", *args], kill_after_timeout=GIT_TIMEOUT_S, **kw)
        except git.GitCommandError as err:
            problem = redact(f"git {args[0]} failed: {(err.stderr or '').strip() or err.status}")
            raise InputError(None, f"--baseline git:{self.branch}", problem, "check the branch and remote") from None

    def _tip(self) -> str | None:
        try:
            return self.repo.git.rev_parse("--verify", "--quiet", self.ref, kill_after_timeout=GIT_TIMEOUT_S)
        except git.GitCommandError:
            return None

    def _fetch(self) -> None:
        if self.remote:
            try:  # a missing remote branch just means no results yet
                self._git("fetch", "--quiet", self.remote, f"+{self.ref}:refs/gatekeeper/remote-{self.branch}")
            except InputError:
                return
            self._git("update-ref", self.ref, f"refs/gatekeeper/remote-{self.branch}")

    # -- reading ---------------------------------------------------------------

    def _records(self, stage: str) -> list[tuple[RunInfo, StageReport]]:
        self._fetch()
        tip = self._tip()
        if tip is None:
            return []
        try:
            tree = self.repo.commit(tip).tree / "results" / stage
        except KeyError:
            return []
        out = []
        now = dt.datetime.now(dt.timezone.utc)
        for blob in sorted(tree.blobs, key=lambda b: b.name, reverse=True):
            where = f"{self.branch}:results/{stage}/{blob.name}"
            # the name orders the records (newest first) and the file says when it was recorded: neither is
            # believed past this job's clock (baseline.beyond_clock), or that file is every later run's baseline
            named = _name_time(blob.name)
            late = beyond_clock(named, now, field="name") if named else "its name does not start with a time"
            if late:
                self.skipped.append(f"baseline record {where} skipped: {late}")
                continue
            try:
                doc = files.parse_json(blob.data_stream.read(), where, what="stored record")
                fields = doc.get("info", {}) if isinstance(doc, dict) else None
                if not isinstance(fields, dict) or not all(isinstance(v, str | None) for v in fields.values()):
                    raise InputError(
                        where,
                        "info",
                        "not a record gatekeeper wrote (info is not a map of strings)",
                        "remove the hand-edited record from the history branch",
                    )
                info = RunInfo(**{**fields, "run_id": where})
                late = beyond_clock(info.recorded_at, now)
                if late:
                    raise InputError(where, "info", late, "remove the record from the history branch")
            except (InputError, TypeError) as err:  # a file someone edited by hand: not a baseline
                self.skipped.append(f"baseline record {where} skipped: {err}")
                continue
            report, problem = read_record(doc.get("report"), where)
            if report is None:
                self.skipped.append(f"baseline record {info.describe()} skipped: {problem}")
                continue
            out.append((info, report))
        return out

    def latest_record(
        self, stage: str, like: StageReport, *, branch: str | None = None
    ) -> tuple[RunInfo, StageReport] | None:
        self.skipped = []
        on = f" from {branch}" if branch else ""
        self.why_missing = f"no passed {stage} result{on} on branch {self.branch}"
        candidates = (
            (info, report)
            for info, report in self._records(stage)
            if (not branch or info.ref == branch)
            and report.status == "passed"
            and (info.verdict is None or info.verdict in BASELINE_VERDICTS)
        )
        found, reasons = first_comparable(candidates, like)
        if found is not None:
            self.why_missing = ""
        elif reasons:
            self.why_missing = reasons[0]  # the newest candidate's reason, as the GitLab store reports
        return found

    def history(
        self, stage: str, *, channel: str | None = None, limit: int = 50
    ) -> Sequence[tuple[RunInfo, StageReport]]:
        records = self._records(stage)
        return [r for r in records if not channel or r[1].environment.channel == channel][:limit]

    # -- writing ---------------------------------------------------------------

    def save(self, report: StageReport, info: RunInfo) -> None:
        when = _stamp(info.recorded_at)
        info = dataclasses.replace(info, recorded_at=info.recorded_at or when.isoformat(), run_id=None)
        record = {k: v for k, v in info.to_dict().items() if k != "run_id"}
        name = (
            f"results/{report.stage}/{when:%Y%m%dT%H%M%S%fZ}-{(info.commit or 'none')[:12]}-{uuid.uuid4().hex[:8]}.json"
        )
        data = json.dumps({"info": record, "report": report.to_dict()}, indent=1).encode()
        for _ in range(_RETRIES):
            self._fetch()
            old = self._tip()
            new = self._commit(old, name, data, f"gatekeeper: {report.stage} {info.commit or ''}".strip())
            try:
                self._git("update-ref", self.ref, new, old or "0" * 40)  # compare-and-swap against a local racer
            except InputError:
                continue
            if not self.remote:
                return
            try:
                self._git("push", "--quiet", self.remote, f"{self.ref}:{self.ref}")
                return
            except InputError:
                continue  # someone pushed first: fetch their tip and commit on top of it
        raise InputError(
            None, f"--baseline git:{self.branch}", f"could not record the result after {_RETRIES} tries",
            "another writer keeps moving the branch; retry",
        )  # fmt: skip

    def _commit(self, parent: str | None, name: str, data: bytes, message: str) -> str:
        with tempfile.TemporaryDirectory(prefix="gatekeeper-index-") as tmp:
            env = {"GIT_INDEX_FILE": str(Path(tmp) / "index"), **_identity(self.repo)}
            if parent:
                self._git("read-tree", parent, env=env)
            with tempfile.TemporaryFile() as stdin:
                stdin.write(data)
                stdin.seek(0)
                blob = self._git("hash-object", "-w", "--stdin", env=env, istream=stdin)
            self._git("update-index", "--add", "--cacheinfo", f"100644,{blob},{name}", env=env)
            tree = self._git("write-tree", env=env)
            return self._git("commit-tree", tree, *(["-p", parent] if parent else []), "-m", message, env=env)


def _identity(repo: git.Repo) -> dict[str, str]:
    """A fallback author for CI runners without user.name/user.email (an existing identity wins)."""
    reader = repo.config_reader()
    if reader.has_option("user", "name") and reader.has_option("user", "email"):
        return {}
    return {k: os.environ.get(k, v) for k, v in _IDENTITY.items()}


def _name_time(name: str) -> str | None:
    """The time a record's file name starts with (``save``: ``%Y%m%dT%H%M%S%fZ``), ISO 8601; None if none."""
    try:
        return dt.datetime.strptime(name[:22], "%Y%m%dT%H%M%S%fZ").replace(tzinfo=dt.timezone.utc).isoformat()
    except ValueError:
        return None


def _stamp(recorded_at: str | None) -> dt.datetime:
    if recorded_at:
        try:
            when = dt.datetime.fromisoformat(recorded_at)
            return (when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)).astimezone(dt.timezone.utc)
        except ValueError:
            pass
    return dt.datetime.now(dt.timezone.utc)
