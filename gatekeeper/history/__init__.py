"""Baseline stores: where earlier stage results come from, behind one Protocol.

``--baseline`` takes a store spec: a directory (``DIR`` or ``file:DIR``: stage
JSON files of an earlier pipeline), ``sqlite:PATH``, ``gitlab:`` or
``git:BRANCH``. STORES is the explicit registry of spec prefixes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from gatekeeper.contract.stage_report import Environment, StageReport

__all__ = [
    "BASELINE_VERDICTS",
    "STORES",
    "BaselineStore",
    "RunInfo",
    "baseline_branch",
    "comparability",
    "open_store",
    "unusable",
]

# Only a run whose gate verdict was one of these may become a baseline (a blocked run never does).
BASELINE_VERDICTS = ("pass", "warn")


@dataclass(frozen=True)
class RunInfo:
    """Where a stage result came from: recorded beside it by stores that keep history."""

    ref: str | None = None  # branch or tag
    commit: str | None = None
    pipeline_id: str | None = None
    verdict: str | None = None  # the gate verdict of that pipeline, when known
    recorded_at: str | None = None
    run_id: str | None = None  # the store's own id of the record (sqlite row, git file, GitLab job)

    def to_dict(self) -> dict[str, str | None]:
        return dict(self.__dict__)

    def describe(self) -> str:
        parts = [f"run {self.run_id}" if self.run_id else "", f"branch {self.ref}" if self.ref else ""]
        parts += [
            f"commit {self.commit[:12]}" if self.commit else "",
            f"from {self.recorded_at}" if self.recorded_at else "",
        ]
        return ", ".join(p for p in parts if p) or "no run information"


class BaselineStore(Protocol):
    """One interface for every store; each takes its location as an argument."""

    def latest(self, stage: str, like: StageReport) -> StageReport | None:
        """The newest stored result of ``stage`` comparable with ``like`` (see ``comparability``)."""
        ...

    def history(
        self, stage: str, *, channel: str | None = None, limit: int = 50
    ) -> Sequence[tuple[RunInfo, StageReport]]:
        """Newest first."""
        ...

    def latest_record(
        self, stage: str, like: StageReport, *, branch: str | None = None
    ) -> tuple[RunInfo, StageReport] | None:
        """Like ``latest``, restricted to ``branch`` (None: any) and to runs whose verdict may be a baseline,
        with where the result came from. Records that cannot be read are skipped and named in ``skipped``."""
        ...

    def save(self, report: StageReport, info: RunInfo) -> None: ...


def baseline_branch(environ: Mapping[str, str]) -> str | None:
    """The branch whose results are the baseline: a merge request's target branch, else the protected branch
    (``GATEKEEPER_BASELINE_BRANCH``, ``GATEKEEPER_PROTECTED_BRANCH``, ``CI_DEFAULT_BRANCH``); None outside CI."""
    names = ("CI_MERGE_REQUEST_TARGET_BRANCH_NAME", "GATEKEEPER_BASELINE_BRANCH", "GATEKEEPER_PROTECTED_BRANCH")
    for name in (*names, "CI_DEFAULT_BRANCH"):
        if environ.get(name):
            return environ[name]
    return None


def unusable(doc: Any) -> str | None:
    """Why a stored record cannot be a baseline (not a stage result, non-finite or non-positive timings), or None."""
    from gatekeeper.contract.stage_report import bad_numbers

    if not isinstance(doc, Mapping) or not isinstance(doc.get("metrics"), Mapping):
        return "not a stage result"
    try:
        problem = bad_numbers(doc)
    except (TypeError, AttributeError):
        return "malformed metrics"
    return f"{problem[0]}: {problem[1]}" if problem else None


# The environment fields that must match for two results to be compared at all
# (a nightly result is never the stable channel's baseline).
_MUST_MATCH = ("channel", "device_kind", "arch")


def comparability(baseline: StageReport, candidate: StageReport) -> str | None:
    """None when comparable, else the reason in plain words (never compared silently)."""
    b, c = baseline.environment, candidate.environment
    for name in _MUST_MATCH:
        bv, cv = _env_value(b, name), _env_value(c, name)
        if bv != cv:
            return f"baseline ran on {name} {bv}, this run on {cv}"
    if _minor(b.rocm_version) != _minor(c.rocm_version):
        return f"baseline ran on ROCm {b.rocm_version}, this run on ROCm {c.rocm_version}"
    # "sweep": a sweep's points are compared point by point with the same sweep's, never with a single run
    for key in ("model", "batch_size", "input_shape", "sweep"):
        if baseline.config.get(key) != candidate.config.get(key):
            return f"baseline used {key}={baseline.config.get(key)!r}, this run {key}={candidate.config.get(key)!r}"
    return None


def _env_value(env: Environment, name: str) -> Any:
    return env.arch if name == "arch" else getattr(env, name)


def _minor(version: str | None) -> str | None:
    return ".".join(version.split(".")[:2]) if version else None


def _open_file_store(location: str, environ: Mapping[str, str] | None = None) -> BaselineStore:
    from gatekeeper.history.file import FileStore

    return FileStore(location)


def _open_sqlite_store(location: str, environ: Mapping[str, str] | None = None) -> BaselineStore:
    from gatekeeper.history.sqlite import SqliteStore

    return SqliteStore(location)


def _open_gitlab_store(location: str, environ: Mapping[str, str] | None = None) -> BaselineStore:
    from gatekeeper.history.gitlab import GitLabStore

    return GitLabStore.from_env(location, environ)


def _open_git_store(location: str, environ: Mapping[str, str] | None = None) -> BaselineStore:
    from gatekeeper.history.git import GitStore

    env = os.environ if environ is None else environ
    return GitStore(location, remote=env.get("GATEKEEPER_GIT_REMOTE") or None)


# spec prefix -> factory(location, environ): environ is where gitlab: and git: read their variables
STORES: dict[str, Callable[[str, Mapping[str, str] | None], BaselineStore]] = {
    "file": _open_file_store,
    "sqlite": _open_sqlite_store,
    "gitlab": _open_gitlab_store,
    "git": _open_git_store,
}


def open_store(spec: str, environ: Mapping[str, str] | None = None) -> BaselineStore:
    from gatekeeper.core.errors import InputError

    prefix, sep, location = spec.partition(":")
    if not sep or len(prefix) == 1:  # a bare directory (or a Windows drive letter)
        prefix, location = "file", spec
    factory = STORES.get(prefix)
    if factory is None:
        raise InputError(None, "--baseline", f"unknown baseline store {prefix!r}", f"use one of: {', '.join(STORES)}")
    return factory(location, environ)
